"""The thread pool (tvmc/codegen/pool.c): late workers, chunk accounting, fork, waits on a shared
CPU, the workers' time slices, the libgomp switch, the build cache and the no-compiler fallback
(two executors at once: tests/runtime)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from tests.kernel.examples import matmul_tiled, parallel_rows
from tvmc.codegen import emit_cpu, load_jit, load_shared, pool, set_num_threads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
needs_pool = pytest.mark.skipif(pool.library_path() is None, reason="no C compiler")


FOUR_CHUNKS = 10**9  # a chunk time no loop reaches: every loop runs in 4 chunks a thread


@pytest.fixture(autouse=True)
def _reset():
    yield
    set_num_threads(None)
    pool.set_worker_delay(0)
    pool.set_min_chunk_us(0)


def run_script(script: str, **env: str) -> str:
    """Runs `script` in a fresh Python (no pool started yet); its stdout."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT, **env}, cwd=ROOT,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_pool
def test_a_late_worker_holds_nobody():
    # The only worker sleeps 400 ms before claiming chunks; the caller runs them all meanwhile.
    ex = parallel_rows(rows=64)
    mod = load_shared(emit_cpu([ex.kernel]))
    set_num_threads(2)
    pool.set_min_chunk_us(FOUR_CHUNKS)  # the worker's start-up makes no loop look long
    mod.run(ex.kernel.name, *ex.inputs(np.random.default_rng(0)))  # the worker exists now
    time.sleep(0.01)
    pool.set_worker_delay(400_000)
    before = pool.stats()
    arrays = ex.inputs(np.random.default_rng(1))
    start = time.perf_counter()
    mod.run(ex.kernel.name, *arrays)
    elapsed = time.perf_counter() - start
    after = pool.stats()
    np.testing.assert_allclose(arrays[-1], ex.reference(*arrays)[0], rtol=1e-6)
    assert elapsed < 0.2, f"the caller waited {elapsed:.3f} s for a sleeping worker"
    assert after.loops == before.loops + 1
    assert after.caller_chunks - before.caller_chunks == 8  # all of 2 threads x 4 chunks


@needs_pool
def test_workers_share_the_chunks():
    ex = parallel_rows(rows=64)
    mod = load_shared(emit_cpu([ex.kernel]))
    set_num_threads(2)
    pool.set_min_chunk_us(FOUR_CHUNKS)  # a preempted run would not cut the next one finer
    before = pool.stats()
    for seed in range(50):
        arrays = ex.inputs(np.random.default_rng(seed))
        mod.run(ex.kernel.name, *arrays)
        np.testing.assert_allclose(arrays[-1], ex.reference(*arrays)[0], rtol=1e-6)
    after = pool.stats()
    assert after.workers >= 1 and after.loops - before.loops == 50
    chunks = after.caller_chunks + after.worker_chunks - before.caller_chunks - before.worker_chunks
    assert chunks == 50 * 8  # 2 threads x 4 chunks per loop, each run exactly once


@needs_pool
def test_uneven_loops_match_the_reference():
    set_num_threads(2)
    for m in (1, 3, 17):  # fewer rows than chunks, and an uneven split
        ex = matmul_tiled(m=m * 4, n=64, kk=32)
        mod = load_shared(emit_cpu([ex.kernel]))
        arrays = ex.inputs(np.random.default_rng(m))
        mod.run(ex.kernel.name, *arrays)
        np.testing.assert_allclose(arrays[-1], ex.reference(*arrays)[0], rtol=1e-4, atol=1e-4)


_FORK = """
import os, numpy as np
from tests.kernel.examples import parallel_rows
from tvmc.codegen import emit_cpu, load_shared, set_num_threads
ex = parallel_rows()
mod = load_shared(emit_cpu([ex.kernel]))
set_num_threads(2)
mod.run(ex.kernel.name, *ex.inputs(np.random.default_rng(0)))  # workers running
pid = os.fork()
if pid == 0:  # the child has no workers: the pool starts new ones (or the caller does it all)
    arrays = ex.inputs(np.random.default_rng(1))
    mod.run(ex.kernel.name, *arrays)
    os._exit(0 if np.allclose(arrays[-1], ex.reference(*arrays)[0]) else 3)
print(os.waitpid(pid, 0)[1])
"""


