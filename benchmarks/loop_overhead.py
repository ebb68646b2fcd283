"""Cost of one small parallel loop call (64 x 16 floats): the pool's (or libgomp's, with
TVMC_THREAD_POOL=gomp) fork/join overhead, on 1 and 2 threads; min and median of 5 x 2000 calls.
"""

from __future__ import annotations

import ctypes
import statistics
import time

import numpy as np

from tests.kernel.examples import parallel_rows
from tvmc.codegen import emit_cpu, load_shared, set_num_threads


def main() -> None:
    ex = parallel_rows(rows=64, n=16)
    mod = load_shared(emit_cpu([ex.kernel]))
    arrays = ex.inputs(np.random.default_rng(0))
    call = mod.functions[ex.kernel.name]
    pointers = [ctypes.c_void_p(a.ctypes.data) for a in arrays]
    for n in (1, 2):
        set_num_threads(n)
        for _ in range(1000):
            call(*pointers)
        per_call = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(2000):
                call(*pointers)
            per_call.append((time.perf_counter() - start) / 2000 * 1e6)
        print(f"{n} threads: us per loop call: min {min(per_call):.2f}, "
              f"median {statistics.median(per_call):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
