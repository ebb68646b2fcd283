"""benchmarks/load.py's neighbours end with it: killed or terminated, it leaves no spinner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

LOAD = Path(__file__).resolve().parent.parent / "benchmarks" / "load.py"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after "pid (comm)": state, ppid, ...; None once the process is gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (from /proc), zombies left out."""
    found = []
    for entry in Path("/proc").iterdir():
        fields = stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def wait_until(condition, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_neighbours_end_with_the_load_generator(sig):
    proc = subprocess.Popen([sys.executable, str(LOAD), "spin=2", "--seconds", "60"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("load: spin 2")
        assert wait_until(lambda: len(children(proc.pid)) >= 2)
        spinners = children(proc.pid)
        os.kill(proc.pid, sig)
        proc.wait(timeout=10)
        assert wait_until(lambda: not any(alive(p) for p in spinners)), "a neighbour kept spinning"
    finally:
        if proc.poll() is None:
            proc.kill()