@needs_pool
def test_a_forked_child_runs_parallel_loops():
    assert run_script(_FORK).strip() == "0"


_ONE_CPU = """
import os, time, numpy as np
from tests.kernel.examples import parallel_rows
from tvmc.codegen import emit_cpu, load_shared, pool, set_num_threads
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the workers inherit it: one CPU
pool.set_spin_beside_awaited(os.environ["WAITERS"] == "spin")
ex = parallel_rows(rows=256)
mod = load_shared(emit_cpu([ex.kernel]))
set_num_threads(2)
for seed in range(200):
    arrays = ex.inputs(np.random.default_rng(seed))
    mod.run(ex.kernel.name, *arrays)
    assert np.allclose(arrays[-1], ex.reference(*arrays)[0])
    time.sleep(0.0005)
print(pool.stats().unspun_waits)
"""


@needs_pool
def test_threads_on_one_cpu_sleep_instead_of_spinning():
    # Caller and worker on one CPU: whichever waits for the other sleeps at once, since the
    # other cannot run there while it spins; with the rule off they spin out the 100 us first.
    assert int(run_script(_ONE_CPU, WAITERS="sleep")) > 0
    assert int(run_script(_ONE_CPU, WAITERS="spin")) == 0


_SLICES = """
import os, numpy as np
from tests.kernel.examples import parallel_rows
from tvmc.codegen import emit_cpu, load_shared, pool, set_num_threads
def slice_ns(tid):  # the slice the kernel gives a thread, from its scheduler statistics
    with open(f"/proc/self/task/{tid}/sched") as f:
        return next(int(line.split(":")[1]) for line in f if line.startswith("se.slice"))
before = slice_ns(os.getpid())
ex = parallel_rows()
mod = load_shared(emit_cpu([ex.kernel]))
set_num_threads(2)
for seed in range(10000):  # until the worker has run a chunk (it asks for its slice first)
    arrays = ex.inputs(np.random.default_rng(seed))
    mod.run(ex.kernel.name, *arrays)
    assert np.allclose(arrays[-1], ex.reference(*arrays)[0])
    if pool.stats().worker_chunks:
        break
workers = [t for t in os.listdir("/proc/self/task")
           if open(f"/proc/self/task/{t}/comm").read().strip() == "tvmc-pool"]
assert slice_ns(os.getpid()) == before  # the caller, the user's thread, keeps its own
print(pool.stats().worker_chunks > 0, before, *[slice_ns(t) for t in workers])
"""

# Whether this kernel gives a thread the slice it asks for (EEVDF's sched_attr.sched_runtime,
# Linux 6.12 on): a fresh Python asks for 300 us for itself and reads back what it got.
_OWN_SLICE = """
import ctypes, os, platform, struct
number = {"x86_64": 314, "aarch64": 274}[platform.machine()]  # sched_setattr
attr = struct.pack("IIQiIQQQ", 48, 0, 0, os.getpriority(os.PRIO_PROCESS, 0), 0, 300000, 0, 0)
ctypes.CDLL(None).syscall(number, 0, attr, 0)
with open("/proc/self/sched") as f:
    print(next(int(line.split(":")[1]) for line in f if line.startswith("se.slice")))
"""


