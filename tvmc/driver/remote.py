"""Running a package on a Dask worker that holds a device (`tvmc run --scheduler --device-key`).

The client reads and verifies the package and makes the inputs exactly as a local run does, then
sends the package's bytes and the inputs to a worker advertising the device key (the workers of
`tvmc worker --device-key`). The worker checks the bytes arrived whole, and one of its worker
children (`tvmc.autotune.dask_engine.isolated`) reads the package again (`read_package`: digests,
plan, layout) and runs it with the same options: a package that crashes or hangs costs that run
(`RemoteError`), never the Dask worker. The child's `TVMCResult` comes back as a local run's.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvmc.autotune.dask_engine import BUILD, connect_client, host_turn, import_distributed, isolated
from tvmc.autotune.worker import TRACEBACK_CHARS
from tvmc.codegen import set_num_threads
from tvmc.config import REMOTE_MAX_BYTES_ENV, REMOTE_RUN_TIMEOUT, env_int
from tvmc.driver.objects import TVMCPackage, TVMCResult
from tvmc.driver.runner import check_device, make_inputs
from tvmc.errors import RemoteError, TVMCError, UsageError
from tvmc.version import __version__

logger = logging.getLogger("tvmc")

CONNECT_TIMEOUT = 5.0  # seconds to reach the scheduler
DEVICE_WAIT = 10.0  # seconds to wait for a worker with the key, at the start or after one left
RUN_TIMEOUT = REMOTE_RUN_TIMEOUT  # seconds a run may take on the worker before its child is killed
POLL = 0.5  # seconds between checks that a worker with the key is still there
MAX_BYTES = 2 << 30  # package and inputs; $TVMC_REMOTE_MAX_BYTES overrides it on either side


@dataclass(frozen=True)
class Remote:
    """Where and how long: the scheduler, the device key and the limits of one remote run."""

    scheduler: str
    device_key: str
    timeout: float = RUN_TIMEOUT
    connect_timeout: float = CONNECT_TIMEOUT
    device_wait: float | None = None  # None: DEVICE_WAIT, read when used

    @property
    def wait(self) -> float:
        """Seconds to wait for a worker with the key."""
        return DEVICE_WAIT if self.device_wait is None else self.device_wait


def check_remote(scheduler: str | None, device_key: str | None) -> None:
    """A UsageError unless both or neither are given, and the key names a device."""
    if device_key is not None and not scheduler:
        raise UsageError("--device-key needs --scheduler (the Dask scheduler's address)")
    if scheduler is not None and device_key is None:
        raise UsageError("--scheduler needs --device-key (the device to run on)")
    if device_key is not None and (not device_key or device_key == BUILD):
        raise UsageError(f"--device-key must name a device, not {device_key!r}")


def max_bytes() -> int:
    """The payload bound on this side: $TVMC_REMOTE_MAX_BYTES, else 2 GiB."""
    return env_int(REMOTE_MAX_BYTES_ENV) or MAX_BYTES


def run_remote(package: TVMCPackage, remote: Remote, **options: Any) -> TVMCResult:
    """Run `package` on a worker of `remote.scheduler` advertising `remote.device_key`, with
    the keywords of `TVMCPackage.run`; the result's `worker` names where it ran."""
    check_device(package.device, options["device"], package.metadata["target"],
                 package.package_path)  # fmt: skip
    options["inputs"] = make_inputs(package.inputs, options.get("inputs"),
                                    options.get("fill_mode", "random"))  # fmt: skip
    payload = _read_payload(package.package_path, options["inputs"])
    digest = hashlib.sha256(payload).hexdigest()
    client = connect_client(remote.scheduler, remote.connect_timeout)
    import dask  # present: connect_client found distributed, which needs it

    future = None
    try:
        _wait_for_device(client, remote)
        # In the task, not scattered: a worker that dies then loses the run, not the package,
        # and the scheduler can run it again on another worker with the key.
        quiet = {"distributed.admin.large-graph-warning-threshold": 2 * max_bytes()}
        with dask.config.set(quiet):  # large by design, and bounded above
            future = client.submit(
                run_task, payload, digest, package.package_path, options, remote.timeout,
                __version__,
                key=f"tvmc-run-{uuid.uuid4().hex[:12]}", resources={remote.device_key: 1},
                pure=False,
            )  # fmt: skip
        status, value, worker = _await(client, future, remote)
    finally:
        if future is not None and not future.done():
            client.cancel([future])  # Ctrl-C: do not leave the run queued
        client.close()
    if status == "error":
        error_class, message = value
        raise _rebuilt(error_class, message) from None
    if status == "bug":
        raise RuntimeError(f"on worker {worker}: {value}")
    value.worker = worker
    return value


