"""Converters of static control flow: If, Loop and Scan, inlined into the one static graph.

tvmc compiles a fixed dataflow graph with static shapes, and its code has no branches or loops
between kernels. Control flow whose decisions are known at compile time is therefore resolved
there: an If whose condition folds to a constant becomes its taken branch; a Loop with a constant
trip count (its condition constant, or folding to a constant after each iteration) and a Scan
(whose length is a static shape) are unrolled, the body once per iteration, loop-carried values
passed from one copy to the next, scan outputs stacked. Anything decided at run time is refused.
"""

from __future__ import annotations

import numpy as np
import onnx

from tvmc.errors import ModelError, NonConstantInputError, UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter
from tvmc.frontend.converters.subgraph import (
    bind_outputs,
    check_unrolled_size,
    count_nodes,
    inline,
)
from tvmc.ops.common import normalize_axis

SCAN_BATCHED_BEFORE = 9  # Scan-8 has a batch axis and a sequence_lens input


def _prefix(node: OnnxNode, part: str) -> str:
    """The name prefix of one inlined copy of a subgraph: the node, then the copy."""
    return f"{node.name or node.outputs[0] or node.op_type}/{part}/"


def _scalar(ctx: ConvertContext, node: OnnxNode, index: int, what: str, why: str) -> np.ndarray:
    """Input `index` as a constant scalar; NonConstantInputError saying `why` when it is not."""
    value = ctx.const(node.input(index))
    if value is None:
        raise NonConstantInputError(
            f"{node.describe()}: its {what} (input {index}) must be a constant after folding; "
            f"{why}", node.input(index)
        )  # fmt: skip
    if value.size != 1:
        raise ModelError(f"{node.describe()}: its {what} must be one value, got shape "
                         f"{list(value.shape)}")  # fmt: skip
    return value.reshape(())


def _stack(ctx: ConvertContext, values: list[str], axis: int) -> str:
    """The tensors `values` (one shape) stacked on a new axis `axis` (negative: from the end)."""
    shape = ctx.type(values[0]).shape
    axis = normalize_axis(axis, len(shape) + 1, "a scan output")
    rows = [ctx.add("Reshape", [v], {"shape": (*shape[:axis], 1, *shape[axis:])})[0]
            for v in values]  # fmt: skip
    return ctx.add("Concat", rows, {"axis": axis})[0] if len(rows) > 1 else rows[0]


@converter("If")
def If(ctx: ConvertContext, node: OnnxNode) -> None:
    """The taken branch inlined: the condition must fold to a constant."""
    cond = _scalar(ctx, node, 0, "condition", "tvmc compiles one static graph, so it inlines the "
                   "branch the condition picks at compile time")  # fmt: skip
    branch = "then_branch" if bool(cond) else "else_branch"
    outputs = inline(ctx, node, node.attrs[branch], [], _prefix(node, branch))
    bind_outputs(ctx, node, outputs)


@converter("Loop")
def Loop(ctx: ConvertContext, node: OnnxNode) -> None:
    """The body unrolled once per iteration: a constant trip count (or a condition that folds to
    false after a number of iterations), loop-carried values chained, scan outputs stacked."""
    body: onnx.GraphProto = node.attrs["body"]
    why = "tvmc unrolls loops, so the iteration count must be known at compile time"
    trips = int(_scalar(ctx, node, 0, "trip count", why)) if node.input(0) else None
    running = bool(_scalar(ctx, node, 1, "condition", why)) if node.input(1) else True
    carried = list(node.inputs[2:])
    scan_count = len(body.output) - 1 - len(carried)
    if scan_count < 0 or len(body.input) != 2 + len(carried):
        raise ModelError(
            f"{node.describe()}: its body takes {len(body.input)} inputs and gives "
            f"{len(body.output)} outputs for {len(carried)} loop-carried values"
        )
    if running and _condition_passes_through(body):  # then every iteration runs: know it now
        if trips is None:
            raise UnsupportedModelError(f"{node.describe()}: has no trip count and its condition "
                                        "stays true, so it never ends")  # fmt: skip
        check_unrolled_size(node, ctx.unrolled + trips * count_nodes(body), f"{trips} iterations")
    scans: list[list[str]] = [[] for _ in range(scan_count)]
    i = 0
    while running and (trips is None or i < trips):
        bound = [ctx.add_const(np.array(i, np.int64)), ctx.add_const(np.array(True)), *carried]
        outputs = inline(ctx, node, body, bound, _prefix(node, f"iteration{i}"))
        cond = ctx.const(outputs[0])
        if cond is None:
            raise UnsupportedModelError(
                f"{node.describe()}: its condition depends on run-time values, so the number of "
                "iterations is not known at compile time (tvmc unrolls loops)"
            )
        running = bool(cond.reshape(-1)[0])
        carried = outputs[1 : 1 + len(carried)]
        for stacked, value in zip(scans, outputs[1 + len(carried) :]):
            stacked.append(value)
        i += 1
    if scan_count and not i:
        raise UnsupportedModelError(f"{node.describe()}: runs no iteration, so its scan outputs "
                                    "are empty with a shape tvmc cannot know")  # fmt: skip
    bind_outputs(ctx, node, [*carried, *(_stack(ctx, s, 0) for s in scans)])


