"""Worker processes: calls that may crash, hang or run away, kept out of the tuner's process.

A `Worker` is a child interpreter (this module as `__main__`) running one call at a
time: the parent sends a pickled `(function, args)` frame, the child answers `("ok", value)`
or `("error", traceback)`. Generated code that crashes (SIGSEGV) kills the child alone: the
parent sees its pipe close. A call past its deadline has its child killed. Either way the next
call starts a fresh child. Children are fresh interpreters, never forks of the tuner: forking
a process with threads (Rich's refresh, XGBoost's OpenMP pool) can deadlock, and libgomp in a
forked child hangs. They run in their own session (Ctrl-C stops the tuner, not a half-finished
call) and die with their parent however it dies (`threads.die_with_parent`: PR_SET_PDEATHSIG,
and a watch on the parent's pid), even mid-call; an idle child also ends when its pipe closes.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import subprocess
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from tvmc.codegen.threads import die_with_parent

STARTUP_TIMEOUT = 120.0  # seconds a fresh child may take to import tvmc
# A child's first lines: tied to its parent (PR_SET_PDEATHSIG, as threads.die_with_parent does)
# before it imports tvmc, which takes seconds; then this module runs as its __main__.
BOOTSTRAP = """\
import ctypes, os, runpy, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)
except (OSError, AttributeError, TypeError):
    pass
if os.getppid() != int(sys.argv[3]):
    os._exit(1)
runpy.run_module("tvmc.autotune.worker", run_name="__main__", alter_sys=True)
"""
TRACEBACK_CHARS = 2000  # the end of a child's traceback kept in an error message


@dataclass
class Outcome:
    """How one call went: "ok" (value), "error" (it raised), "crash" or "timeout"."""

    status: str
    value: Any = None
    message: str = ""
    seconds: float = 0.0


Job = tuple[Callable[..., Any], tuple[Any, ...], Sequence[str]]  # (fn, args, modules to import)


class Worker:
    """One child process running calls serially; restarted after a crash, a timeout or
    `recycle_after` calls (generated code and LLVM leave memory behind)."""

    def __init__(self, preload: Sequence[str] = (), recycle_after: int = 256) -> None:
        self.preload = tuple(preload)
        self.recycle_after = recycle_after
        self._proc: subprocess.Popen | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self._calls = 0
        self._ready = False

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def reader(self) -> Connection:
        """The connection answers arrive on (for `multiprocessing.connection.wait`)."""
        assert self._recv is not None, "worker not started"
        return self._recv

    def start(self) -> None:
        """Launch the child (non-blocking: `ready()` waits for its imports)."""
        self.kill()
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        fds = (str(to_child_r), str(from_child_w))
        cmd = [sys.executable, "-c", BOOTSTRAP, *fds, str(os.getpid())]
        # the tuner's import path, so the child finds what it finds (a test's fake ops, too)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            self._proc = subprocess.Popen(
                cmd, pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                env=env,
            )  # fmt: skip
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(from_child_r, writable=False)
        self._send.send_bytes(pickle.dumps(list(self.preload)))
        self._calls, self._ready = 0, False

    def ready(self) -> None:
        """Waits until the child has imported its preload modules (RuntimeError if it fails)."""
        if self._proc is None:
            self.start()
        reply = self._receive(STARTUP_TIMEOUT)
        if reply.status != "ok":
            self.kill()
            raise RuntimeError(f"a measurement worker failed to start: {reply.message}")
        self._ready = True

    @property
    def stale(self) -> bool:
        """True when the next call needs a fresh child (none, dead, or recycled)."""
        return not self.alive or self._calls >= self.recycle_after

    def ensure_ready(self) -> None:
        """A started, ready child (a fresh one after a crash, a kill or `recycle_after` calls)."""
        if self.stale:
            self.start()
        if not self._ready:
            self.ready()

    def submit(self, job: Job) -> bool:
        """Send one call to a ready child; False (child killed) when it died before reading it."""
        fn, args, imports = job
        assert self._send is not None, "worker not started"
        self._calls += 1
        try:
            self._send.send_bytes(pickle.dumps((list(imports), pickle.dumps((fn, args)))))
        except OSError:
            self.kill()
            return False
        return True

    def receive(self, timeout: float | None = None) -> Outcome:
        """The answer to the call in flight; "timeout" (child killed) if none within `timeout`."""
        return self._receive(timeout)

    def call(self, job: Job, timeout: float) -> Outcome:
        """Run `job` in the child with a deadline (starting a child first if needed)."""
        self.ensure_ready()
        start = time.monotonic()
        if not self.submit(job):
            return Outcome("crash", message="worker died before the call")
        try:
            outcome = self.receive(timeout)
        except BaseException:  # e.g. Ctrl-C: the call is left half done, its answer unread
            self.kill()
            raise
        outcome.seconds = time.monotonic() - start
        return outcome

    def _receive(self, timeout: float | None) -> Outcome:
        assert self._recv is not None and self._proc is not None, "worker not started"
        if not self._recv.poll(timeout):
            self.kill()
            return Outcome("timeout", message=f"no answer within {timeout:.3g} s; worker killed")
        try:
            data = self._recv.recv_bytes()
        except (EOFError, OSError):
            code = self._proc.wait()
            self.kill()
            return Outcome("crash", message=f"worker died ({_exit_text(code)})")
        try:
            status, value = pickle.loads(data)
        except Exception as err:  # an answer this process cannot unpickle
            return Outcome("error", message=f"unreadable answer from a worker: {err!r}")
        if status == "ok":
            return Outcome("ok", value)
        return Outcome("error", message=str(value))

    def kill(self) -> None:
        """Stop the child now (no-op when none runs)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        if self._proc is not None:
            self._proc.wait()
        for conn in (self._send, self._recv):
            if conn is not None:
                conn.close()
        self._proc = self._send = self._recv = None
        self._ready = False

    def __del__(self) -> None:
        try:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
        except Exception:  # interpreter shutdown: the child dies with us anyway
            pass

    def close(self) -> None:
        """Ask the child to exit (EOF on its input), then make sure it has."""
        if self._send is not None:
            self._send.close()
            self._send = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