def _read_payload(path: str, inputs: dict[str, np.ndarray]) -> bytes:
    limit = max_bytes()
    size = os.path.getsize(path) + sum(a.nbytes for a in inputs.values())
    if size > limit:
        raise UsageError(
            f"{path!r} and its inputs are {size:,} bytes, more than a remote run sends "
            f"({limit:,}); raise ${REMOTE_MAX_BYTES_ENV} here and on the workers"
        )
    with open(path, "rb") as f:
        return f.read()


def _device_workers(client: Any, device_key: str) -> dict[str, str]:
    """Workers advertising `device_key`: address -> name."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {a: str(w.get("name", a)) for a, w in workers.items()
            if w.get("resources", {}).get(device_key, 0) > 0}  # fmt: skip


def device_keys(client: Any) -> list[str]:
    """The device keys the scheduler's workers advertise (every resource but `build`)."""
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    return sorted({k for w in workers for k in w.get("resources", {})} - {BUILD})


def _wait_for_device(client: Any, remote: Remote) -> None:
    """Returns once a worker has the key, waiting up to `device_wait` for one."""
    deadline = time.monotonic() + remote.wait
    while not _device_workers(client, remote.device_key):
        if time.monotonic() >= deadline:
            keys = ", ".join(device_keys(client)) or "none"
            address = client.scheduler.address
            raise UsageError(
                f"no worker of the Dask scheduler at {address} advertises device key "
                f"{remote.device_key!r} (device keys there: {keys}); start one on the device "
                f"with: tvmc worker --scheduler {address} --device-key {remote.device_key}"
            )
        time.sleep(POLL)


def _await(client: Any, future: Any, remote: Remote) -> tuple[str, Any, str]:
    """The task's reply; a RemoteError when its worker left and none with the key remains, or
    the scheduler gave it up (Dask retries a task whose worker died while others hold the key)."""
    dist = import_distributed()
    running_on, lost_since = "", None
    while not future.done():
        try:
            with client.as_current():
                dist.wait([future], timeout=POLL)
            continue
        except (TimeoutError, dist.TimeoutError):  # the same class from Python 3.11 on
            pass
        devices = _device_workers(client, remote.device_key)
        if running_on and devices and running_on not in devices.values():
            logger.warning("worker %r left the cluster during the run; the scheduler runs it "
                           "again on another worker with device key %r", running_on,
                           remote.device_key)  # fmt: skip
            running_on = ""
        try:
            processing = client.processing(list(devices))
        except KeyError:  # a worker left between the two questions: ask again next poll
            continue
        for address, keys in processing.items():
            if future.key in keys:
                running_on = devices[address]
        if devices:
            lost_since = None
            continue
        lost_since = lost_since or time.monotonic()
        if time.monotonic() - lost_since >= remote.wait:
            who = f"worker {running_on!r}" if running_on else "the worker"
            raise RemoteError(
                f"{who} left the cluster during the run and no worker advertises device key "
                f"{remote.device_key!r} any more (waited {remote.wait:g} s); start "
                f"one with: tvmc worker --scheduler {client.scheduler.address} --device-key "
                f"{remote.device_key}"
            )
    if future.status == "finished":
        return future.result()
    try:
        exc: BaseException | None = future.exception()
    except BaseException as err:  # cancelled
        exc = err
    raise RemoteError(f"the run on device key {remote.device_key!r} failed: "
                      f"{type(exc).__name__}: {exc}")  # fmt: skip


