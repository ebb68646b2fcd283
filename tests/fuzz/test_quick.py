"""The quick slice of the fuzz suite (in `make test`): a few dozen structured cases per mutator,
each a `tvmc` process, none of which may end in an internal error, a crash, a hang or a write
outside its directory; and the harness itself (classification, timeouts, guard pages, the
outside-write check, the fork server beside a real `python -m tvmc`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz.campaign import MUTATORS
from tests.fuzz.harness import (
    ACCEPTED,
    BAD,
    CLEAN,
    CRASH,
    HANG,
    INTERNAL,
    OUTSIDE,
    Case,
    Executor,
    classify,
)
from tests.fuzz.seeds import Resources

QUICK = {"model": 16, "npz": 8, "records": 8, "cli": 8, "package": 8}  # cases per mutator


@pytest.mark.parametrize("mutator", list(QUICK))
def test_quick_slice(mutator: str, executor: Executor, resources: Resources) -> None:
    @settings(max_examples=QUICK[mutator], derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(MUTATORS[mutator](resources))
    def case_ends_cleanly(case: Case) -> None:
        outcome = executor.run(case, timeout=120)
        assert outcome.kind not in BAD, (
            f"{outcome.kind} ({outcome.reason}): {case.describe()}\n{outcome.stderr[-2000:]}"
        )

    case_ends_cleanly()


@pytest.mark.parametrize(
    ("returncode", "stderr", "timed_out", "verbose", "kind"),
    [
        (0, "", False, False, ACCEPTED),
        (4, "Error: bad model\n", False, False, CLEAN),
        (2, "Usage: tvmc\nTry 'tvmc -h' for help.\n\nError: no such option\n", False, False, CLEAN),
        (4, "Error: a\nError: b\n", False, False, INTERNAL),
        (4, "warning only\n", False, False, INTERNAL),
        (70, "Internal error: KeyError: 'x'\n", False, False, INTERNAL),
        (1, "Traceback (most recent call last):\n  ...\nValueError\n", False, False, INTERNAL),
        (
            4,
            "Traceback (most recent call last):\n  ...\nError: bad model\n",
            False,
            False,
            INTERNAL,
        ),
        (4, "Traceback (most recent call last):\n  ...\nError: bad model\n", False, True, CLEAN),
        (-11, "", False, False, CRASH),
        (-9, "", True, False, HANG),
    ],
)
def test_classify(returncode, stderr, timed_out, verbose, kind) -> None:
    assert classify(returncode, stderr, timed_out, verbose)[0] == kind


def test_a_case_past_its_timeout_is_a_hang(executor: Executor, resources: Resources) -> None:
    outcome = executor.run(Case("x", ["compile", str(resources.model), "-o", "a.tar"]), 0.01)
    assert outcome.kind == HANG, outcome


def test_the_fork_server_runs_tvmc_as_python_m_does(tmp_path: Path, resources: Resources) -> None:
    cases = [Case("x", []), Case("x", ["run", "nope.tar"]),
             Case("x", ["load", str(resources.model), "--json"])]  # fmt: skip
    with (
        Executor(tmp_path / "fork", "fork") as fork,
        Executor(tmp_path / "spawn", "spawn") as spawn,
    ):
        for case in cases:
            a, b = fork.run(case), spawn.run(case)
            assert (a.kind, a.returncode, a.stderr) == (b.kind, b.returncode, b.stderr), (a, b)
            if a.kind == ACCEPTED:  # the JSON document, but for the time loading took
                times = {"load_seconds": 0}
                assert {**json.loads(a.stdout), **times} == {**json.loads(b.stdout), **times}
            else:
                assert a.stdout == b.stdout


GUARDED_OVERRUN = """
import ctypes, mmap, sys
from tests.fuzz.guard import guarded_empty
a = guarded_empty((3, 5), "float32")  # 60 bytes: the aligned span is 64
ctypes.memset(a.ctypes.data, 1, 64)  # alignment slack: allowed
print("slack ok", flush=True)
past_end, before_page = 64, -(a.ctypes.data % mmap.PAGESIZE) - 1
ctypes.memset(a.ctypes.data + {"end": past_end, "start": before_page}[sys.argv[1]], 1, 1)
"""


@pytest.mark.parametrize("where", ["end", "start"])
def test_guard_pages_fault_past_the_end_and_before_the_first_page(where: str) -> None:
    result = subprocess.run([sys.executable, "-c", GUARDED_OVERRUN, where],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.stdout == "slack ok\n" and result.returncode == -11, result


def test_a_case_writing_beside_its_directory_is_caught(
    executor: Executor, resources: Resources
) -> None:
    escape = Case("x", ["load", str(resources.model), "-o", "../escaped.tvmc"])
    outcome = executor.run(escape)
    assert outcome.kind == OUTSIDE and "escaped.tvmc" in outcome.reason, outcome
    (executor.workdir / "escaped.tvmc").unlink()
    inside = executor.run(Case("x", ["load", str(resources.model), "-o", "inside.tvmc"]))
    assert inside.kind == ACCEPTED, inside


GUARDED_RUN = """
import mmap, sys
import numpy as np
from tests.fuzz import guard
guard.install()
import tvmc
package = tvmc.TVMCPackage(sys.argv[1])
result = package.run(inputs={"x": np.ones((1, 3, 8, 8), np.float32)})
executor = package.executor()
arrays = [executor.workspace, *executor._params, *executor._outputs, *executor._inputs]
def root(a):
    while isinstance(a, np.ndarray):
        a = a.base
    return getattr(a, "obj", a)  # np.frombuffer keeps a memoryview of the mapping
print(len(arrays), sum(isinstance(root(a), mmap.mmap) for a in arrays), len(result.outputs))
"""


def test_a_guarded_run_allocates_every_buffer_between_guard_pages(resources: Resources) -> None:
    result = subprocess.run([sys.executable, "-c", GUARDED_RUN, str(resources.package)],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    total, guarded, outputs = map(int, result.stdout.split())
    assert total == guarded and outputs >= 1 and total >= 4, result
