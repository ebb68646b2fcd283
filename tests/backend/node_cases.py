"""The ONNX backend node tests (onnx.backend.test.case.node) through tvmc's reference path.

`python -m tests.backend.node_cases [--compiled]` prints the report by op: passed / failed /
unsupported, through the numpy references or compiled for llvm and run natively.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from tvmc.dtypes import NARROW_FLOATS
from tvmc.errors import NonConstantInputError, TVMCError, UnsupportedModelError
from tvmc.frontend import convert_model
from tvmc.frontend.converters import CONVERTERS
from tvmc.graph import DTYPES
from tvmc.ops import run_reference
from tvmc.passes import IMPORT_PIPELINE, run_passes

PASSED, FAILED, UNSUPPORTED = "passed", "failed", "unsupported"


@dataclass(frozen=True)
class Outcome:
    status: str
    reason: str = ""


@functools.cache
def node_cases() -> dict:
    """All node test cases by name (generated in memory by onnx; about 1,900)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return {case.name: case for case in collect_testcases()}


def op_types(case) -> set[str]:
    return {node.op_type for node in case.model.graph.node}


def supported(case) -> bool:
    """Every op of the case has a converter (domain default)."""
    return all(
        n.domain in ("", "ai.onnx") and n.op_type in CONVERTERS for n in case.model.graph.node
    )


def bind_inputs(model, values: dict[str, np.ndarray]):
    """A copy of `model` whose inputs in `values` are initializers holding those values.

    tvmc compiles static shapes: values that decide shapes (axes, pads, sizes, scales given as
    graph inputs) are bound at compile time, as TVM's ONNX backend binds them (freeze_params).
    """
    from onnx import numpy_helper

    bound = type(model)()
    bound.CopyFrom(model)
    for name, value in values.items():
        bound.graph.initializer.append(numpy_helper.from_array(value, name))
    return bound


def inputs_feeding(model, tensor: str) -> set[str]:
    """The names `tensor` is computed from through the main graph's nodes (inputs among them)."""
    producers = {out: node for node in model.graph.node for out in node.output}
    seen, pending = set(), [tensor]
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending += list(producers[name].input) if name in producers else []
    return seen


def as_array(value):
    """Test data as numpy (ml_dtypes arrays for bfloat16, float8, int4...); None for element
    types tvmc does not support (string, float6)."""
    if type(value).__name__ != "TensorProto":
        return value
    from onnx import numpy_helper

    array = numpy_helper.to_array(value)
    return array if array.dtype.name in DTYPES else None


def evaluate(graph, feeds: dict[str, np.ndarray], compiled: bool) -> dict[str, np.ndarray]:
    """Outputs by name: the numpy references, or the graph compiled for llvm and run natively."""
    if not compiled:
        return run_reference(graph, feeds)
    from tvmc.codegen import load_shared
    from tvmc.driver.compiler import CompileOptions, build
    from tvmc.runtime import Executor, ProgramInfo

    result = build(graph, CompileOptions())
    p = result.lowered.program
    info = ProgramInfo.of(p)
    executor = Executor(load_shared(result.artifact), info, result.lowered.param_values)
    executor.set_inputs([feeds[n] for n in graph.inputs])
    outputs = executor.run()
    return {n: out.reshape(graph.types[n].shape) for n, out in zip(graph.outputs, outputs)}


