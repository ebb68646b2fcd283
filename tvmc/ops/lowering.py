"""How an op becomes kernel IR: the types a lowering sees and the two kinds of lowering.

Every op's `OpDef.lowerings` is a table from target kind ("cpu", "cuda") to one of:

- a **Compute**: for ops where each output element is an expression of a few input elements
  (elementwise, broadcast, injective, small gathers). It maps output indices to a kernel IR
  expression, reading inputs through `TensorRef.read`. Computes compose, so a chain of them fuses
  into one loop nest (tvmc.ops.schedule.injective) or into a template's epilogue. One compute
  usually serves every target (`computed(fn)` builds that table).
- a **Template**: builds whole kernels (loops, scratch, vectors; on a GPU blockIdx/threadIdx
  loops with serial or unrolled loops inside a thread) for heavy or reducing ops, beside its knob
  space. It may accept an `Epilogue`: the fused elementwise ops that follow it, applied to each
  computed value before it is stored. Templates read their knobs from `ctx.config` (defaults
  when empty; tuning fills it).
- None: the op cannot run on that target kind (compiling it there is an unsupported-op error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, IntImm, Kernel
from tvmc.ops.space import ConfigSpace

Attrs = dict[str, Any]
Indices = tuple[Expr, ...]
Accessor = Callable[[Indices], Expr]


@dataclass(frozen=True, eq=False)
class Epilogue:
    """The elementwise ops fused after a template, evaluated in registers on each computed
    value before it is stored."""

    apply: Callable[[Indices, Expr], Expr]  # (output indices, computed value) -> stored value
    # tensors it reads at the output's own indices (a residual add): a template may fetch them
    # ahead of its stores, which on a tile touching many output planes no prefetcher follows
    reads: tuple[Buffer, ...] = ()
    # may it be applied at (n, c, 0, ..., 0, q), q a position of the output's planes read as one
    # row (a flat offset through the last axis)? Yes where every tensor it reads is constant
    # over the planes or, stored in memory, has the output's planes (tvmc.lower.lower)
    flat_planes: bool = False

    def __call__(self, idx: Indices, value: Expr) -> Expr:
        return self.apply(idx, value)


@dataclass(frozen=True, eq=False)
class TensorRef:
    """A tensor as a lowering sees it: its type and how to read an element at given indices."""

    name: str
    type: TensorType
    read: Accessor
    buffer: Buffer | None = None  # set when the tensor lives in memory (a kernel param)
    value: np.ndarray | None = None  # set when it is a constant

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype


def buffer_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Kernel buffers have at least one element: a scalar tensor is a 1-element buffer, and an
    empty tensor a 1-element placeholder that no kernel writes and nothing meaningfully reads."""
    return tuple(shape) if shape and all(shape) else (1,)


def buffer_read(buffer: Buffer, rank: int) -> Accessor:
    """Read a tensor of `rank` dims stored in `buffer` (row-major)."""
    if rank == 0 or buffer.ndim != rank:  # a scalar, or an empty tensor's placeholder
        return lambda idx: buffer[0]
    return lambda idx: buffer[tuple(idx)]


def ref_of_buffer(
    name: str, type: TensorType, buffer: Buffer, value: np.ndarray | None = None
) -> TensorRef:
    """A TensorRef reading a materialized tensor."""
    return TensorRef(name, type, buffer_read(buffer, type.ndim), buffer, value)


def broadcast_read(ref: TensorRef, out_shape: Sequence[int]) -> Accessor:
    """Read `ref` at output indices with numpy broadcasting (right-aligned, size-1 dims fixed)."""
    shape = ref.shape
    offset = len(out_shape) - len(shape)
    if offset < 0:
        raise ValueError(f"{ref.name}: shape {list(shape)} does not broadcast to {list(out_shape)}")
    if tuple(shape) == tuple(out_shape):
        return ref.read
    zero = IntImm(0, "int32")

    def read(idx: Indices) -> Expr:
        mine = idx[offset:]
        return ref.read(tuple(zero if d == 1 else i for d, i in zip(shape, mine)))

    return read