def _condition_passes_through(body: onnx.GraphProto) -> bool:
    """Whether the body's condition output is its condition input (directly or by Identity)."""
    cond_in, cond_out = body.input[1].name, body.output[0].name
    return cond_in == cond_out or any(
        n.op_type == "Identity" and list(n.input) == [cond_in] and list(n.output) == [cond_out]
        for n in body.node
    )


def _ints(node: OnnxNode, attr: str, count: int, default: int) -> list[int]:
    values = list(node.attrs.get(attr, [default] * count))
    if len(values) != count:
        raise ModelError(f"{node.describe()}: {attr} has {len(values)} entries for {count}")
    return [int(v) for v in values]


def _scan(
    ctx: ConvertContext, node: OnnxNode, states: list[str], sequences: list[str],
    in_axes: list[int], in_reverse: list[int], part: str,
) -> tuple[list[str], list[str]]:  # fmt: skip
    """(final states, scan outputs) of one Scan over `sequences` sliced on `in_axes`."""
    body: onnx.GraphProto = node.attrs["body"]
    outputs_count = len(body.output) - len(states)
    out_axes = _ints(node, "scan_output_axes", outputs_count, 0)
    out_reverse = _ints(node, "scan_output_directions", outputs_count, 0)
    lengths = {ctx.type(x).shape[a] for x, a in zip(sequences, in_axes)}
    if len(lengths) != 1:
        raise ModelError(f"{node.describe()}: its scan inputs differ in length: {sorted(lengths)}")
    (length,) = lengths
    if outputs_count and not length:
        raise UnsupportedModelError(f"{node.describe()}: scans an empty sequence, so its scan "
                                    "outputs have a shape tvmc cannot know")  # fmt: skip
    stacked: list[list[str]] = [[] for _ in range(outputs_count)]
    for t in range(length):
        slices = []
        for x, axis, reverse in zip(sequences, in_axes, in_reverse):
            index = ctx.add_const(np.array(length - 1 - t if reverse else t, np.int64))
            slices.append(ctx.add("Gather", [x, index], {"axis": axis})[0])
        outputs = inline(ctx, node, body, [*states, *slices], _prefix(node, f"{part}step{t}"))
        states = outputs[: len(states)]
        for values, value in zip(stacked, outputs[len(states) :]):
            values.append(value)
    scanned = [_stack(ctx, v[::-1] if reverse else v, axis)
               for v, axis, reverse in zip(stacked, out_axes, out_reverse)]  # fmt: skip
    return states, scanned


@converter("Scan")
def Scan(ctx: ConvertContext, node: OnnxNode) -> None:
    """The body unrolled once per element of the scanned axis (a static shape). Scan-8, with a
    batch axis, runs that per batch entry, its sequence_lens (if any) constant and full."""
    count = int(node.attrs["num_scan_inputs"])
    if ctx.opset >= SCAN_BATCHED_BEFORE:
        states, sequences = node.inputs[: len(node.inputs) - count], node.inputs[-count:]
        axes = [normalize_axis(a, ctx.type(x).ndim, "Scan")
                for a, x in zip(_ints(node, "scan_input_axes", count, 0), sequences)]  # fmt: skip
        reverse = _ints(node, "scan_input_directions", count, 0)
        finals, scanned = _scan(ctx, node, states, sequences, axes, reverse, "")
        bind_outputs(ctx, node, [*finals, *scanned])
        return
    states, sequences = node.inputs[1 : len(node.inputs) - count], node.inputs[-count:]
    batch = ctx.type(sequences[0]).shape[0]
    if node.input(0):
        lengths = ctx.require_const(node, 0, "sequence_lens")
        full = ctx.type(sequences[0]).shape[1]
        if lengths.shape != (batch,) or (lengths != full).any():
            raise UnsupportedModelError(
                f"{node.describe()}: sequence_lens {lengths.tolist()} "
                f"shorter than the sequence ({full}) are not supported"
            )
    reverse = _ints(node, "directions", count, 0)
    per_entry: list[list[str]] = []
    for b in range(batch):
        index = ctx.add_const(np.array(b, np.int64))
        entry = [ctx.add("Gather", [x, index], {"axis": 0})[0] for x in node.inputs[1:]]
        finals, scanned = _scan(ctx, node, entry[: len(states)], entry[len(states) :],
                                [0] * count, reverse, f"batch{b}/")  # fmt: skip
        per_entry.append([*finals, *scanned])
    bind_outputs(ctx, node, [_stack(ctx, list(values), 0) for values in zip(*per_entry)])
