"""Tuning tasks: the tunable kernels of a model, deduplicated by workload and weighted."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tvmc.codegen.target import target_kind
from tvmc.graph import Graph, Node, TensorType
from tvmc.ops import OPS
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.space import ConfigSpace

# FLOPs a byte of memory traffic stands for when weighing tasks of no FLOPs (pools, reductions)
# beside compute-bound ones: about the fp32 flop/byte balance of a CPU or GPU (H200: ~14, this
# CPU's two cores: ~10), so a memory-bound task weighs what its time would cost in FLOPs
BYTE_FLOPS = 8
THREADS = "THREADS"  # the args entry of a workload whose kernels run on a fixed thread count


@dataclass
class Task:
    """One tunable workload: an op with fixed input types and attributes, and its knob space."""

    name: str  # e.g. "conv2d.llvm"
    op: str
    # ["TENSOR", shape, dtype] per input, then ["ATTRS", {...}], then ["THREADS", n] where the
    # kernels run on n threads whatever the machine's (1: images side by side, one a thread)
    args: list[Any]
    target: str
    space: ConfigSpace
    nodes: list[str] = field(default_factory=list)  # graph nodes sharing this workload
    flops: int = 0
    bytes: int = 0  # its tensors' bytes, each read or written once: the least traffic of a run

    @property
    def work(self) -> int:
        """What one run costs in FLOPs, for ordering and sharing trials: its FLOPs, or for a
        task of none (pools, reductions) its bytes at BYTE_FLOPS each."""
        return self.flops or self.bytes * BYTE_FLOPS

    @property
    def threads(self) -> int:
        """The threads its kernels run on in the model, where that is fixed (0: the machine's)."""
        return task_threads(self.args)

    @property
    def weight(self) -> int:
        """How many times the model runs this workload."""
        return len(self.nodes)

    @property
    def label(self) -> str:
        """The task as people read it: its op, key attributes and shapes ("Conv 3x3/2 64->128
        @56x56", "... on 1 thread" for an image's kernel of a batch side by side); `name` stays
        the records' key."""
        return describe_workload(self.op, self.args, self.name)

    @property
    def workload(self) -> tuple[str, str]:
        return self.name, json.dumps(self.args, separators=(",", ":"))


def describe_workload(op: str | None, args: list[Any], fallback: str) -> str:
    """A workload as people read it, from its op and serialised args; `fallback` when the op is
    unknown or the args do not fit it (a foreign record)."""
    opdef = OPS.get(op) if op else None
    if opdef is None:
        return fallback
    try:
        types = [TensorType(tuple(a[1]), a[2]) for a in args if a[0] == "TENSOR"]
        attrs = next((a[1] for a in args if a[0] == "ATTRS"), {})
        threads = task_threads(args)
        where = f" on {threads} thread{'s' if threads > 1 else ''}" if threads else ""
        return opdef.describe(attrs, types) + where
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return fallback


def task_threads(args: list[Any]) -> int:
    """A workload's fixed thread count (its ["THREADS", n] entry), else 0: the machine's."""
    return next((a[1] for a in args if isinstance(a, list) and a[:1] == [THREADS]), 0)


def task_args(node: Node, input_types: list[TensorType], threads: int = 0) -> list[Any]:
    """A workload's serialised args: its tensors, then its attributes, then its thread count
    where that is fixed (`threads` > 0): the same op run otherwise is another workload."""
    tensors = [["TENSOR", list(t.shape), t.dtype] for t in input_types]
    attrs = {k: _plain(v) for k, v in sorted(node.attrs.items())}
    return [*tensors, ["ATTRS", attrs], *([[THREADS, threads]] if threads else [])]


def task_name(op: str, target_kind: str) -> str:
    return f"{op.lower()}.{target_kind}"


def extract_tasks(
    graph: Graph, target: str, lowering_target: LoweringTarget, threads: int = 0
) -> list[Task]:
    """Tasks of every node whose template declares a knob space for this target, heaviest
    first (a space of None says the op is not tunable on this target kind); `threads` > 0: the
    kernels run on that many threads whatever the machine's (an image's of a batch side by
    side: 1), and are measured so."""
    kind = target_kind(target) or "llvm"
    tasks: dict[tuple[str, str], Task | None] = {}
    for node in graph.nodes:
        opdef = OPS[node.op]
        if not opdef.tunable(lowering_target.kind):
            continue
        types = [graph.types[n] for n in node.inputs if n]
        args = task_args(node, types, threads)
        name = task_name(node.op, kind)
        key = (name, json.dumps(args, separators=(",", ":")))
        if key not in tasks:
            space = opdef.space(node.attrs, types, lowering_target)
            flops = opdef.count_flops(node.attrs, types, [graph.types[n] for n in node.outputs])
            moved = sum(t.nbytes for t in types) + sum(
                graph.types[n].nbytes for n in node.outputs if n
            )
            tasks[key] = None if space is None else Task(
                name, node.op, args, target, space, [], flops, moved)  # fmt: skip
        task = tasks[key]
        if task is not None:
            task.nodes.append(node.name)
    found = [t for t in tasks.values() if t is not None]
    return sorted(found, key=lambda t: -t.work * t.weight)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