@dataclass(frozen=True)
class LoweringTarget:
    """What templates need to know of the target."""

    kind: str = "cpu"  # "cpu" or "cuda"
    vector_bits: int = 512  # widest SIMD register (512 AVX-512, 256 AVX2, 128 NEON/SSE)
    num_threads: int = 1  # worker threads the runtime will use (a hint for splitting work)
    vector_registers: int = 32  # SIMD registers a register tile may fill (16 on AVX2/SSE)
    cache_bytes: int = 0  # a core's own cache (L2); 0 unknown: templates then assume data fits
    l1_bytes: int = 0  # a core's L1 data cache; 0 unknown
    l2_stream_bytes: int = 0  # bytes a cycle the L2 sustains into L1; 0 unknown (assumed ample)
    flops_per_cycle: int = 0  # fp32 flops a cycle of a core's vector FMAs; 0 unknown

    @classmethod
    def of_cpu(cls, target: Any, num_threads: int) -> LoweringTarget:
        """What templates are told of a CPU target (a codegen `CPUTarget`: its vector width,
        registers and own caches) whose code runs on `num_threads` threads."""
        return cls("cpu", target.vector_bits, num_threads, target.vector_registers,
                   target.private_cache_bytes, target.l1_data_bytes,
                   target.l2_stream_bytes_per_cycle, target.fma_flops_per_cycle)  # fmt: skip

    def lanes(self, dtype: str) -> int:
        """Vector lanes of `dtype` in one register."""
        return max(1, self.vector_bits // (np.dtype(dtype).itemsize * 8))


@dataclass
class LowerContext:
    """Services a template uses: new constants, scratch memory in the workspace, unique names."""

    target: LoweringTarget
    config: Mapping[str, Any] = field(default_factory=dict)
    prefix: str = "k"
    params: list[tuple[Buffer, np.ndarray]] = field(default_factory=list)
    temps: list[Buffer] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)
    # may a kernel read (buffer, bytes) past that buffer's end, values it drops? A yes is a
    # promise the lowering keeps (workspace intermediates); inputs, outputs, params: no
    may_read_past_end: Callable[[Buffer, int], bool] = lambda buf, nbytes: False

    def param(self, array: np.ndarray, hint: str) -> Buffer:
        """A new constant (e.g. weights packed into a blocked layout at compile time)."""
        array = np.ascontiguousarray(array)
        buf = Buffer(self.name(f"{hint}_packed"), buffer_shape(array.shape), array.dtype.name)
        self.params.append((buf, array.reshape(buf.shape)))
        return buf

    def temp(self, shape: Sequence[int], dtype: str, hint: str) -> Buffer:
        """Scratch memory in the model's workspace, live during this op's kernels only."""
        buf = Buffer(self.name(f"{hint}_tmp"), buffer_shape(tuple(shape)), dtype)
        self.temps.append(buf)
        return buf

    def name(self, hint: str) -> str:
        """A unique identifier derived from `hint` (kernel or buffer names)."""
        return unique_identifier(f"{self.prefix}_{hint}", self._names, lead="k")


def unique_identifier(text: str, taken: set[str], lead: str = "t") -> str:
    """An identifier from `text` (other characters become `_`) not in `taken`, which it joins."""
    base = "".join(c if c.isalnum() else "_" for c in text).strip("_")
    base = base if base and not base[0].isdigit() else f"{lead}_{base}"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


SpaceFn = Callable[[Attrs, list[TensorType], "LoweringTarget"], ConfigSpace | None]
ComputeFn = Callable[[Attrs, list[TensorRef], list[TensorType]], list[Accessor]]
ElementCostFn = Callable[[Attrs, list[TensorType]], int]
TemplateFn = Callable[
    [LowerContext, Attrs, list[TensorRef], list[Buffer], "Epilogue | None"], list[Kernel]
]
TARGET_KINDS = ("cpu", "cuda")  # the columns of every op's lowering table


@dataclass(frozen=True)
class Compute:
    """A fusable lowering: output indices -> one expression over input elements.

    Chains of computes fuse into one loop nest or a template's epilogue; the target's injective
    schedule (tvmc.ops.schedule.injective) lays out the loops, so one compute serves every target.
    `element_cost(attrs, input_types)`: what one output element costs where the compute is
    lowered alone, in elements of a copy (one contiguous read); the schedule parallelizes a loop
    by its element count times that. None: 1.
    """

    fn: ComputeFn
    element_cost: ElementCostFn | None = None


@dataclass(frozen=True)
class Template:
    """A lowering that builds whole kernels for one target kind, beside its knob space.

    `epilogue`: the template applies a fused elementwise epilogue to its first output's values.
    `space(attrs, input_types, target)`: the knobs the template reads from `ctx.config`, with
    `default_index` naming the config that equals its defaults; None: not tunable there.
    """

    build: TemplateFn
    space: SpaceFn | None = None
    epilogue: bool = False


Lowering = Compute | Template


def computed(
    fn: ComputeFn, element_cost: ElementCostFn | None = None
) -> dict[str, Lowering | None]:
    """The lowering table of an op whose one compute serves every target kind."""
    lowering = Compute(fn, element_cost)
    return {kind: lowering for kind in TARGET_KINDS}
