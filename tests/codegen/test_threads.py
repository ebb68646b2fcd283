"""Parallel loops on the thread pool: same results for any thread count, the pool really used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.kernel.examples import matmul_tiled, parallel_rows
from tvmc.codegen import (
    CodegenOptions,
    emit_cpu,
    load_jit,
    load_shared,
    num_threads,
    physical_cores,
    set_num_threads,
)
from tvmc.codegen import threads as threads_mod
from tvmc.config import ADAPTIVE_THREADS_ENV, CODEGEN_JOBS_ENV, NUM_THREADS_ENV, env_on
from tvmc.errors import UsageError
from tvmc.kernel import Buffer, Kernel, nest


@pytest.fixture(autouse=True)
def _reset_threads():
    yield
    set_num_threads(None)


@pytest.mark.parametrize("loader", [load_shared, load_jit], ids=["shared", "jit"])
def test_one_and_two_threads_agree(loader):
    for ex in (parallel_rows(), matmul_tiled(m=16, n=64, kk=32)):
        artifact = emit_cpu([ex.kernel])
        assert "call void @tvmc_parallel_for" in artifact.llvm_ir
        mod = loader(artifact)
        results = []
        for n in (1, 2):
            set_num_threads(n)
            arrays = ex.inputs(np.random.default_rng(0))
            mod.run(ex.kernel.name, *arrays)
            results.append(arrays[-1])
        np.testing.assert_array_equal(results[0], results[1])
        np.testing.assert_allclose(results[1], ex.reference(*arrays)[0], rtol=1e-5, atol=1e-6)


_COUNT_WORKERS = """
import json, os, numpy as np
from tests.kernel.examples import parallel_rows
from tvmc.codegen import emit_cpu, load_shared, set_num_threads
ex = parallel_rows()
mod = load_shared(emit_cpu([ex.kernel]))
tasks = lambda: len(os.listdir("/proc/self/task"))
counts = [tasks()]
for n in (1, 2):
    set_num_threads(n)
    mod.run(ex.kernel.name, *ex.inputs(np.random.default_rng(0)))
    counts.append(tasks())
print(json.dumps(counts))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_two_threads_start_one_pool_worker():
    # A fresh process, so no earlier test has started the pool: one thread runs inline,
    # two start exactly one persistent worker.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run(
        [sys.executable, "-c", _COUNT_WORKERS],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    before, one, two = json.loads(done.stdout.strip().splitlines()[-1])
    assert one == before and two == before + 1


def test_serial_option_emits_no_pool_calls():
    ex = parallel_rows()
    artifact = emit_cpu([ex.kernel], options=CodegenOptions(parallel=False))
    assert "tvmc_parallel_for" not in artifact.llvm_ir
    arrays = ex.inputs(np.random.default_rng(0))
    load_jit(artifact).run(ex.kernel.name, *arrays)
    np.testing.assert_allclose(arrays[-1], ex.reference(*arrays)[0], rtol=1e-6)


def test_nested_parallel_loops_run_the_inner_one_serially():
    y = Buffer("Y", (4, 4))
    # int64 loop variables: the chunk entry takes them as they are (int32 ones are truncated).
    axes = [("i", 4, "parallel"), ("j", 4, "parallel")]

    def point(i, j):
        return y.store((i, j), (i * 4 + j).astype("float32"))

    k = Kernel("nest", (y,), nest(axes, point, dtype="int64"))
    artifact = emit_cpu([k])
    assert artifact.llvm_ir.count("call void @tvmc_parallel_for") == 1
    out = np.zeros((4, 4), np.float32)
    load_jit(artifact).run("nest", out)
    np.testing.assert_array_equal(out, np.arange(16, dtype=np.float32).reshape(4, 4))


def test_thread_count_setting_and_environment(monkeypatch):
    assert physical_cores() >= 1
    monkeypatch.setenv(NUM_THREADS_ENV, "3")
    assert num_threads() == 3
    set_num_threads(1)
    assert num_threads() == 1
    set_num_threads(None)
    monkeypatch.delenv(NUM_THREADS_ENV)
    assert num_threads() == physical_cores()
    with pytest.raises(ValueError, match="positive"):
        set_num_threads(0)


ORPHAN_SCRIPT = """
import ctypes, os, sys, time
from tvmc.codegen import threads
middle = os.getpid()
child = os.fork()
if child == 0:
    if sys.argv[1] == "poll":  # as where no parent-death signal exists
        ctypes.CDLL = None
    threads.die_with_parent(middle)
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
os._exit(0)  # the parent dies at once, leaving its child behind
"""


@pytest.mark.parametrize("how", ["signal", "poll"])
def test_a_worker_dies_with_its_parent(how: str):
    done = subprocess.run([sys.executable, "-c", ORPHAN_SCRIPT, how], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    child = int(done.stdout)
    for _ in range(50):  # the poll sees the new parent within PARENT_POLL_SECONDS
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        pytest.fail(f"the orphan ({how}) outlived its parent by 5 s")


def test_codegen_jobs_setting(monkeypatch):
    monkeypatch.setenv(CODEGEN_JOBS_ENV, "3")
    assert threads_mod.codegen_jobs() == 3
    monkeypatch.setenv(CODEGEN_JOBS_ENV, "")
    assert threads_mod.codegen_jobs() == physical_cores()


def test_a_bad_thread_count_in_the_environment_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(threads_mod, "_num_threads", None)
    monkeypatch.setenv(NUM_THREADS_ENV, "abc")
    with pytest.raises(UsageError, match=r"\$TVMC_NUM_THREADS must be an integer, got 'abc'"):
        threads_mod.num_threads()


@pytest.mark.parametrize("value,on", [("", False), ("0", False), ("off", False), ("No", False),
                                      ("1", True), ("true", True), (" ON ", True)])  # fmt: skip
def test_switches_read_from_the_environment(monkeypatch, value, on):
    monkeypatch.setenv(ADAPTIVE_THREADS_ENV, value)
    assert env_on(ADAPTIVE_THREADS_ENV) is on
    assert env_on(ADAPTIVE_THREADS_ENV, default=True) is (on or value == "")


def test_a_switch_that_is_neither_on_nor_off_is_a_usage_error(monkeypatch):
    monkeypatch.setenv(ADAPTIVE_THREADS_ENV, "banana")
    with pytest.raises(UsageError, match=r"\$TVMC_ADAPTIVE_THREADS must be 1 or 0"):
        env_on(ADAPTIVE_THREADS_ENV)
