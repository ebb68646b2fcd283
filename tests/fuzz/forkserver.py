"""A fork server for the fuzzer: imports tvmc once, then runs each case in a forked child.

`python -m tvmc` costs one to several seconds of imports; a forked child of a process that has
already imported tvmc starts in milliseconds and runs the very same entry (`tvmc/__main__.py`
through runpy, as `-m` does) in a process of its own: its exit status, signals and streams are
its own, and a crash or hang kills only the child. Protocol: one JSON request per line on stdin
({"args", "cwd", "env", "timeout"}), one JSON reply per line on stdout ({"returncode", "stdout",
"stderr", "timed_out", "seconds"}); `returncode` is negative for a signal, as in subprocess.

Run it as `python -m tests.fuzz.forkserver` with the environment the children need (tvmc reads
some variables at import). Each child gets its own session (its linker subprocesses die with
it) and resource limits: FUZZ_MEMORY_BYTES of address space, no core files; the runtime's
buffers have guard pages around them (`guard.py`).
"""

from __future__ import annotations

import json
import os
import resource
import runpy
import select
import signal
import sys
import tempfile
import time
import traceback

MEMORY_ENV = "FUZZ_MEMORY_BYTES"  # the children's address-space limit; unset or 0: none
STREAM_LIMIT = 64 * 1024  # bytes of each stream kept in the reply (head and tail)


def limit_resources(timeout: float, memory: int) -> None:
    """No core files, a CPU-time backstop, and `memory` bytes of address space (0: no limit)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(timeout) + 10
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def run_child(
    args: list[str], cwd: str, env: dict[str, str], out_path: str, err_path: str, timeout: float
) -> None:
    """In the forked child: `python -m tvmc ARGS` in `cwd` with `env` added to the environment,
    then exit with its status."""
    code = 1
    try:
        os.setsid()
        limit_resources(timeout, int(os.environ.get(MEMORY_ENV) or 0))
        os.environ.update(env)
        tempfile.tempdir = None  # TMPDIR may have changed: look it up again
        os.chdir(cwd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
        os.dup2(os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = ["tvmc", *args]
        try:
            runpy.run_module("tvmc", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:  # what the interpreter does with it at exit
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code & 0xFF
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                code = 120  # as the interpreter does when flushing at exit fails
    finally:
        os._exit(code)


def wait(pid: int, timeout: float) -> tuple[int | None, bool]:
    """(wait status, timed out): the child's status, killing its session after `timeout`."""
    deadline = time.monotonic() + timeout
    fd = os.pidfd_open(pid)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or select.select([fd], [], [], left)[0]:
                break
    finally:
        os.close(fd)
    done, status = os.waitpid(pid, os.WNOHANG)
    timed_out = done == 0
    try:
        os.killpg(pid, signal.SIGKILL)  # the child (when it hangs) and what it started
    except (ProcessLookupError, PermissionError):
        pass
    if timed_out:
        _, status = os.waitpid(pid, 0)
    return status, timed_out


def clip(data: bytes) -> str:
    """A stream's text, its middle cut when it is longer than STREAM_LIMIT: the head, and the
    tail where the `Error:` line is (after hundreds of warnings, say)."""
    if len(data) <= STREAM_LIMIT:
        return data.decode("utf-8", errors="replace")
    half = STREAM_LIMIT // 2
    return _joined(data[:half], len(data) - 2 * half, data[-half:])


def _joined(head: bytes, cut: int, tail: bytes) -> str:
    return (head + f"\n[... {cut} bytes cut ...]\n".encode() + tail).decode("utf-8", "replace")


def read_stream(path: str) -> str:
    """A captured stream, clipped (only its head and tail are read)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= STREAM_LIMIT:
            return clip(f.read())
        half = STREAM_LIMIT // 2
        head = f.read(half)
        f.seek(size - half)
        return _joined(head, size - 2 * half, f.read())


def serve(requests, replies, scratch: str) -> None:
    """Answer every request line with one reply line."""
    out_path, err_path = os.path.join(scratch, "stdout"), os.path.join(scratch, "stderr")
    for line in requests:
        request = json.loads(line)
        timeout = float(request["timeout"])
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            run_child(request["args"], request["cwd"], request.get("env", {}), out_path, err_path,
                      timeout)  # fmt: skip
        status, timed_out = wait(pid, timeout)
        reply = {
            "returncode": os.waitstatus_to_exitcode(status),
            "stdout": read_stream(out_path),
            "stderr": read_stream(err_path),
            "timed_out": timed_out,
            "seconds": round(time.monotonic() - start, 3),
        }
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main() -> None:
    """Import tvmc's CLI (the expensive part), then serve requests until stdin closes."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # nothing the imports print may corrupt the replies
    import tvmc.cli.main  # noqa: F401
    from tests.fuzz import guard

    guard.install()  # the children inherit it

    with tempfile.TemporaryDirectory(prefix="tvmc-fuzz-streams-") as scratch:
        try:
            serve(sys.stdin, replies, scratch)
        except BrokenPipeError:  # the client went away
            pass


if __name__ == "__main__":
    main()
