"""Run fuzz cases as `tvmc` processes and classify how each ended.

A case is files (written into a fresh directory) and the arguments of one `tvmc` command. It runs
through the fork server (`forkserver.py`, the default: a forked child of a process that imported
tvmc once) or, with FUZZ_EXEC=spawn, as a `python -m tests.fuzz.guard` subprocess (`tvmc` with
the guard pages of `guard.py`). Either way it gets a timeout, and its end is one of CLASSES.

The case's directory is its working directory, HOME, TMPDIR and TVMC_CACHE_DIR: it may write
there and nowhere else. Afterwards the executor's directory must hold nothing new beside the
case's directory, and the `watch`ed directories (the seed files) must be as they were (names,
sizes, modification times); otherwise the case "wrote outside".
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz.forkserver import MEMORY_ENV, clip, limit_resources

REPO = Path(__file__).resolve().parents[2]
CLEAN, ACCEPTED, INTERNAL = "clean error", "accepted", "internal error"
CRASH, HANG, OUTSIDE = "crash", "hang", "wrote outside"
CLASSES = (CLEAN, ACCEPTED, INTERNAL, CRASH, HANG, OUTSIDE)
BAD = (INTERNAL, CRASH, HANG, OUTSIDE)
CLEAN_EXIT_CODES = (2, 4, 5)  # usage; bad model, package or input; unsupported
TRACEBACK = "Traceback (most recent call last)"
ERROR_LINE = re.compile(r"^Error: ", re.MULTILINE)
VERBOSE = {"-v", "-vv", "-vvv", "--verbose"}  # global options that ask for tracebacks
DEFAULT_MEMORY = 4 << 30  # each case's address space: a runaway allocation fails, not the machine
ENV = {
    "NO_COLOR": "1",
    "COLUMNS": "120",
    "TVMC_NUM_THREADS": "1",  # cases are many and small: one thread each, the cores run cases
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "TVMC_PEAK_GFLOPS": "100",  # no peak measurement per case
}


@dataclass
class Case:
    """Files to write and the `tvmc` arguments to run on them; `mutations` says what changed."""

    mutator: str
    args: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    mutations: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"[{self.mutator}] tvmc {' '.join(self.args)}  <- {'; '.join(self.mutations)}"


@dataclass
class Outcome:
    """How a case ended: its class, why, and what the process left."""

    kind: str
    reason: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def classify(
    returncode: int, stderr: str, timed_out: bool, verbose: bool = False
) -> tuple[str, str]:
    """(class, reason) of a finished `tvmc` process; `verbose` (-v) allows a traceback before a
    clean error."""
    if timed_out:
        return HANG, "ran past its timeout"
    if returncode < 0:
        return CRASH, f"killed by {signal.Signals(-returncode).name}"
    if TRACEBACK in stderr and not verbose:
        return INTERNAL, f"exit {returncode} with a traceback"
    if returncode == 0:
        return ACCEPTED, "exit 0"
    if returncode not in CLEAN_EXIT_CODES:
        return INTERNAL, f"exit {returncode}"
    errors = len(ERROR_LINE.findall(stderr))
    if errors != 1:
        return INTERNAL, f"exit {returncode} with {errors} 'Error:' lines"
    return CLEAN, f"exit {returncode}"


def child_env() -> dict[str, str]:
    """The environment of every case (and of the fork server, which tvmc reads at import)."""
    env = {**os.environ, **ENV, "PYTHONPATH": str(REPO)}
    env.setdefault(MEMORY_ENV, str(DEFAULT_MEMORY))
    return env


class Executor:
    """Runs cases, each in a fresh directory under `workdir`, through the fork server or spawn."""

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        mode: str | None = None,
        watch: tuple[Path, ...] = (),
    ):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.watch = watch
        self.mode = mode or os.environ.get("FUZZ_EXEC", "fork")
        if self.mode not in ("fork", "spawn"):
            raise ValueError(f"FUZZ_EXEC must be fork or spawn, got {self.mode!r}")
        self.count = 0
        self.server: subprocess.Popen[str] | None = None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the fork server."""
        if self.server is not None:
            self.server.stdin.close()  # type: ignore[union-attr]
            self.server.wait(timeout=30)
            self.server = None

    def run(self, case: Case, timeout: float = 60.0, keep: bool = False) -> Outcome:
        """Write the case's files, run it, classify it; its directory is removed unless `keep`."""
        self.count += 1
        cwd = self.workdir / f"case{self.count}"
        cwd.mkdir()
        for name, data in case.files.items():
            (cwd / name).parent.mkdir(parents=True, exist_ok=True)
            (cwd / name).write_bytes(data)
        env = {"HOME": str(cwd / ".home"), "TMPDIR": str(cwd / ".tmp"),
               "TVMC_CACHE_DIR": str(cwd / ".home" / "cache")}  # fmt: skip
        for directory in (cwd / ".home", cwd / ".tmp"):
            directory.mkdir()
        before = self.outside(cwd)
        try:
            if self.mode == "fork":
                reply = self._fork(case.args, cwd, env, timeout)
            else:
                reply = self._spawn(case.args, cwd, env, timeout)
            changed = sorted(before ^ self.outside(cwd))
        finally:
            if not keep:
                shutil.rmtree(cwd, ignore_errors=True)
        verbose = bool(VERBOSE.intersection(case.args[:2]))  # global options come first
        kind, reason = classify(reply["returncode"], reply["stderr"], reply["timed_out"], verbose)
        if changed:
            kind, reason = OUTSIDE, f"changed outside its directory: {changed[:5]}"
        return Outcome(kind, reason, reply["returncode"], reply["stdout"], reply["stderr"],
                       reply["seconds"])  # fmt: skip

    def outside(self, cwd: Path) -> set[tuple]:
        """What a case may not change: the executor's directory but for the case's own, and
        every file under the watched directories (with its size and modification time)."""
        seen: set[tuple] = {(entry,) for entry in os.listdir(self.workdir) if entry != cwd.name}
        for root in self.watch:
            for path in sorted(Path(root).rglob("*")):
                stat = path.lstat()
                seen.add((str(path), stat.st_size, stat.st_mtime_ns))
        return seen

    def _fork(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> dict:
        if self.server is None or self.server.poll() is not None:
            self.server = subprocess.Popen(
                [sys.executable, "-m", "tests.fuzz.forkserver"], cwd=REPO, env=child_env(),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
        request = {"args": args, "cwd": str(cwd), "env": env, "timeout": timeout}
        self.server.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        self.server.stdin.flush()  # type: ignore[union-attr]
        line = self.server.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError("the fork server died (see its stderr above)")
        return json.loads(line)

    def _spawn(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> dict:
        env = {**child_env(), **env}
        memory = int(env[MEMORY_ENV] or 0)
        start = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.guard", *args], cwd=cwd, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=lambda: limit_resources(timeout, memory),
        )  # fmt: skip
        timed_out = False
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
        return {
            "returncode": process.returncode,
            "stdout": clip(out),
            "stderr": clip(err),
            "timed_out": timed_out,
            "seconds": round(time.monotonic() - start, 3),
        }