def run_parallel(workers: Sequence[Worker], jobs: Sequence[Job], timeout: float) -> list[Outcome]:
    """Every job on the first idle worker, each with its own deadline; outcomes in job order."""
    outcomes: list[Outcome | None] = [None] * len(jobs)
    pending = deque(enumerate(jobs))
    busy: dict[Worker, tuple[int, float, float]] = {}  # worker -> (job, start, deadline)
    try:
        for w in [w for w in workers if w.stale][: len(jobs)]:
            w.start()  # fresh children import in parallel
        while pending or busy:
            for w in workers:
                if w in busy or not pending:
                    continue
                w.ensure_ready()
                i, job = pending.popleft()
                start = time.monotonic()
                if w.submit(job):
                    busy[w] = (i, start, start + timeout)
                else:
                    outcomes[i] = Outcome("crash", message="worker died before the call")
            if not busy:
                continue
            now = time.monotonic()
            first = min(deadline for _, _, deadline in busy.values())
            ready = set(wait([w.reader for w in busy], timeout=max(0.0, first - now)))
            now = time.monotonic()
            for w, (i, start, deadline) in list(busy.items()):
                if w.reader in ready:
                    outcome = w.receive(0)
                elif now >= deadline:
                    w.kill()
                    outcome = Outcome("timeout", message=f"no answer within {timeout:.3g} s")
                else:
                    continue
                outcome.seconds = now - start
                outcomes[i] = outcome
                del busy[w]
    except BaseException:
        for w in busy:  # a half-finished call (e.g. Ctrl-C): its child's state is unknown
            w.kill()
        raise
    return [o if o is not None else Outcome("error", message="not run") for o in outcomes]


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


# ---- the child ----------------------------------------------------------------------------------
def _serve(inbox: Connection, outbox: Connection, parent: int) -> None:
    """Answer calls until the parent closes the pipe."""
    die_with_parent(parent)
    try:
        for name in pickle.loads(inbox.recv_bytes()):
            importlib.import_module(name)
        outbox.send_bytes(pickle.dumps(("ok", os.getpid())))
    except EOFError:
        return
    except BaseException:
        outbox.send_bytes(pickle.dumps(("error", traceback.format_exc()[-TRACEBACK_CHARS:])))
        return
    while True:
        try:
            imports, payload = pickle.loads(inbox.recv_bytes())
        except EOFError:
            return
        try:
            for name in imports:
                importlib.import_module(name)
            fn, args = pickle.loads(payload)
            reply = pickle.dumps(("ok", fn(*args)))
        except BaseException:
            reply = pickle.dumps(("error", traceback.format_exc()[-TRACEBACK_CHARS:]))
        outbox.send_bytes(reply)


if __name__ == "__main__":
    inbox, outbox, parent = (int(a) for a in sys.argv[1:4])
    _serve(Connection(inbox, writable=False), Connection(outbox, readable=False), parent)
