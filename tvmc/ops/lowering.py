"""How an op becomes kernel IR.

Two kinds of lowering, attached to the op's `OpDef`:

- a **compute** (`@compute("Relu")`): for ops where each output element is an expression of a
  few input elements (elementwise, broadcast, injective, small gathers). It maps output indices
  to a kernel IR expression, reading inputs through `TensorRef.read`. Computes compose, so a chain
  of them fuses into one loop nest (`schedule_injective`) or into a template's epilogue.
- a **template** (`@template("Conv")`): builds whole kernels (loops, scratch, vectors) for heavy or
  reducing ops. It may accept an `Epilogue`: the fused elementwise ops that follow it, applied to
  each computed value before it is stored.

Templates read their knobs from `ctx.config` (defaults when empty; tuning fills it later).

Targets: `LoweringTarget.kind` is "cpu" or "cuda". Schedules dispatch on it (`schedule_injective`
and the reduction schedule have a GPU form in tvmc.ops.gpu), and a template that builds its own
loop nests registers a GPU variant beside the CPU one with `@template(name, ..., target="cuda")`.
The OpDef's `template` and `space` then route by `ctx.target.kind` / the space's target, so the
lowering and the tuner call them the same way for every target; `space` gives None on a target
kind that has no space (not tunable there), and `tunable(op, space, "cuda")` adds a GPU space to
a template that serves both kinds itself. A CUDA lowering emits only GPU loops
(blockIdx/threadIdx) with serial or unrolled loops inside a thread.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, IntImm, Kernel, Stmt, const, loop, seq
from tvmc.kernel.transform import free_buffers
from tvmc.ops.gpu.launch import grid_loop
from tvmc.ops.registry import OPS, Attrs
from tvmc.ops.space import ConfigSpace

Indices = tuple[Expr, ...]
Accessor = Callable[[Indices], Expr]
Epilogue = Callable[[Indices, Expr], Expr]  # (output indices, computed value) -> stored value


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


SpaceFn = Callable[[Attrs, list[TensorType], "LoweringTarget"], ConfigSpace]
ComputeFn = Callable[[Attrs, list[TensorRef], list[TensorType]], list[Accessor]]
TemplateFn = Callable[
    [LowerContext, Attrs, list[TensorRef], list[Buffer], "Epilogue | None"], list[Kernel]
]


def compute(name: str) -> Callable[[ComputeFn], ComputeFn]:
    """Attach `fn(attrs, inputs, out_types) -> [accessor per output]` to op `name`."""

    def wrap(fn: ComputeFn) -> ComputeFn:
        _attach(name, compute=fn)
        return fn

    return wrap


def template(
    name: str, epilogue: bool = False, space: SpaceFn | None = None, target: str = "cpu"
) -> Callable[[TemplateFn], TemplateFn]:
    """Attach `fn(ctx, attrs, inputs, outputs, epilogue) -> [Kernel]` to op `name`.

    `epilogue=True` says the template applies the epilogue to its first output's values.
    `space(attrs, input_types, target) -> ConfigSpace` makes the op tunable: its knobs are what
    the template reads from `ctx.config`. `target="cuda"` registers the GPU variant of an op
    whose CPU template exists (same epilogue contract).
    """

    def wrap(fn: TemplateFn) -> TemplateFn:
        if target == "cpu":
            _attach(name, template=fn, epilogue=epilogue, space=space)
        else:
            _attach_variant(name, target, fn, epilogue, space)
        return fn

    return wrap


TARGET_KINDS = ("cpu", "cuda")
VARIANTS: dict[str, dict[str, tuple[TemplateFn, SpaceFn | None]]] = {}  # op -> kind -> variant


def tunable(name: str, space: SpaceFn, target: str) -> None:
    """Give op `name` a knob space on `target` kind only, for a CPU template that serves that
    target itself (it dispatches on `ctx.target.kind` inside, as the reductions do)."""
    opdef = OPS[name]
    cpu_fn = VARIANTS[name]["cpu"][0] if name in VARIANTS else opdef.template
    if cpu_fn is None:
        raise AssertionError(f"op {name}: a space needs a template")
    _attach_variant(name, target, cpu_fn, opdef.epilogue, space)


def _attach_variant(
    name: str, kind: str, fn: TemplateFn, epilogue: bool, space: SpaceFn | None
) -> None:
    """Route op `name`'s template and space by target kind; the CPU template stays the fallback.

    Spaces route per kind too: the op's `space(attrs, types, target)` is None on a kind whose
    variant declares none ("not tunable here": no tuning task), so a GPU-only space leaves the
    CPU without tasks, and an op tunable nowhere keeps `space is None`.
    """
    if kind not in TARGET_KINDS:
        raise AssertionError(f"unknown target kind {kind!r}; valid: {TARGET_KINDS}")
    opdef = OPS[name]
    if opdef.template is None or opdef.epilogue != epilogue:
        raise AssertionError(f"op {name}: a {kind} variant needs a CPU template, same epilogue")
    variants = VARIANTS.setdefault(name, {"cpu": (opdef.template, opdef.space)})
    if kind in variants:
        raise AssertionError(f"op {name} already has a {kind} template")
    variants[kind] = (fn, space)
    cpu_fn = variants["cpu"][0]

    @functools.wraps(cpu_fn)
    def routed(ctx: LowerContext, *args: Any) -> list[Kernel]:
        return variants.get(ctx.target.kind, variants["cpu"])[0](ctx, *args)

    def routed_space(
        attrs: Attrs, types: list[TensorType], target: LoweringTarget
    ) -> ConfigSpace | None:
        chosen = variants.get(target.kind, variants["cpu"])[1]
        return chosen(attrs, types, target) if chosen is not None else None

    has_space = any(s is not None for _, s in variants.values())
    OPS[name] = dataclasses.replace(opdef, template=routed,
                                    space=routed_space if has_space else None)  # fmt: skip


def _attach(name: str, **fields: Any) -> None:
    opdef = OPS[name]
    if opdef.compute is not None or opdef.template is not None:
        raise AssertionError(f"op {name} already has a lowering")
    OPS[name] = dataclasses.replace(opdef, **fields)


# ---- the generic schedule for computes -----------------------------------------------------------
PARALLEL_MIN_ELEMENTS = 1 << 15  # below this a fork/join costs more than it saves


def schedule_injective(
    ctx: LowerContext, name: str, outputs: Sequence[tuple[Buffer, int, Accessor]]
) -> Kernel:
    """One kernel storing each `accessor` into its buffer over the (shared) output index space.

    `outputs` holds (buffer, rank, accessor); all have the same shape. The outer dimensions are
    flattened into one loop (parallel when large), the innermost is vectorized with a tail. On a
    GPU every element is one thread (`grid_loop`).
    """
    buffer, rank, _ = outputs[0]
    shape = buffer.shape if rank else ()
    total = math.prod(shape)
    inner = shape[-1] if shape else 1
    outer = total // inner
    lanes = ctx.target.lanes(buffer.dtype)

    def body_at(outer_var: Expr, inner_index: Expr) -> Stmt:
        idx: list[Expr] = []
        rest = outer_var
        dims = shape[:-1]
        for k, d in enumerate(reversed(dims)):
            outermost = k == len(dims) - 1  # o < prod(dims): no wrap-around needed
            idx.append(IntImm(0, "int32") if d == 1 else rest if outermost else rest % d)
            rest = rest // d
        full = tuple(reversed(idx)) + ((inner_index,) if shape else ())
        store_idx = full if shape else (IntImm(0, "int32"),)
        return seq(*(buf.store(store_idx, acc(full)) for buf, _, acc in outputs))

    def inner_loops(o: Expr) -> Stmt:
        if inner < 2 * lanes:
            return loop("i", inner, lambda i: body_at(o, i)) if shape else body_at(o, const(0))
        full = inner // lanes
        main = loop("io", full, lambda io: loop(
            "ii", lanes, lambda ii: body_at(o, io * lanes + ii), kind="vectorized"))  # fmt: skip
        tail = inner - full * lanes
        rest = loop("it", tail, lambda it: body_at(o, full * lanes + it)) if tail else None
        return seq(main, rest)

    if ctx.target.kind == "cuda":  # one thread per element; consecutive threads, adjacent ones
        at = (lambda f: body_at(f // inner, f % inner)) if shape else (lambda f: body_at(f, f))
        return make_kernel(ctx.name(name), grid_loop(total, at))
    kind = "parallel" if total >= PARALLEL_MIN_ELEMENTS and outer > 1 else "serial"
    body = loop("o", outer, inner_loops, kind=kind) if outer > 1 else inner_loops(const(0))
    return make_kernel(ctx.name(name), body)


def make_kernel(name: str, body: Stmt) -> Kernel:
    """A kernel whose params are every global buffer `body` touches, in first-use order."""
    params = tuple(b for b in free_buffers(body) if b.scope == "global")
    return Kernel(name, params, body)
