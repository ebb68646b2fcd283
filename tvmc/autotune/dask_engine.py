"""Measuring on a Dask cluster: the same `build` and `run` as local tuning, on other machines.

Each candidate is a build task (resource `build`) whose future feeds a measure task (resource: the
device key) on the workers themselves; only the small `MeasureResult` comes back to the driver.
A device is one single-threaded worker advertising `{device_key: 1}`, so one measurement runs at a
time on it. On the workers, build and run go through `tvmc.autotune.worker.Worker` children (one
pool per Dask worker process), so generated code that crashes or hangs costs that config (error 4
or 7), never the Dask worker; timeouts count the call itself, not the time queued. A Dask worker
that dies mid-task has its task retried elsewhere by the scheduler (`allowed_failures`), or the
measurement ends as an error record. `dask`/`distributed` are the optional extra `tvmc[dist]`,
imported when used.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tvmc.autotune.backends import BACKENDS, measure_backend
from tvmc.autotune.measure import (
    BuildResult,
    MeasureInput,
    MeasureOptions,
    MeasureResult,
    failed_result,
    task_imports,
)
from tvmc.autotune.worker import Worker
from tvmc.codegen import num_threads
from tvmc.errors import UsageError

logger = logging.getLogger("tvmc")

BUILD = "build"  # the resource build workers advertise, one unit per parallel build
CONNECT_TIMEOUT = 5.0  # seconds to reach the scheduler before giving up
DEVICE_WAIT = 30.0  # seconds to wait for a worker with the device key (or a build worker)
POLL = 0.5  # seconds between checks that the device is still there while results are awaited
# builds and CPU measurements on one host take turns through this lock file
HOST_LOCK = os.path.join(tempfile.gettempdir(), f"tvmc-measure-{os.getuid()}.lock")
INSTALL_HINT = "pip install 'tvmc[dist]'"
# a worker's children serve every target kind: each imports every backend's modules up front
PRELOAD = tuple(dict.fromkeys(m for backend in BACKENDS.values() for m in backend.preload))

Span = tuple[str, float, float]  # (device worker address, run start, run end), wall-clock seconds


def import_distributed() -> Any:
    """The `distributed` module, or a UsageError saying how to install the extra."""
    try:
        import distributed
    except ImportError as exc:
        raise UsageError(
            f"distributed tuning needs Dask ({exc}); install it with: {INSTALL_HINT}"
        ) from None
    return distributed


# ---- on the workers ------------------------------------------------------------------------------
_pools: dict[str, list[Worker]] = {"build": [], "run": []}  # idle children, per role
_pool_lock = threading.Lock()


@contextmanager
def isolated(role: str) -> Iterator[Worker]:
    """A child process for one call: a build worker runs `nthreads` at once, each with its own."""
    with _pool_lock:
        child = _pools[role].pop() if _pools[role] else Worker(PRELOAD)
    try:
        yield child
    finally:
        with _pool_lock:
            _pools[role].append(child)


def warm_up(role: str, count: int) -> None:
    """Start `count` children for `role` now, so the first tasks do not wait for their imports."""
    with _pool_lock:
        while len(_pools[role]) < count:
            child = Worker(PRELOAD)
            child.start()  # non-blocking: imports in the background
            _pools[role].append(child)


@contextmanager
def host_turn(exclusive: bool) -> Iterator[None]:
    """Builds and CPU measurements on one host take turns, as local tuning's do: a measurement
    (exclusive) waits for the builds in flight and holds new ones back, so compiles never share
    the cores with a kernel being timed. Builds (shared) run together. A turnstile file keeps a
    stream of builds from starving a waiting measurement. Hosts without both roles never wait."""
    import fcntl

    with open(HOST_LOCK + ".turn", "a") as turn, open(HOST_LOCK, "a") as lock:
        fcntl.flock(turn, fcntl.LOCK_EX)
        if exclusive:
            fcntl.flock(lock, fcntl.LOCK_EX)  # holding the turnstile: no new build starts
            fcntl.flock(turn, fcntl.LOCK_UN)
        else:
            fcntl.flock(turn, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_task(
    fn: Callable[..., BuildResult],
    inp: MeasureInput,
    check: bool,
    threads: int,
    imports: tuple[str, ...],
    timeout: float,
) -> BuildResult:
    """`fn` (`build`) in a child of this Dask worker: error 6 past `timeout`, 2 when the child
    died."""
    with isolated("build") as child, host_turn(exclusive=False):
        outcome = child.call((fn, (inp, check, threads), imports), timeout)
    if outcome.status == "ok":
        return outcome.value
    code = 6 if outcome.status == "timeout" else 2
    return BuildResult(seconds=outcome.seconds, error_no=code, error_msg=outcome.message)


def measure_task(
    fn: Callable[..., MeasureResult],
    built: BuildResult,
    options: MeasureOptions,
    exclusive: bool = True,
) -> tuple[MeasureResult, Span | None]:
    """`fn` (a backend's `run`) in a child of this (device) worker, with when it ran: error 7
    past the timeout, 4 on a crash; a failed build passes through untouched. `exclusive`: the
    run needs the host's cores alone (CPU timing: no compiles beside it)."""
    if built.error_no:
        return failed_result(built.error_no, built.seconds, built.error_msg), None
    with isolated("run") as child:
        child.ensure_ready()  # a fresh child's imports are not run time
        with host_turn(exclusive=exclusive):
            start = time.time()
            ran = child.call((fn, (built, options), ()), options.timeout)
            end = time.time()
    span = (_worker_address(), start, end)
    spent = built.seconds + ran.seconds
    if ran.status == "ok":
        result: MeasureResult = ran.value
        result.all_cost = spent
        return result, span
    return failed_result(7 if ran.status == "timeout" else 4, spent, ran.message), span


def _worker_address() -> str:
    from distributed import get_worker

    try:
        return get_worker().address
    except ValueError:  # not in a worker (a direct call)
        return ""


def _num_threads() -> int:
    return num_threads()


# ---- the driver's side ---------------------------------------------------------------------------
def connect_client(scheduler: Any, connect_timeout: float = CONNECT_TIMEOUT) -> Any:
    """A Dask client of `scheduler`, or a UsageError within `connect_timeout` seconds."""
    dist = import_distributed()
    try:
        return dist.Client(scheduler, timeout=connect_timeout, set_as_default=False)
    except Exception as exc:  # OSError, TimeoutError, ValueError for a malformed address
        raise UsageError(
            f"cannot reach the Dask scheduler at {scheduler!r} within "
            f"{connect_timeout:g} s ({type(exc).__name__}: {exc}); is `dask scheduler` "
            "running there and the port open?"
        ) from None


class DaskMeasurer:
    """A Measurer whose builds and runs are tasks on a Dask scheduler's workers."""

    def __init__(
        self,
        options: MeasureOptions | None = None,
        target: str = "llvm",
        *,
        scheduler: Any,
        device_key: str,
        priority: int = 0,
        connect_timeout: float = CONNECT_TIMEOUT,
        device_wait: float = DEVICE_WAIT,
    ) -> None:
        dist = import_distributed()
        if not device_key or device_key == BUILD:
            raise UsageError(f"--device-key must name a device, not {device_key!r}")
        self.backend = measure_backend(target)
        self.backend.check(target, False)  # measured on the cluster's machines, not here
        self.options = self.backend.options(options or MeasureOptions())
        self.target, self.device_key, self.priority = target, device_key, priority
        self.device_wait = device_wait
        self.spans: list[Span] = []  # every run, as reported by the device workers
        self.client = connect_client(scheduler, connect_timeout)
        self.scheduler = self.client.scheduler.address
        self._dist = dist
        try:
            self._wait_for(device_key, "a device worker", f"--device-key {device_key}")
            self._wait_for(BUILD, "a build worker", "--build")
            devices = sorted(self._workers_with(device_key))
            self.threads = min(self.client.run(_num_threads, workers=devices).values())
        except BaseException:
            self.client.close()
            raise

    # -- the cluster as the scheduler sees it
    def _workers(self) -> dict[str, dict[str, Any]]:
        return self.client.scheduler_info(n_workers=-1)["workers"]

    def _workers_with(self, resource: str) -> dict[str, float]:
        found = {a: w.get("resources", {}).get(resource, 0) for a, w in self._workers().items()}
        return {a: n for a, n in found.items() if n > 0}

    def _wait_for(self, resource: str, what: str, flag: str) -> None:
        deadline = time.monotonic() + self.device_wait
        warned = False
        while not self._workers_with(resource):
            if time.monotonic() >= deadline:
                seen = sorted({k for w in self._workers().values() for k in w.get("resources", {})})
                raise UsageError(
                    f"no worker of the Dask scheduler at {self.scheduler} advertises "
                    f"{resource!r} (resources seen: {', '.join(seen) or 'none'}); start "
                    f"{what} with: tvmc worker --scheduler {self.scheduler} {flag}"
                )
            if not warned:
                logger.warning("waiting up to %g s for %s (%s) at %s", self.device_wait, what,
                               resource, self.scheduler)  # fmt: skip
                warned = True
            time.sleep(POLL)

    def describe(self) -> list[tuple[str, str]]:
        """(setting, value) rows for the settings table."""
        workers = self._workers()
        builders = self._workers_with(BUILD)
        devices = self._workers_with(self.device_key)
        slots = sum(builders.values())
        names = [str(workers[a].get("name", a)) for a in sorted(devices)]
        return [
            ("scheduler", self.scheduler),
            ("device key", f"{self.device_key} (priority {self.priority})"),
            (
                "workers",
                f"{len(workers)}: {len(builders)} build ({slots:g} builds at once), "
                f"{len(devices)} device",
            ),  # fmt: skip
            ("devices seen", ", ".join(names) or "-"),
        ]

    def to_json(self) -> dict[str, Any]:
        """The cluster as `describe` shows it, for `tvmc tune --format json`."""
        workers = self._workers()
        builders = self._workers_with(BUILD)
        devices = self._workers_with(self.device_key)
        return {
            "scheduler": self.scheduler,
            "device_key": self.device_key,
            "priority": self.priority,
            "workers": len(workers),
            "build_workers": len(builders),
            "build_slots": sum(builders.values()),
            "devices": [str(workers[a].get("name", a)) for a in sorted(devices)],
        }

    def in_flight(self) -> dict[str, int]:
        """Measurements running or queued per device worker (by name), as the scheduler sees it
        ({} when it cannot say: this only feeds the progress display)."""
        try:
            workers = self._workers()
            processing = self.client.processing(list(self._workers_with(self.device_key)))
        except Exception:
            return {}
        return {
            str(workers.get(a, {}).get("name", a)): sum(
                1 for k in keys if str(k).startswith("tvmc-measure-")
            )
            for a, keys in processing.items()
        }

    # -- measuring
    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        """One result per input, in order."""
        results: list[MeasureResult | None] = [None] * len(inputs)
        for i, result in self.stream(inputs):
            results[i] = result
        return [r for r in results if r is not None]

    def stream(self, inputs: list[MeasureInput]) -> Iterator[tuple[int, MeasureResult]]:
        """(input index, result) as each measurement finishes; every input once."""
        if not inputs:
            return
        self._wait_for(self.device_key, "a device worker", f"--device-key {self.device_key}")
        opts, batch = self.options, uuid.uuid4().hex[:12]
        futures: dict[Any, tuple[int, Any]] = {}
        for i, inp in enumerate(inputs):
            args = (inp, opts.check_correctness, self.threads, task_imports(inp.task))
            built = self.client.submit(
                build_task, self.backend.build, *args, opts.build_timeout,
                key=f"tvmc-build-{batch}-{i}", resources={BUILD: 1}, priority=self.priority,
            )  # fmt: skip
            measured = self.client.submit(
                measure_task, self.backend.run, built, opts, self.backend.exclusive_runs,
                key=f"tvmc-measure-{batch}-{i}",
                resources={self.device_key: 1}, priority=self.priority,
            )  # fmt: skip
            futures[measured] = (i, built)
        pending = set(futures)
        try:
            lost_since: float | None = None
            while pending:
                try:
                    with self.client.as_current():
                        done, pending = self._dist.wait(
                            pending, timeout=POLL, return_when="FIRST_COMPLETED"
                        )
                except TimeoutError:
                    done = set()
                for future in done:
                    i, built = futures.pop(future)
                    result = self._result(future, built)
                    future.release()  # recorded: the scheduler must not rerun it on a loss
                    built.release()  # nor keep the object code in a build worker's memory
                    yield i, result
                if done or not pending:
                    continue
                if self._workers_with(self.device_key):
                    lost_since = None
                    continue
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since >= self.device_wait:
                    for future in list(pending):  # no device came back: these end as errors
                        i, _ = futures.pop(future)
                        message = f"no worker with device key {self.device_key!r} for " \
                                  f"{self.device_wait:g} s"  # fmt: skip
                        yield i, failed_result(4, 0.0, message)
                    pending = set()
        finally:
            if futures:  # interrupted (Ctrl-C) or given up: drop what is still queued
                self.client.cancel([f for pair in futures.items() for f in (pair[0], pair[1][1])])

    def _result(self, future: Any, built: Any) -> MeasureResult:
        if future.status == "finished":
            result, span = future.result()
            if span is not None:
                self.spans.append(span)
            return result
        try:
            exc: BaseException | None = future.exception()
        except BaseException as err:  # cancelled
            exc = err
        code = 2 if built.status == "error" else 4  # e.g. KilledWorker: it died too often
        return failed_result(code, 0.0, f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Disconnect from the scheduler (the workers keep running)."""
        self.client.close()

    def __enter__(self) -> DaskMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- starting a worker ---------------------------------------------------------------------------
def serve_worker(
    scheduler: str,
    *,
    device_key: str | None = None,
    build_slots: int | None = None,
    name: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
    on_ready: Callable[[str, dict[str, float]], None] | None = None,
    log_level: int = logging.WARNING,
) -> None:
    """Run a Dask worker for tuning until it is stopped: a device (one thread, `{device_key: 1}`)
    or a builder (`build_slots` threads, `{"build": build_slots}`)."""
    dist = import_distributed()
    logging.getLogger("distributed").setLevel(log_level)  # Dask logs each connection at INFO
    if (device_key is None) == (build_slots is None):
        raise UsageError(
            "a tvmc worker is either a device (--device-key KEY) or a builder (--build)"
        )
    if device_key is not None and (not device_key or device_key == BUILD):
        raise UsageError(f"--device-key must name a device, not {device_key!r}")
    if build_slots is not None and build_slots < 1:
        raise UsageError(f"--nthreads must be at least 1, got {build_slots}")
    role, nthreads = ("run", 1) if device_key else ("build", build_slots or 1)
    resources = {device_key: 1.0} if device_key else {BUILD: float(nthreads)}

    async def main() -> None:
        worker = dist.Worker(scheduler, nthreads=nthreads, resources=resources, name=name,
                             death_timeout=connect_timeout, dashboard=False)  # fmt: skip
        try:
            await asyncio.wait_for(worker.start(), connect_timeout + 1.0)
        except Exception as exc:
            await worker.close(timeout=1)
            raise UsageError(
                f"cannot reach the Dask scheduler at {scheduler!r} within {connect_timeout:g} s "
                f"({type(exc).__name__}: {exc})"
            ) from None
        warm_up(role, nthreads)
        if on_ready is not None:
            on_ready(worker.address, resources)
        await worker.finished()

    asyncio.run(main())