def _rebuilt(error_class: type, message: str) -> TVMCError:
    """The worker's error as the same class (so the same exit code) where it can be built."""
    if isinstance(error_class, type) and issubclass(error_class, TVMCError):
        try:
            return error_class(message)
        except TypeError:  # a class with other arguments
            pass
    return RemoteError(message)


# ---- on the worker -------------------------------------------------------------------------------
def run_task(
    payload: bytes,
    digest: str,
    shown_as: str,
    options: dict[str, Any],
    timeout: float,
    client_version: str = __version__,
) -> tuple[str, Any, str]:
    """On a device worker: ("ok", TVMCResult, worker), ("error", (class, message), worker) or
    ("bug", traceback, worker). `shown_as` names the package in messages (the client's path)."""
    worker = _worker_name()
    if client_version != __version__:  # the options and the result are this version's objects
        message = (f"worker {worker} runs tvmc {__version__}, this client {client_version}: "
                   "install the same version on both")  # fmt: skip
        return "error", (UsageError, message), worker
    size = len(payload) + sum(a.nbytes for a in options["inputs"].values())
    if size > max_bytes():
        message = (f"worker {worker} takes at most {max_bytes():,} bytes of package and inputs "
                   f"(${REMOTE_MAX_BYTES_ENV} there), not {size:,}")  # fmt: skip
        return "error", (RemoteError, message), worker
    if hashlib.sha256(payload).hexdigest() != digest:
        return "error", (RemoteError, f"{shown_as!r} arrived damaged on worker {worker}"), worker
    with tempfile.TemporaryDirectory(prefix="tvmc-remote-") as tmp:
        path = os.path.join(tmp, "package.tar")  # messages name it `shown_as`
        with open(path, "wb") as f:
            f.write(payload)
        with isolated("run") as child:
            try:
                child.ensure_ready()  # a fresh child's imports are not run time
            except RuntimeError as exc:
                return "error", (RemoteError, f"on worker {worker}: {exc}"), worker
            with host_turn(exclusive=options["device"] == "cpu"):
                outcome = child.call((run_in_child, (path, options), ()), timeout)
    if outcome.status == "ok":
        status, value = outcome.value
        if status == "error":
            error_class, message = value
            message = message.replace(path, shown_as) + f" (on worker {worker})"
            return "error", (error_class, message), worker
        return status, value, worker
    if outcome.status == "timeout":
        message = (f"{shown_as!r} did not finish within {timeout:g} s on worker {worker}; "
                   "it was stopped (raise the limit with --remote-timeout)")  # fmt: skip
    elif outcome.status == "crash":
        died = outcome.message.removeprefix("worker died ")  # "(signal SIGSEGV)"
        message = (f"{shown_as!r} crashed on worker {worker}: the process running it died "
                   f"{died}; the worker goes on")  # fmt: skip
    else:
        return "bug", outcome.message, worker
    return "error", (RemoteError, message), worker


def run_in_child(path: str, options: dict[str, Any]) -> tuple[str, Any]:
    """In a worker's child: ("ok", TVMCResult) or ("error", (class, message)) or ("bug", ...)."""
    try:
        return "ok", TVMCPackage(path).run(**options)
    except TVMCError as exc:
        return "error", (type(exc), str(exc))
    except Exception:
        return "bug", traceback.format_exc()[-TRACEBACK_CHARS:]
    finally:
        set_num_threads(None)  # this child serves later runs and measurements


def _worker_name() -> str:
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not in a worker (a direct call)
        return "local"
    name = str(worker.name)
    return name if name == worker.address else f"{name} ({worker.address})"
