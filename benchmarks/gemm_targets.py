"""GEMM template defaults built for several CPU targets, as a share of this host's peak.

    .venv/bin/python benchmarks/gemm_targets.py [--targets llvm "llvm -mcpu=znver3"] [--rounds 3]
        [--cold]

Each MatMul/Gemm workload (weights constant, as in a model) is extracted for every target and
its default config (`default_tile` of the target's registers: 6x4 on AVX-512, 6x2 on AVX2) is
timed on one thread by its CPU time, the targets in alternation (heavy_convs.py's `cpu_timed`),
best of `--rounds` x 5 runs, against one core's peak (tvmc.runtime.peak). On AMD Zen 4 the
512-bit FMA runs on two 256-bit pipes, so AVX2 code ("llvm -mcpu=znver3") has the same peak
and the columns compare the tiles, not the vector widths. `--cold` evicts the caches before
each run.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import onnx
from heavy_convs import cache_flush_array, cpu_seconds, cpu_timed, default_knobs
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tvmc.autotune.measure import default_entity
from tvmc.codegen import set_num_threads
from tvmc.runtime.peak import peak_gflops

# (name, M, K, N): a classifier's GEMV, BERT-base's projections and FFN, a square GEMM
WORKLOADS = [
    ("resnet50 fc 1x2048x1000", 1, 2048, 1000),
    ("bert qkv 128x768x768", 128, 768, 768),
    ("bert ffn 128x768x3072", 128, 768, 3072),
    ("bert ffn 128x3072x768", 128, 3072, 768),
    ("square 512x512x512", 512, 512, 512),
]


def matmul_model(m: int, k: int, n: int, path: str) -> str:
    """A one-node MatMul model of a runtime A (m, k) and constant B (k, n), saved at `path`."""
    b = np.random.default_rng(0).standard_normal((k, n)).astype(np.float32)
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    graph = helper.make_graph(
        [node], "matmul", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(b, "b")],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="+", default=["llvm", "llvm -mcpu=znver3"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="evict the caches before each run")
    args = parser.parse_args()
    set_num_threads(1)
    peak, source = peak_gflops(1)
    print(f"peak {peak:.0f} GFLOP/s ({source}); load average {os.getloadavg()[0]:.1f}")
    flush = None
    if args.cold:
        flush = cache_flush_array()
    print(f"{'workload':26} " + " ".join(f"{t[:28]:>28}" for t in args.targets))
    with tempfile.TemporaryDirectory() as tmp:
        for name, m, k, n in WORKLOADS:
            model = tvmc.load(matmul_model(m, k, n, os.path.join(tmp, "mm.onnx")))
            tasks = [next(t for t in tvmc.extract_tasks(model, target) if t.op == "MatMul")
                     for target in args.targets]  # fmt: skip
            runs = [cpu_timed(t, default_entity(), flush) for t in tasks]
            seconds = cpu_seconds(runs, args.rounds)
            cells = []
            for t, s in zip(tasks, seconds):
                knobs = default_knobs(t)
                tile = f"{knobs.get('tile_m')}x{knobs.get('tile_n')}"
                cells.append(f"{t.flops / s / 1e9:6.1f} {t.flops / s / 1e9 / peak:4.0%} {tile:>5}")
            print(f"{name:26} " + " ".join(f"{c:>28}" for c in cells), flush=True)
    print(f"cells: GFLOP/s, share of peak, default tile (MR x NV); "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