def _kernel_grants_slices() -> bool:
    done = subprocess.run([sys.executable, "-c", _OWN_SLICE], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    return done.returncode == 0 and done.stdout.strip() == "300000"


@needs_pool
def test_workers_ask_for_short_slices():
    # Woken beside busy neighbours, a worker with a short slice runs at once instead of queueing
    # behind a neighbour's (docs/performance.md).
    if not _kernel_grants_slices():
        pytest.skip("this kernel does not give a thread the slice it asks for (before 6.12)")

    def slices(**env: str) -> tuple[int, list[int]]:
        ran, caller, *workers = run_script(_SLICES, **env).split()
        if ran != "True":
            pytest.skip("the worker never ran a chunk (one CPU?)")
        return int(caller), [int(slice_ns) for slice_ns in workers]

    caller, workers = slices()
    assert workers and all(slice_ns == 100_000 for slice_ns in workers), (caller, workers)
    assert slices(TVMC_POOL_SLICE_US="250")[1] == [250_000] * len(workers)
    caller, workers = slices(TVMC_POOL_SLICE_US="0")
    assert workers == [caller] * len(workers)  # the kernel's default, as the caller's
    # past the kernel's longest slice: that
    assert slices(TVMC_POOL_SLICE_US="9" * 30)[1] == [100_000_000] * len(workers)


@needs_pool
@pytest.mark.parametrize("name", ["TVMC_POOL_SLICE_US", "TVMC_POOL_SPIN_US"])
@pytest.mark.parametrize("value", ["fast", "-5", " 5", "1_000"])
def test_a_pool_variable_that_is_not_a_whole_number_is_an_error(name, value):
    done = subprocess.run([sys.executable, "-c", "from tvmc.codegen import pool; pool.stats()"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT,
                          name: value}, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert f"${name} must be a whole number of microseconds, got {value!r}" in done.stderr


def test_the_cli_refuses_a_bad_pool_variable_before_any_work(tmp_path):
    # before the command reads anything: tune's runner processes, not tune, load the pool
    done = subprocess.run([sys.executable, "-m", "tvmc.cli.main", "tune", "absent.onnx",
                           "--tuning-records", str(tmp_path / "log.json")], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": ROOT,
                          "TVMC_POOL_SLICE_US": "1e3"}, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "Error: $TVMC_POOL_SLICE_US must be a whole number of microseconds, got '1e3'"
    )
    assert not (tmp_path / "log.json").exists()


_GOMP = """
import numpy as np
from tests.kernel.examples import parallel_rows
from tvmc.codegen import emit_cpu, load_shared, pool, set_num_threads
ex = parallel_rows()
mod = load_shared(emit_cpu([ex.kernel]))
set_num_threads(2)
arrays = ex.inputs(np.random.default_rng(0))
mod.run(ex.kernel.name, *arrays)
assert np.allclose(arrays[-1], ex.reference(*arrays)[0])
print(pool.uses_gomp(), pool.stats().loops)
"""


@needs_pool
def test_the_libgomp_switch():
    assert run_script(_GOMP, TVMC_THREAD_POOL="gomp").split() == ["True", "0"]
    assert run_script(_GOMP).split() == ["False", "1"]


_CACHE = """
from tvmc.codegen import pool
print(pool.library_path())
"""


@needs_pool
def test_the_library_is_built_once_into_the_cache(tmp_path):
    first = run_script(_CACHE, TVMC_CACHE_DIR=str(tmp_path)).strip()
    assert os.path.dirname(first) == str(tmp_path) and os.path.exists(first)
    stamp = os.stat(first).st_mtime_ns
    assert run_script(_CACHE, TVMC_CACHE_DIR=str(tmp_path)).strip() == first
    assert os.stat(first).st_mtime_ns == stamp
    assert [p for p in os.listdir(tmp_path) if p.startswith(".pool-")] == []  # no leftovers


_NO_COMPILER = """
import warnings, numpy as np
from tests.kernel.examples import parallel_rows
from tvmc.codegen import CodegenOptions, emit_cpu, load_jit, set_num_threads
ex = parallel_rows()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    serial = emit_cpu([ex.kernel])
assert "tvmc_parallel_for" not in serial.llvm_ir
assert any("no C compiler" in str(w.message) for w in caught), caught
# code compiled elsewhere with parallel loops still runs, serially
mod = load_jit(emit_cpu([ex.kernel], options=CodegenOptions(parallel=True)))
set_num_threads(2)
arrays = ex.inputs(np.random.default_rng(0))
mod.run(ex.kernel.name, *arrays)
print(np.allclose(arrays[-1], ex.reference(*arrays)[0]))
"""


def test_without_a_compiler_loops_run_serially(tmp_path):
    assert run_script(_NO_COMPILER, PATH="", TVMC_CACHE_DIR=str(tmp_path)).strip() == "True"


@needs_pool
def test_jit_code_uses_the_pool():
    ex = parallel_rows()
    mod = load_jit(emit_cpu([ex.kernel]))
    set_num_threads(2)
    before = pool.stats().loops
    arrays = ex.inputs(np.random.default_rng(0))
    mod.run(ex.kernel.name, *arrays)
    np.testing.assert_allclose(arrays[-1], ex.reference(*arrays)[0], rtol=1e-6)
    assert pool.stats().loops == before + 1


@needs_pool
def test_each_thread_runs_its_own_range_first_and_takes_the_others_from_the_back():
    """8 chunks on 2 threads: the caller owns 0-3, the worker 4-7. Each runs its own from the
    front; a thread done with its own takes the other's from the back. Consecutive loops split
    alike so give each core the same part of the data."""
    lib = pool._library()
    body_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    lib.tvmc_parallel_for.argtypes = [body_type, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32]
    caller, ran = threading.get_native_id(), []

    def body(closure, begin, end):
        ran.append((threading.get_native_id() == caller, begin, end))
        time.sleep(0.004)  # releases the GIL: both threads take part

    callback = body_type(body)
    for _ in range(3):
        ran.clear()
        lib.tvmc_parallel_for(callback, None, 8, 2)
        assert sorted((b, e) for _, b, e in ran) == [(i, i + 1) for i in range(8)]
        for by_caller, own in ((True, range(0, 4)), (False, range(4, 8))):
            order = [b for who, b, _ in ran if who == by_caller]
            from_own = [b for b in order if b in own]
            taken = [b for b in order if b not in own]
            assert from_own == list(own)[: len(from_own)]  # its own range, from the front
            other = [b for b in range(8) if b not in own]
            assert taken == other[::-1][: len(taken)]  # the other's, from the back
    time.sleep(0.05)  # the worker has gone to sleep: woken, it first sleeps the delay
    pool.set_worker_delay(200_000)  # a late worker: the caller takes the worker's range too
    ran.clear()
    lib.tvmc_parallel_for(callback, None, 8, 2)
    assert [b for _, b, _ in ran] == [0, 1, 2, 3, 7, 6, 5, 4]


@needs_pool
def test_a_long_loop_runs_in_finer_chunks_next_time():
    """A loop whose caller's share lasted long (4 chunks of 4 ms) runs in up to 16 chunks a
    thread next time, each still as long as the minimum chunk time; a quick loop keeps 4."""
    lib = pool._library()
    body_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    lib.tvmc_parallel_for.argtypes = [body_type, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32]
    chunks: list[tuple[int, int]] = []

    def slow(closure, begin, end):
        chunks.append((begin, end))
        time.sleep(0.0005 * (end - begin))  # releases the GIL: both threads take part

    def quick(closure, begin, end):
        chunks.append((begin, end))

    def run(body) -> int:
        chunks.clear()
        lib.tvmc_parallel_for(body, None, 64, 2)
        assert sorted(chunks) == sorted(set(chunks)) and sum(e - b for b, e in chunks) == 64
        return len(chunks)

    slow_body, quick_body = body_type(slow), body_type(quick)
    # (a freed callback's address may come back for a new one, with its history: the first
    # runs are made at 4 chunks a thread)
    pool.set_min_chunk_us(FOUR_CHUNKS)
    assert run(slow_body) == 8  # 2 threads x 4; the caller's share: 4 x 8 x 0.5 ms
    run(quick_body)  # a few Python calls: microseconds
    pool.set_min_chunk_us(1000)
    assert run(slow_body) == 32  # 16 ms / 1 ms a chunk, at most 16 a thread
    assert run(quick_body) == 8
