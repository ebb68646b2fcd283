"""Distributed tuning against local tuning on one machine: seconds per candidate for the same
configs of a real conv task, with 1 and 2 parallel builds (LocalMeasurer `n_parallel`; Dask build
workers), on a loopback cluster (`dask scheduler`, `tvmc worker --build`, `tvmc worker
--device-key`) started and stopped here.

    .venv/bin/python benchmarks/dist_tune.py [--model light_resnet50] [--task 0] [--configs 16]

Each measurement round measures `--configs` fresh configs (after one warm-up round); the table
shows the median over `--rounds` rounds, and the Dask overhead relative to local at the same
number of builds. Needs tvmc[dist]; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import onnx

import tvmc
from tvmc.autotune.dask_engine import DaskMeasurer
from tvmc.autotune.local import LocalMeasurer
from tvmc.autotune.measure import MeasureInput, MeasureOptions
from tvmc.models import randomized_light_model

DEVICE = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rounds_of(task, count: int, rounds: int, seed: int = 0) -> list[list[MeasureInput]]:
    """`rounds` + 1 disjoint lists of `count` configs (the first is the warm-up)."""
    picks = random.Random(seed).sample(range(len(task.space)), count * (rounds + 1))
    configs = [MeasureInput(task, task.space.get(i)) for i in picks]
    return [configs[r * count : (r + 1) * count] for r in range(rounds + 1)]


def per_candidate(measurer, batches: list[list[MeasureInput]]) -> tuple[float, int]:
    """Median seconds per candidate over the rounds after the warm-up; errors seen."""
    measurer.measure(batches[0])
    times, errors = [], 0
    for batch in batches[1:]:
        start = time.perf_counter()
        results = measurer.measure(batch)
        times.append((time.perf_counter() - start) / len(batch))
        errors += sum(1 for r in results if r.error_no)
    return statistics.median(times), errors


class Cluster:
    """A loopback scheduler and tvmc workers as subprocesses, stopped by their own pids."""

    def __init__(self) -> None:
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.procs: list[subprocess.Popen] = []
        port = self.address.rsplit(":", 1)[1]
        self.spawn("-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", port,
                   "--no-dashboard")  # fmt: skip

    def spawn(self, *args: str) -> None:
        quiet = subprocess.DEVNULL
        self.procs.append(subprocess.Popen([sys.executable, *args], stdout=quiet, stderr=quiet))

    def worker(self, *role: str) -> None:
        self.spawn("-m", "tvmc", "worker", "--scheduler", self.address, *role)

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.send_signal(signal.SIGINT)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def wait_for_builds(measurer: DaskMeasurer, slots: int) -> None:
    deadline = time.monotonic() + 60
    while sum(measurer._workers_with("build").values()) < slots:
        if time.monotonic() > deadline:
            raise SystemExit(f"fewer than {slots} build slots joined the scheduler")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="light_resnet50")
    parser.add_argument("--task", type=int, default=0, help="task number (heaviest first)")
    parser.add_argument("--configs", type=int, default=16, help="configs per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{args.model}.onnx")
        onnx.save(randomized_light_model(args.model), path)
        task = tvmc.extract_tasks(tvmc.load(path), "llvm")[args.task]
    shapes = "x".join(str(d) for d in task.args[0][1])
    print(f"{args.model} task {args.task}: {task.op} {shapes}, {len(task.space)} configs; "
          f"{args.configs} configs x {args.rounds} rounds (median)")  # fmt: skip
    options = {n: MeasureOptions(n_parallel=n) for n in (1, 2)}
    local = {}
    for n, opts in options.items():
        with LocalMeasurer(opts) as measurer:
            local[n] = per_candidate(measurer, rounds_of(task, args.configs, args.rounds, n))
    cluster = Cluster()
    dask = {}
    try:
        cluster.worker("--device-key", DEVICE)
        cluster.worker("--build", "--nthreads", "1")
        with DaskMeasurer(options[1], scheduler=cluster.address, device_key=DEVICE,
                          connect_timeout=30, device_wait=60) as measurer:  # fmt: skip
            wait_for_builds(measurer, 1)
            dask[1] = per_candidate(measurer, rounds_of(task, args.configs, args.rounds, 1))
            cluster.worker("--build", "--nthreads", "1")
            wait_for_builds(measurer, 2)
            dask[2] = per_candidate(measurer, rounds_of(task, args.configs, args.rounds, 2))
    finally:
        cluster.close()
    print(f"{'builds':>6} {'local s/cfg':>12} {'dask s/cfg':>11} {'overhead':>9} "
          f"{'local cfg/s':>12} {'dask cfg/s':>11} {'errors':>7}")  # fmt: skip
    for n in (1, 2):
        (lt, le), (dt, de) = local[n], dask[n]
        print(f"{n:6d} {lt:12.3f} {dt:11.3f} {100 * (dt / lt - 1):+8.1f}% {1 / lt:12.2f} "
              f"{1 / dt:11.2f} {le + de:7d}")  # fmt: skip


if __name__ == "__main__":
    main()
