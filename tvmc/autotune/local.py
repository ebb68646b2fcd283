"""Measuring on this machine: builds in parallel worker processes, runs one at a time in another.

The target's backend (`backends.measure_backend`) gives the build and run functions and the
modules the workers preload; `LocalMeasurer` only schedules them. A crashed or hung worker costs
its config (error 2 or 6 for a build, 4 or 7 for a run), never the tuner.
"""

from __future__ import annotations

import json

from tvmc.autotune.backends import measure_backend
from tvmc.autotune.measure import (
    BuildResult,
    MeasureInput,
    MeasureOptions,
    MeasureResult,
    failed_result,
    task_imports,
)
from tvmc.autotune.worker import Job, Outcome, Worker, run_parallel
from tvmc.codegen import num_threads, physical_cores
from tvmc.errors import UsageError


def _build_key(inp: MeasureInput) -> tuple[str, ...]:
    """What a build depends on: the task's target and workload, and the config's knobs."""
    task = inp.task
    return (task.target, task.op, *task.workload, json.dumps(inp.config.entity))


class LocalMeasurer:
    """Builds in `n_parallel` worker processes, runs one at a time in another (this machine)."""

    def __init__(self, options: MeasureOptions | None = None, target: str = "llvm") -> None:
        self.backend = measure_backend(target)
        self.backend.check(target, True)  # a bad target fails now, not in every build
        self.options = self.backend.options(options or MeasureOptions())
        self.target = target
        count = self.options.n_parallel or physical_cores()
        self._builders = [Worker(self.backend.preload) for _ in range(max(1, count))]
        self._runner = Worker(self.backend.preload)

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        """One result per input, in order; each config alone, on fresh buffers. A config listed
        more than once (a paired check's rounds) is built once and run each time."""
        if not inputs:
            return []
        opts = self.options
        if self._runner.stale:
            self._runner.start()  # imports while the builds run
        threads = num_threads()  # this process's setting (set_num_threads) holds in the workers
        slot: dict[tuple[str, ...], int] = {}
        unique: list[MeasureInput] = []
        for inp in inputs:
            if slot.setdefault(_build_key(inp), len(unique)) == len(unique):
                unique.append(inp)
        jobs: list[Job] = [(self.backend.build, (inp, opts.check_correctness, threads),
                            task_imports(inp.task)) for inp in unique]  # fmt: skip
        built = run_parallel(self._builders, jobs, opts.build_timeout)
        return [self._run(built[slot[_build_key(inp)]]) for inp in inputs]

    def _run(self, outcome: Outcome) -> MeasureResult:
        if outcome.status == "timeout":
            return failed_result(6, outcome.seconds, outcome.message)
        if outcome.status != "ok":  # a crashed build worker: LLVM itself died
            return failed_result(2, outcome.seconds, outcome.message)
        built: BuildResult = outcome.value
        if built.error_no:
            return failed_result(built.error_no, built.seconds, built.error_msg)
        job = (self.backend.run, (built, self.options), ())
        ran = self._runner.call(job, self.options.timeout)
        spent = outcome.seconds + ran.seconds
        if ran.status == "ok":
            result: MeasureResult = ran.value
            result.all_cost = spent
            return result
        return failed_result(7 if ran.status == "timeout" else 4, spent, ran.message)

    def check_device(self) -> None:
        """Fail now, with the reason, when the runner cannot run this target's code (a CUDA
        target without a usable GPU), rather than recording that error for every config."""
        if self.backend.device_problem is None:
            return  # a CPU target was checked to be native in __init__
        probe = self._runner.call((self.backend.device_problem, (), ()), self.options.timeout + 60)
        problem = probe.value if probe.status == "ok" else probe.message
        if problem:
            raise UsageError(f"cannot measure {self.target!r} configs here: {problem}")

    def close(self) -> None:
        """Stop every worker process."""
        for worker in [*self._builders, self._runner]:
            worker.close()

    def __enter__(self) -> LocalMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
