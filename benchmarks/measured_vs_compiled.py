"""Tuning's measured cost of a task's default config beside the compiled model's kernel time for
the same convs: do the measurer and compile build the same program?

    .venv/bin/python benchmarks/measured_vs_compiled.py [--model light_squeezenet] [--rounds 30]

For each 1x1 Conv task of the model: the measurer's default config built as tuning builds it
now (the task's input read in place past its end, `PastEndGrant`) and as it did before (no
grant: a conv_input copy first), and the compiled package's kernels of the task's nodes
(`Executor.profile`: medians of back-to-back calls, as the measurer times them), in
alternating rounds in one process. Microseconds, medians over rounds; "copies": the task's
nodes whose compiled conv copies its input; "kernels": the measured build's, before -> now;
the last row sums the tasks whose build changed, each times its nodes.
The thread count is $TVMC_NUM_THREADS (default: the cores).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections import defaultdict

import onnx

import tvmc
from tvmc.autotune import measure_cpu
from tvmc.autotune.measure import (
    MeasureInput,
    MeasureOptions,
    PastEndGrant,
    default_entity,
    random_inputs,
)
from tvmc.autotune.task import Task
from tvmc.models import randomized_light_model


class NoGrant(PastEndGrant):
    """The measurer before the grant: never read past an input's end."""

    def __call__(self, buf, nbytes) -> bool:  # type: ignore[no-untyped-def]
        return False


def build_default(task: Task, grant: bool) -> measure_cpu.BuildResult:
    original = measure_cpu.PastEndGrant
    measure_cpu.PastEndGrant = original if grant else NoGrant  # type: ignore[misc]
    try:
        built = measure_cpu.build(MeasureInput(task, default_entity()))
    finally:
        measure_cpu.PastEndGrant = original  # type: ignore[misc]
    assert built.error_no == 0, built.error_msg
    return built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="light_squeezenet")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/{args.model}.onnx"
        onnx.save(randomized_light_model(args.model), path)
        model = tvmc.load(path)
        tasks = [
            t
            for t in tvmc.extract_tasks(model, "llvm")
            if t.op == "Conv"
            and tuple(next(a[1] for a in t.args if a[0] == "ATTRS")["kernel_shape"]) == (1, 1)
        ]
        package = tvmc.compile(model, "llvm", f"{tmp}/{args.model}.tar")
        executor = package.executor()
        executor.set_inputs(random_inputs(list(package.inputs.values())))
    builds = {
        t.name + repr(t.args): (t, build_default(t, False), build_default(t, True)) for t in tasks
    }
    options = MeasureOptions(repeat=3)
    times: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for _ in range(args.rounds):
        for key, (_, old, new) in builds.items():
            for label, built in (("old", old), ("new", new)):
                result = measure_cpu.run(built, options)
                assert result.error_no == 0, result.error_msg
                times[key][label].append(min(result.costs))
        per_node: dict[str, float] = defaultdict(float)
        kernels: dict[str, list[str]] = defaultdict(list)
        for row in executor.profile(repeat=20):
            node = row["node"].split("+")[0]  # "n3+Relu": n3 with its fused epilogue
            per_node[node] += row["seconds"]
            kernels[node].append(row["kernel"])
        for key, (task, _, _) in builds.items():
            nodes = [n for n in task.nodes if n in per_node]
            times[key]["compiled"].append(statistics.mean(per_node[n] for n in nodes))
    print(
        f"{'task':34} {'nodes':>5} {'copies':>6} {'kernels':>7} {'old us':>8} {'new us':>8} "
        f"{'compiled':>9} {'old/compiled':>12} {'new/compiled':>12}"
    )
    totals = defaultdict(float)
    for key, (task, old, new) in builds.items():
        med = {k: statistics.median(v) * 1e6 for k, v in times[key].items()}
        for label, value in med.items():  # the tasks whose measured build changed
            totals[label] += value * len(task.nodes) * (len(old.kernels) != len(new.kernels))
        copies = sum(any(k.endswith("conv_input") for k in kernels[n]) for n in task.nodes)
        print(
            f"{task.label:34} {len(task.nodes):5} {copies:6} "
            f"{f'{len(old.kernels)}->{len(new.kernels)}':>7} {med['old']:8.2f} "
            f"{med['new']:8.2f} {med['compiled']:9.2f} {med['old'] / med['compiled']:12.3f} "
            f"{med['new'] / med['compiled']:12.3f}"
        )
    print(
        f"{'copying before, x nodes':34} {'':5} {'':6} {'':7} {totals['old']:8.1f} "
        f"{totals['new']:8.1f} {totals['compiled']:9.1f} "
        f"{totals['old'] / totals['compiled']:12.3f} {totals['new'] / totals['compiled']:12.3f}"
    )


if __name__ == "__main__":
    main()
