"""Benchmark (not a test): is Winograd worth it here? F(2x2,3x3) and F(4x4,3x3) in kernel IR
beside tvmc's default direct conv, for the 3x3 stride-1 convs of light_vgg19 and light_resnet50.

    .venv/bin/python benchmarks/winograd.py [--tiles 2 4] [--rounds 5] [models...]
    .venv/bin/python benchmarks/winograd.py --check C K H W   # correctness of one shape only

A feasibility measurement, not a template: the compiler does not use it. Per conv (NCHW, batch
1, pad 1) and output tile m (alpha = m + 2):
- the weight transform U[alpha^2, K, C] = G g G^T, in numpy (a compile-time constant in a build);
- "input": a pad kernel copying X into a zero-bordered plane, then the input transform
  V[alpha^2, C, P] = B^T d B over the P tiles, vectorized across the tiles of a row (loads of
  stride m) or, in planes of fewer than half a vector of tiles per row, across rows (gathers);
- "gemm": alpha^2 independent GEMMs M[t] = U[t] @ V[t] (K x C times C x P), register-tiled as
  benchmarks/kernel_matmul.py (a packed B panel of KC x NR, MR x NR accumulators, FMA from
  broadcast U values); P is padded to the panel width NR (1-4 vectors: `panel_vectors`);
- "output": Y = A^T m A per tile, scattered into the output (its planes rounded up to m).
Every stage runs on one thread, timed by the thread's CPU time (as heavy_convs.py --cpu-time),
in alternation with the direct conv's default config built and timed as heavy_convs.py times it.
"Effective GFLOP/s" is the direct conv's FLOPs (2 K C 9 H W) over the time taken.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from heavy_convs import cpu_timed, task_types
from kernel_matmul import matmul_kernel
from suite import by_names

import tvmc
from tvmc.autotune.measure import TaskOp, default_entity
from tvmc.codegen import CPUTarget, emit_cpu, load_shared, set_num_threads
from tvmc.kernel import (
    Buffer,
    Expr,
    Kernel,
    Stmt,
    Var,
    broadcast,
    let,
    loop,
    minimum,
    ramp,
    seq,
)
from tvmc.ops.conv.cpu import geometry_of
from tvmc.ops.conv.cpu_tiles import FLOPS_PER_CYCLE, FMA_LATENCY, LOADS_PER_CYCLE, max_rows

# Lavin & Gray's matrices: Y = A^T [(G g G^T) * (B^T d B)] A.
MATRICES = {
    2: (
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]],
    ),
    4: (
        [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
         [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
         [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
    ),
}  # fmt: skip
STAGES = ("input", "gemm", "output")
MAX_TILE_ROWS = 8  # MR cap: more rows only lengthen the unrolled body


@dataclass(frozen=True)
class Shape:
    """A 3x3 stride-1 pad-1 conv, batch 1: C input, K output channels, H x W planes."""

    channels: int
    out_channels: int
    height: int
    width: int

    @property
    def flops(self) -> int:
        return 2 * self.out_channels * self.channels * 9 * self.height * self.width

    def __str__(self) -> str:
        return f"{self.channels:4}->{self.out_channels:<4} {self.height}x{self.width}"


@dataclass(frozen=True)
class Layout:
    """The tiling of one shape for output tile m on a CPU of `lanes` floats per vector."""

    shape: Shape
    m: int
    lanes: int
    registers: int
    vectors: int = 0  # the GEMM panel's NV; 0: `panel_vectors` picks it

    @property
    def alpha(self) -> int:
        return self.m + 2

    @property
    def tiles_h(self) -> int:
        return math.ceil(self.shape.height / self.m)

    @property
    def tiles_w(self) -> int:
        return math.ceil(self.shape.width / self.m)

    @property
    def tiles(self) -> int:
        return self.tiles_h * self.tiles_w

    @property
    def tile_lanes(self) -> int:
        """Tiles per vector of the transforms (fewer where the plane has fewer tiles)."""
        return min(self.lanes, self.tiles)

    @property
    def padded_width(self) -> int:  # of the zero-bordered input plane
        return self.tiles_w * self.m + 2

    @property
    def padded_height(self) -> int:
        return self.tiles_h * self.m + 2

    @property
    def panel_vectors(self) -> int:
        """NV of the GEMM's NR = NV * lanes panel: the fewest modelled cycles, the padded
        panels times the row blocks times a reduction step's cycles (its FMAs, its loads or
        the FMA latency, whichever is longest: cpu_tiles' core model), then the widest."""

        def cycles(nv: int) -> float:
            mr = self.rows_for(nv)
            per_cycle = FLOPS_PER_CYCLE / (2 * self.lanes)
            step = max(mr * nv / per_cycle, (mr + nv) / LOADS_PER_CYCLE, FMA_LATENCY)
            panels = _round_up(self.tiles, nv * self.lanes) // (nv * self.lanes)
            return panels * (self.shape.out_channels // mr) * step

        return self.vectors or min(range(4, 0, -1), key=cycles)

    @property
    def panel(self) -> int:
        return self.panel_vectors * self.lanes

    @property
    def padded_tiles(self) -> int:
        return _round_up(self.tiles, self.panel)

    @property
    def gemm_flops(self) -> int:
        """The GEMM's multiply-adds x 2, over the padded tiles (the work it does)."""
        s = self.shape
        return 2 * self.alpha**2 * s.out_channels * s.channels * self.padded_tiles

    @property
    def tile_rows(self) -> int:
        return self.rows_for(self.panel_vectors)

    def rows_for(self, nv: int) -> int:
        """MR: the most rows dividing K whose accumulators, B vectors and broadcast fit."""
        fits = range(1, min(MAX_TILE_ROWS, max_rows(nv, self.registers)) + 1)
        return max(r for r in fits if self.shape.out_channels % r == 0)

    @property
    def depth_block(self) -> int:
        """KC: the C block of one packed panel (at most 128 rows, dividing C)."""
        c = self.shape.channels
        return max(d for d in range(1, min(c, 128) + 1) if c % d == 0)


def _round_up(x: int, to: int) -> int:
    return -(-x // to) * to


def lincomb(coefficients: Sequence[float], vectors: Sequence[Expr], lanes: int) -> Expr:
    """sum(c * v) over the nonzero coefficients; +-1 as adds and subtracts."""
    total: Expr | None = None
    for c, v in zip(coefficients, vectors):
        if c == 0:
            continue
        if abs(c) == 1:
            term, negative = v, c < 0
        else:
            term, negative = broadcast(float(abs(c)), lanes) * v, c < 0
        if total is None:
            total = broadcast(0.0, lanes) - term if negative else term
        else:
            total = total - term if negative else total + term
    assert total is not None
    return total


def two_sided(matrix: Sequence[Sequence[float]], d: list[list[Expr]], lanes: int):
    """matrix @ d @ matrix^T on a grid of vector expressions."""
    rows = [[lincomb(row, [d[i][j] for i in range(len(d))], lanes) for j in range(len(d[0]))]
            for row in matrix]  # fmt: skip
    return [[lincomb(col, r, lanes) for col in matrix] for r in rows]


def over_tiles(lay: Layout, body: Callable[[Expr, Expr, Expr], Stmt]) -> Stmt:
    """body(p0, tile_y, tile_x) per vector of tile_lanes tiles from p0; the last vector is
    moved back to end at the last tile (it redoes some tiles, with the same result)."""
    n = lay.tile_lanes
    chunks = math.ceil(lay.tiles / n)

    def chunk(ci: Var) -> Stmt:
        def at(p0: Var) -> Stmt:
            tile = ramp(p0, n)
            return let("ty", tile // lay.tiles_w, lambda ty: let(
                "tx", tile % lay.tiles_w, lambda tx: body(p0, ty, tx)))  # fmt: skip

        return let("p0", minimum(ci * n, lay.tiles - n), at)

    return loop("chunk", chunks, chunk)


def pad_kernel(lay: Layout) -> Kernel:
    """Xp[c, 1 + y, 1 + x] = X[c, y, x]; Xp's border (and the rows and columns the last tiles
    read past the plane) is zero from its allocation and never written."""
    s = lay.shape
    x = Buffer("X", (s.channels, s.height, s.width))
    xp = Buffer("Xp", (s.channels, lay.padded_height * lay.padded_width))

    def row(c: Var, y: Var) -> Stmt:
        def copy(i: Var) -> Stmt:
            return xp.store((c, (y + 1) * lay.padded_width + 1 + i), x[c, y, i])

        return loop("i", s.width, copy, kind="vectorized")

    body = loop("c", s.channels, lambda c: loop("y", s.height, lambda y: row(c, y)))
    return Kernel("wino_pad", (x, xp), body)


def input_kernel(lay: Layout, row_min: int = 0) -> Kernel:
    """V[t, c, p] = (B^T d B)[t] for the alpha x alpha input d of tile p (vectors over p).
    Where a row has half a vector of tiles or more, each vector stays in one row: its inputs
    are loads of stride m (a wide load and a shuffle); else the lanes gather them one by one.
    `row_min`: the fewest tiles a row needs for that (default: half a vector's lanes, where
    rows already beat gathers: docs/performance.md); a vector spans min(lanes, tiles_w)."""
    s, a, wp = lay.shape, lay.alpha, lay.padded_width
    bt = MATRICES[lay.m][0]
    xp = Buffer("Xp", (s.channels, lay.padded_height * wp))
    v = Buffer("V", (a * a, s.channels, lay.padded_tiles))

    def transform(p0: Expr, base: Expr, lane_step: int | None, n: int) -> Stmt:
        def channel(c: Var) -> Stmt:
            def at(i: int, j: int) -> Expr:
                if lane_step is None:  # base: a vector of per-lane offsets
                    return xp[c, base + (i * wp + j)]
                return xp[c, ramp(base + (i * wp + j), n, lane_step)]

            out = two_sided(bt, [[at(i, j) for j in range(a)] for i in range(a)], n)
            return seq(*(v.store((i * a + j, c, ramp(p0, n)), out[i][j])
                         for i in range(a) for j in range(a)))  # fmt: skip

        return loop("c", s.channels, channel)

    if lay.tiles_w >= (row_min or lay.lanes // 2):
        n = min(lay.lanes, lay.tiles_w)
        chunks = math.ceil(lay.tiles_w / n)

        def row(ty: Var) -> Stmt:
            def chunk(ci: Var) -> Stmt:
                return let("x0", minimum(ci * n, lay.tiles_w - n), lambda x0: transform(
                    ty * lay.tiles_w + x0, ty * (lay.m * wp) + x0 * lay.m, lay.m, n))  # fmt: skip

            return loop("chunk", chunks, chunk)

        return Kernel("wino_input", (xp, v), loop("ty", lay.tiles_h, row))

    def per_chunk(p0: Expr, ty: Expr, tx: Expr) -> Stmt:
        base = ty * (lay.m * wp) + tx * lay.m
        return let("base", base, lambda b: transform(p0, b, None, lay.tile_lanes))

    return Kernel("wino_input", (xp, v), over_tiles(lay, per_chunk))


def gemm_kernel(lay: Layout) -> Kernel:
    """M[t] = U[t] @ V[t] for each of the alpha^2 positions t (kernel_matmul.py's tiling)."""
    s = lay.shape
    return matmul_kernel(s.out_channels, lay.padded_tiles, s.channels, lay.tile_rows, lay.panel,
                         lay.depth_block, batch=lay.alpha**2, lanes=lay.lanes,
                         name="wino_gemm")  # fmt: skip


def output_kernel(lay: Layout) -> Kernel:
    """Y[k, m ty + i, m tx + j] = (A^T M A)[i, j] per tile (Y's planes rounded up to m)."""
    s, a, n, m = lay.shape, lay.alpha, lay.tile_lanes, lay.m
    at_ = MATRICES[m][2]
    width = lay.tiles_w * m
    mm = Buffer("M", (a * a, s.out_channels, lay.padded_tiles))
    y = Buffer("Y", (s.out_channels, lay.tiles_h * m * width))

    def per_chunk(p0: Expr, ty: Expr, tx: Expr) -> Stmt:
        def at(base: Var) -> Stmt:
            def channel(k: Var) -> Stmt:
                d = [[mm[i * a + j, k, ramp(p0, n)] for j in range(a)] for i in range(a)]
                out = two_sided(at_, d, n)
                return seq(*(y.store((k, base + (i * width + j)), out[i][j])
                             for i in range(m) for j in range(m)))  # fmt: skip

            return loop("k", s.out_channels, channel)

        return let("base", ty * (m * width) + tx * m, at)

    return Kernel("wino_output", (mm, y), over_tiles(lay, per_chunk))


def weight_transform(w: np.ndarray, m: int) -> np.ndarray:
    """U[alpha^2, K, C] = G g G^T of weights w[K, C, 3, 3] (float64 math, float32 result)."""
    g = np.array(MATRICES[m][1])
    u = np.einsum("ai,kcij,bj->abkc", g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape(-1, *w.shape[:2]), dtype=np.float32)


def direct_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The 3x3 pad-1 stride-1 conv in float64 numpy: the reference."""
    _, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    return sum(
        np.tensordot(w[:, :, i, j].astype(np.float64), xp[:, i : i + h, j : j + wd], 1)
        for i in range(3)
        for j in range(3)
    )


class Winograd:
    """The compiled stages of one shape and tile size, with their buffers."""

    def __init__(
        self, shape: Shape, m: int, w: np.ndarray, target: CPUTarget | None = None,
        vectors: int = 0,
    ):  # fmt: skip
        target = target or CPUTarget.host()
        lanes = target.vector_bits // 32
        self.layout = lay = Layout(shape, m, lanes, target.vector_registers, vectors)
        kernels = [pad_kernel(lay), input_kernel(lay), gemm_kernel(lay), output_kernel(lay)]
        self.module = load_shared(emit_cpu(kernels, target))
        a2, s = lay.alpha**2, shape
        self.x = np.zeros((s.channels, s.height, s.width), np.float32)
        self.xp = np.zeros((s.channels, lay.padded_height * lay.padded_width), np.float32)
        self.v = np.zeros((a2, s.channels, lay.padded_tiles), np.float32)
        self.u = weight_transform(w, m)
        self.mm = np.zeros((a2, s.out_channels, lay.padded_tiles), np.float32)
        self.y = np.zeros((s.out_channels, lay.tiles_h * m * lay.tiles_w * m), np.float32)
        ptr = [a.ctypes.data for a in (self.x, self.xp, self.v, self.u, self.mm, self.y)]
        x, xp, v, u, mm, y = ptr
        calls = {
            "input": [(self.module["wino_pad"], (x, xp)), (self.module["wino_input"], (xp, v))],
            "gemm": [(self.module["wino_gemm"], (u, v, mm))],
            "output": [(self.module["wino_output"], (mm, y))],
        }
        self.calls = calls

    def stage_timer(self, stage: str) -> Callable[[], float]:
        calls = self.calls[stage]

        def once() -> float:
            start = time.thread_time()
            for fn, args in calls:
                fn(*args)
            return time.thread_time() - start

        once.keep_alive = self  # type: ignore[attr-defined]  # the arrays `calls` points into
        return once

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.x[...] = x
        for stage in STAGES:
            self.stage_timer(stage)()
        s, lay = self.layout.shape, self.layout
        y = self.y.reshape(s.out_channels, lay.tiles_h * lay.m, lay.tiles_w * lay.m)
        return y[:, : s.height, : s.width]


def check(shape: Shape, m: int, seed: int = 0) -> float:
    """Runs the Winograd stages on random data; the max error relative to max |reference|."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((shape.out_channels, shape.channels, 3, 3), dtype=np.float32)
    return error_of(Winograd(shape, m, w), w, rng)


def error_of(wino: Winograd, w: np.ndarray, rng: np.random.Generator) -> float:
    """`wino`'s max error on a random input relative to max |reference|, asserted within
    rtol 1e-4 elementwise (atol 1e-4 of max |reference|, for outputs near zero)."""
    s = wino.layout.shape
    x = rng.standard_normal((s.channels, s.height, s.width), dtype=np.float32)
    got = wino(x)
    ref = direct_conv(x, w)
    scale = np.abs(ref).max()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * scale)
    return float(np.abs(got - ref).max() / scale)


def conv_shapes(models: list[str]) -> list[tuple[str, Shape, object]]:
    """(model, shape, task) of each distinct 3x3 stride-1 pad-1 ungrouped conv of `models`."""
    found, seen = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for model in by_names(models):
            for task in tvmc.extract_tasks(tvmc.load(model.onnx_path(tmp)), "llvm"):
                if task.op != "Conv":
                    continue
                types, _ = task_types(task)
                geo = geometry_of(task.op, TaskOp.of(task).node.attrs, types)
                if (geo.kernel, geo.strides, geo.dilations, geo.pad_begin, geo.group,
                        geo.batch) != ((3, 3), (1, 1), (1, 1), (1, 1), 1, 1):  # fmt: skip
                    continue
                shape = Shape(geo.channels, geo.out_channels, *geo.in_shape)
                if shape not in seen:
                    seen.add(shape)
                    found.append((model.name, shape, task))
    return found


def measure(
    task, shape: Shape, tiles: list[int], rounds: int
) -> tuple[dict[str, list[float]], dict[int, float]]:
    """CPU seconds per run: "direct" and each "F{m} {stage}", in alternating blocks of 5; and
    each tile size's max relative error (`error_of`, which asserts it)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((shape.out_channels, shape.channels, 3, 3), dtype=np.float32)
    runs = {"direct": cpu_timed(task, default_entity())}
    errors = {}
    for m in tiles:
        wino = Winograd(shape, m, w)
        errors[m] = error_of(wino, w, rng)
        for stage in STAGES:
            runs[f"F{m} {stage}"] = wino.stage_timer(stage)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for run in runs.values():
        run()  # warm-up
    for _ in range(rounds):
        for name, run in runs.items():
            times[name] += [run() for _ in range(5)]
    return times, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["light_vgg19", "light_resnet50"])
    parser.add_argument("--tiles", type=int, nargs="+", default=[2, 4], choices=sorted(MATRICES))
    parser.add_argument("--rounds", type=int, default=5, help="alternating blocks of 5 runs")
    parser.add_argument("--check", type=int, nargs=4, metavar=("C", "K", "H", "W"),
                        help="only check one shape's result against numpy")  # fmt: skip
    args = parser.parse_args()
    if args.check:
        if min(args.check) < 1:
            parser.error(f"--check wants positive C K H W, got {' '.join(map(str, args.check))}")
        shape = Shape(*args.check)
        small = [m for m in args.tiles if Layout(shape, m, 1, 1).tiles < 2]
        if small:  # a vector of 1 tile: 1-lane ramps, which the CPU codegen does not lower
            parser.error(f"--check: a {shape.height}x{shape.width} plane is one F{small[0]} "
                         f"tile; the benchmark wants 2 or more")  # fmt: skip
        for m in args.tiles:
            print(f"F({m}x{m},3x3) {shape}: max error {check(shape, m):.1e} of max |y|")
        return
    set_num_threads(1)
    host = CPUTarget.host()
    lanes = host.vector_bits // 32
    print(f"one thread, CPU time; best (median) of {args.rounds * 5} runs; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    head = f"{'model':15} {'conv':20} {'MFLOP':>6} {'direct':>13}"
    for m in args.tiles:
        head += f" | F{m} eff. GFLOP/s  x direct  input/gemm/output  gemm GFLOP/s  err"
    print(head)
    totals: dict[str, dict] = {}  # per model: seconds per run of its 3x3 convs, by variant
    for model, shape, task in conv_shapes(args.models):
        if any(Layout(shape, m, 1, 1).tiles < 2 for m in args.tiles):
            print(f"{model:15} {str(shape):20} skipped: one tile (1-lane vectors)")
            continue
        total = totals.setdefault(
            model, {"direct": 0.0, "fastest": 0.0, **dict.fromkeys(args.tiles, 0.0)}
        )
        weight = task.weight
        times, errors = measure(task, shape, args.tiles, args.rounds)
        gflop = shape.flops / 1e9
        best_direct, med_direct = min(times["direct"]), statistics.median(times["direct"])
        line = (f"{model:15} {str(shape):20} {shape.flops / 1e6:6.0f} "
                f"{gflop / best_direct:5.1f} ({gflop / med_direct:5.1f})")  # fmt: skip
        total["direct"] += best_direct * weight
        fastest = best_direct
        for m in args.tiles:
            stages = [min(times[f"F{m} {s}"]) for s in STAGES]
            med = sum(statistics.median(times[f"F{m} {s}"]) for s in STAGES)
            best = sum(stages)
            total[m] += best * weight
            fastest = min(fastest, best)
            split = "/".join(f"{t / best:.0%}" for t in stages)
            gemm = Layout(shape, m, lanes, host.vector_registers).gemm_flops / stages[1] / 1e9
            line += (f" | {gflop / best:6.1f} ({gflop / med:5.1f}) {best_direct / best:8.2f}x"
                     f"  {split:>17}  {gemm:12.1f}  {errors[m]:.0e}")  # fmt: skip
        total["fastest"] += fastest * weight
        print(line)
        sys.stdout.flush()
    for model, total in totals.items():
        summary = ", ".join(
            f"F{m} everywhere {total['direct'] / total[m]:.2f}x" for m in args.tiles
        )
        print(f"{model}: its 3x3 convs (each counted as often as the model runs it), best "
              f"times: speedup over direct {summary}, the fastest of direct and F per conv "
              f"{total['direct'] / total['fastest']:.2f}x")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