def run_case(case, compiled: bool = False) -> Outcome:
    """Convert and evaluate one case on each of its data sets; compare as onnx's runner does.

    `compiled`: compile for llvm and run the native code instead of the numpy references.
    """
    if not supported(case):
        missing = sorted(op_types(case) - set(CONVERTERS))
        return Outcome(UNSUPPORTED, f"ops {missing}")
    model = case.model
    initializers = {init.name for init in model.graph.initializer}
    input_names = [i.name for i in model.graph.input if i.name not in initializers]
    output_names = [o.name for o in model.graph.output]
    try:
        for inputs, expected in case.data_sets:
            inputs, expected = [as_array(x) for x in inputs], [as_array(x) for x in expected]
            values = [*inputs, *expected]
            if any(x is None for x in values):
                return Outcome(UNSUPPORTED, "element types tvmc does not support (string, float6)")
            if any(not isinstance(x, (np.ndarray, np.generic)) for x in values):
                return Outcome(UNSUPPORTED, "non-tensor (sequence/optional) inputs or outputs")
            feeds = {n: np.asarray(x) for n, x in zip(input_names, inputs)}
            expected = [np.asarray(x) for x in expected]
            graph = None
            bound: dict[str, np.ndarray] = {}
            while graph is None:
                try:
                    used = bind_inputs(model, bound) if bound else model
                    shapes = {n: tuple(x.shape) for n, x in feeds.items()}
                    with np.errstate(all="ignore"):
                        graph = run_passes(convert_model(used, shapes), IMPORT_PIPELINE)
                except NonConstantInputError as exc:
                    # bind the input itself, else every integer input it may be computed from,
                    # else the inputs it is computed from (a Loop's trip count from float inputs)
                    names = (
                        [exc.tensor]
                        if exc.tensor in feeds
                        else [n for n, x in feeds.items() if x.dtype.kind in "iu"]
                        or sorted(inputs_feeding(model, exc.tensor) & set(feeds))
                    )
                    if not names:
                        raise
                    bound.update((n, feeds.pop(n)) for n in names)
            with np.errstate(all="ignore"):
                results = evaluate(graph, feeds, compiled)
            for name, want in zip(output_names, expected):
                got = results[name]
                if got.dtype != want.dtype or got.shape != want.shape:
                    return Outcome(FAILED, f"{name}: got {got.dtype}{list(got.shape)}, "
                                           f"want {want.dtype}{list(want.shape)}")  # fmt: skip
                if want.dtype.name in NARROW_FLOATS:  # bfloat16, float8...: as float32 values
                    got, want = got.astype(np.float32), want.astype(np.float32)
                if want.dtype.kind in "fc":
                    ok = np.allclose(got, want, rtol=case.rtol, atol=case.atol, equal_nan=True)
                else:
                    ok = np.array_equal(got, want)
                if not ok:
                    return Outcome(FAILED, f"{name}: values differ")
    except UnsupportedModelError as exc:
        return Outcome(UNSUPPORTED, str(exc))
    except TVMCError as exc:
        return Outcome(FAILED, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a bug in a reference or rule: report it, keep going
        return Outcome(FAILED, f"{type(exc).__name__}: {exc}")
    return Outcome(PASSED)


def main_op(case) -> str:
    """The op a case is about: its name's op for expanded/multi-node cases, else its node."""
    ops = [n.op_type for n in case.model.graph.node]
    return ops[0] if len(ops) == 1 else f"{ops[-1]}*"


def report(stream=sys.stdout, compiled: bool = False) -> Counter:
    """Print passed/failed/unsupported by op and return the totals."""
    by_op: dict[str, Counter] = defaultdict(Counter)
    totals: Counter = Counter()
    failures = []
    for name, case in sorted(node_cases().items()):
        outcome = run_case(case, compiled)
        by_op[main_op(case)][outcome.status] += 1
        totals[outcome.status] += 1
        if outcome.status == FAILED:
            failures.append(f"  {name}: {outcome.reason}")
    print(f"{'op':28} {'passed':>7} {'failed':>7} {'unsupp':>7}", file=stream)
    for op, counts in sorted(by_op.items()):
        print(f"{op:28} {counts[PASSED]:7} {counts[FAILED]:7} {counts[UNSUPPORTED]:7}", file=stream)
    print(
        f"{'total':28} {totals[PASSED]:7} {totals[FAILED]:7} {totals[UNSUPPORTED]:7}", file=stream
    )
    if failures:
        print("failures:", *failures, sep="\n", file=stream)
    return totals


if __name__ == "__main__":
    import logging

    logging.getLogger("tvmc").setLevel(logging.ERROR)  # "opset 28 is newer than 22", per case
    report(compiled="--compiled" in sys.argv)
