"""Benchmark (not a test): the conv template's Winograd schedules beside its direct conv, per
3x3 conv of the given models that Winograd can compute (tvmc.ops.conv.cpu_winograd.eligible).

    .venv/bin/python benchmarks/winograd.py [--rounds 4] [models...]   # default vgg19, resnet50
    .venv/bin/python benchmarks/winograd.py --convs 256,256,10 512,512,12   # C,K,N: C->K on NxN

For each such conv: the direct conv's default plan, "winograd2" and "winograd4" (F(2x2,3x3),
F(4x4,3x3), their default GEMM tiles), each built and run as `heavy_convs.py --cpu-time` runs a
config (one thread, timed by the thread's CPU time), in alternating blocks of 5 runs in one
process; `--cold-weights`: the weights fetched from memory in each run, as in a model whose
weights outgrow the caches (where F4's transformed weights, 4x the direct conv's, cost). Prints
the direct conv's GFLOP/s, each Winograd's speedup over it (best of the runs), its max error
against the op's reference relative to max |y|, and the schedule the template picks by default
(`default_tile`'s rule); per model, the default's speedup over the direct conv on its eligible
3x3 convs (each counted as often as the model runs it) beside the fastest of the three per
conv. The figures behind `default_tile` (docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import numpy as np
import onnx
from heavy_convs import cache_flush_array, config_of, cpu_timed, default_conv_plan, task_types
from onnx import TensorProto, helper, numpy_helper
from suite import by_names

import tvmc
from tvmc.autotune.measure import MeasureInput, TaskOp
from tvmc.autotune.measure_cpu import allocate_buffers, build
from tvmc.codegen import CPUTarget, load_object, set_num_threads
from tvmc.ops.conv.cpu import geometry_of
from tvmc.ops.conv.cpu_winograd import SCHEDULES, eligible
from tvmc.ops.conv.geometry import ConvGeometry

VARIANTS = ("direct", *SCHEDULES)


def eligible_convs(models: list[str]) -> list[tuple[str, ConvGeometry, object]]:
    """(model, geometry, task) of each distinct Winograd-eligible conv task of `models`."""
    found, seen = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for model in by_names(models):
            for task in tvmc.extract_tasks(tvmc.load(model.onnx_path(tmp)), "llvm"):
                if task.op != "Conv" or task.workload in seen:
                    continue
                types, _ = task_types(task)
                geo = geometry_of(task.op, TaskOp.of(task).node.attrs, types)
                if eligible(geo, types[0].dtype):
                    seen.add(task.workload)
                    found.append((model.name, geo, task))
    return found


def conv_model(channels: int, out_channels: int, plane: int, path: str) -> str:
    """A one-node 3x3 Conv (pads 1, seeded weights) of `channels` -> `out_channels` on a plane
    of `plane` x `plane`, saved at `path`."""
    w = np.random.default_rng(0).standard_normal((out_channels, channels, 3, 3)) * 0.05
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, plane, plane])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, out_channels, plane, plane])
    weights = numpy_helper.from_array(w.astype(np.float32), "w")
    graph = helper.make_graph([node], "conv", [x], [y], [weights])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def synthetic_convs(specs: list[str]) -> list[tuple[str, ConvGeometry, object]]:
    """(name, geometry, task) of each "C,K,N" conv of `specs`."""
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in specs:
            c, k, n = (int(v) for v in spec.split(","))
            model = tvmc.load(conv_model(c, k, n, os.path.join(tmp, "conv.onnx")))
            task = next(t for t in tvmc.extract_tasks(model, "llvm") if t.op == "Conv")
            types, _ = task_types(task)
            found.append(("conv", geometry_of(task.op, TaskOp.of(task).node.attrs, types), task))
    return found


def configs(task, target: CPUTarget) -> dict[str, dict]:
    """The knobs of each variant: the direct conv's default schedule, each Winograd's."""
    direct = default_conv_plan(task, target, direct=True).schedule
    return {"direct": {"schedule": direct}, **{name: {"schedule": name} for name in SCHEDULES}}


def max_error(task, knobs: dict) -> float:
    """The variant's max error against the op's reference on the tuner's inputs, relative to
    max |y| (the reference `measure` checks configs with)."""
    built = build(MeasureInput(task, config_of(knobs)), check_correctness=True, threads=1)
    assert built.reference is not None, built.error_msg
    module = load_object(built.object_code, built.kernels)
    arrays = allocate_buffers(built)
    for kernel in built.kernels:
        module.run(kernel.name, *(arrays[p[0]] for p in kernel.params))
    want = built.reference[0].astype(np.float64)
    got = arrays["out0"].reshape(want.shape)
    return float(np.abs(got - want).max() / np.abs(want).max())


def measure(
    task, rounds: int, target: CPUTarget, flush: np.ndarray | None = None
) -> dict[str, list[float]]:
    """CPU seconds per run of each variant, in alternating blocks of 5 (after a warm-up); with
    `flush`, the weights come from memory in each run (`heavy_convs.py --cold-weights`)."""
    runs = {
        name: cpu_timed(task, config_of(knobs), flush, only_weights=True)
        for name, knobs in configs(task, target).items()
    }
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name] += [run() for _ in range(5)]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["light_vgg19", "light_resnet50"])
    parser.add_argument("--convs", nargs="+", metavar="C,K,N",
                        help="instead of models: 3x3 convs of C -> K on NxN planes")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=4, help="alternating blocks of 5 runs")
    parser.add_argument("--cold-weights", action="store_true",
                        help="evict the caches before each run, then read the activations back: "
                             "the weights come from memory, as in a model")  # fmt: skip
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds wants a positive count, got {args.rounds}")
    set_num_threads(1)
    target = CPUTarget.host()
    flush = cache_flush_array() if args.cold_weights else None
    weights = "from memory" if flush is not None else "as the caches hold them"
    print(f"one thread, CPU time, weights {weights}; best (median) of {args.rounds * 5} runs; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{'model':18} {'conv':22} {'MFLOP':>6} {'direct GFLOP/s':>15} {'F2 x':>6} "
          f"{'F4 x':>6} {'F2 err':>7} {'F4 err':>7}  default")  # fmt: skip
    totals: dict[str, dict[str, float]] = {}
    for spec in args.convs or []:
        values = spec.split(",")
        if len(values) != 3 or not all(v.isdigit() and int(v) > 0 for v in values):
            parser.error(f"--convs wants C,K,N of positive integers, got {spec!r}")
    convs = synthetic_convs(args.convs) if args.convs else eligible_convs(args.models)
    for model, geo, task in convs:
        times = measure(task, args.rounds, target, flush)
        best = {name: min(t) for name, t in times.items()}
        chosen = default_conv_plan(task, target).schedule
        default = chosen if chosen in SCHEDULES else "direct"
        total = totals.setdefault(model, {"direct": 0.0, "default": 0.0, "fastest": 0.0})
        total["direct"] += best["direct"] * task.weight
        total["default"] += best[default] * task.weight
        total["fastest"] += min(best.values()) * task.weight
        errors = [max_error(task, {"schedule": name}) for name in SCHEDULES]
        flops = task.flops
        conv = f"{geo.channels}->{geo.out_channels} {'x'.join(map(str, geo.out_shape))}"
        median = statistics.median(times["direct"])
        print(f"{model:18} {conv:22} {flops / 1e6:6.0f} {flops / best['direct'] / 1e9:6.1f} "
              f"({flops / median / 1e9:5.1f}) "
              + " ".join(f"{best['direct'] / best[n]:5.2f}x" for n in SCHEDULES)
              + " " + " ".join(f"{e:7.0e}" for e in errors) + f"  {default}")  # fmt: skip
        sys.stdout.flush()
    for model, total in totals.items():
        print(f"{model}: its eligible 3x3 convs, best times: the default "
              f"{total['direct'] / total['default']:.2f}x the direct conv, the fastest per conv "
              f"{total['direct'] / total['fastest']:.2f}x")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
