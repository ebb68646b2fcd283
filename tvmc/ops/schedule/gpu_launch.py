"""Launch geometry shared by the GPU schedules: limits, one-thread-per-element grids, checks."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from tvmc.kernel import Expr, For, Kernel, KernelIRError, Stmt, if_then_else, loop, nest
from tvmc.kernel.transform import (
    MAX_STATIC_SHARED_BYTES,
    MAX_THREADS_PER_BLOCK,
    gpu_extents,
    walk,
)
from tvmc.ops.lowering import LowerContext

MAX_THREADS = MAX_THREADS_PER_BLOCK
MAX_SHARED_BYTES = MAX_STATIC_SHARED_BYTES
MAX_BLOCKS = 1 << 20  # blocks per launch before grid_loop strides (the x limit is 2**31 - 1)
DEFAULT_BLOCK = 256  # threads per block of elementwise kernels: full occupancy on sm_70+
BLOCKS = (64, 128, 256, 512)  # threads per block worth trying for one-thread-per-output kernels
UNROLL_TAPS = 32  # windows up to this many taps are unrolled in one-thread-per-output kernels


class GPUConfigError(ValueError):
    """A config whose kernels cannot launch (too many threads, too much shared memory)."""


def grid_loop(total: int, body: Callable[[Expr], Stmt], block: int = DEFAULT_BLOCK) -> Stmt:
    """`body(i)` for i in [0, total): blockIdx.x x threadIdx.x, striding when the grid is full."""
    threads = max(1, min(block, total))
    blocks = math.ceil(total / threads)
    rounds = math.ceil(blocks / MAX_BLOCKS)
    blocks = math.ceil(blocks / rounds)
    guarded = rounds * blocks * threads != total

    def at(b: Expr, t: Expr, r: Expr | None) -> Stmt:
        flat = b * threads + t if r is None else (r * blocks + b) * threads + t
        return if_then_else(flat < total, body(flat)) if guarded else body(flat)

    def thread(b: Expr, t: Expr) -> Stmt:
        return loop("r", rounds, lambda r: at(b, t, r)) if rounds > 1 else at(b, t, None)

    return loop(
        "bx",
        blocks,
        lambda b: loop("tx", threads, lambda t: thread(b, t), kind="threadIdx.x"),
        kind="blockIdx.x",
    )


def launch_shape(kernel: Kernel) -> tuple[int, int]:
    """(threads per block, static shared bytes) of `kernel`, as the NVPTX codegen launches it."""
    try:
        axes, shared = gpu_extents(kernel.name, kernel.body)
    except KernelIRError as exc:  # a GPU loop of no constant extent
        raise GPUConfigError(str(exc)) from None
    threads = math.prod(axes.get(f"threadIdx.{d}", 1) for d in "xyz")
    return threads, shared


def check_gpu_config(kernels: Iterable[Kernel]) -> None:
    """Raise GPUConfigError when a kernel breaks a launch limit or has a CPU-only loop."""
    for kernel in kernels:
        threads, shared = launch_shape(kernel)
        if threads > MAX_THREADS:
            raise GPUConfigError(
                f"kernel {kernel.name}: {threads} threads per block (at most {MAX_THREADS})"
            )
        if shared > MAX_SHARED_BYTES:
            raise GPUConfigError(
                f"kernel {kernel.name}: {shared} bytes of shared memory (at most "
                f"{MAX_SHARED_BYTES})"
            )
        for node in walk(kernel.body):  # (launch_shape refused GPU loops of no constant extent)
            if isinstance(node, For) and node.kind in ("parallel", "vectorized"):
                raise GPUConfigError(f"kernel {kernel.name}: {node.kind} loop on a GPU")


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (n >= 1)."""
    return 1 << max(0, (n - 1).bit_length())


def all_of(tests: Iterable[Expr | None]) -> Expr | None:
    """The conjunction of the tests that exist (None: nothing to test, no guard needed)."""
    cond: Expr | None = None
    for t in tests:
        if t is not None:
            cond = t if cond is None else cond & t
    return cond


def block_of(ctx: LowerContext) -> int:
    """The `block` knob (threads per block of a one-thread-per-output kernel), checked."""
    block = int(ctx.config.get("block", DEFAULT_BLOCK))
    if not 0 < block <= MAX_THREADS:
        raise GPUConfigError(f"block {block}: 1 to {MAX_THREADS} threads")
    return block


def window_loops(extents: tuple[int, ...], body: Callable[..., Stmt]) -> Stmt:
    """Loops over a window's taps, unrolled when the window is small."""
    kind = "unrolled" if math.prod(extents) <= UNROLL_TAPS else "serial"
    return nest([(f"t{d}", e, kind) for d, e in enumerate(extents)], body)
