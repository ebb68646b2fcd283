"""Kernel IR expressions -> llvmlite values: arithmetic, casts, memory access, intrinsics.

Shared by the CPU and NVPTX generators. Vectors are explicit `<N x T>` values; a scalar
operand meeting a vector is splatted. A load or store whose flattened index is a unit-stride
ramp becomes one vector load/store; a load of a small constant stride (`span_loads`) one load of
the span its lanes cover and a shuffle; a load at per-lane computed offsets `gather` (one
`llvm.masked.gather` on CPUs); other vector accesses go lane by lane.
"""

from __future__ import annotations

import math

from llvmlite import ir

from tvmc.codegen.llvm_util import (
    I64,
    declare,
    element,
    intrinsic,
    ir_type,
    lanes_of,
    mem_type,
    splat,
)
from tvmc.codegen.mathfuncs import POLY_FUNCTIONS, WIDE_FUNCTIONS, math_function, wide_math_function
from tvmc.kernel import (
    MAX_SPAN_STRIDE,
    Add,
    And,
    BinaryOp,
    BitAnd,
    BitNot,
    BitOr,
    BitwiseOp,
    BitXor,
    Broadcast,
    Buffer,
    Call,
    Cast,
    CmpOp,
    Div,
    Expr,
    FloatImm,
    FloorDiv,
    IntImm,
    Load,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    Ramp,
    Reinterpret,
    Select,
    ShiftLeft,
    ShiftRight,
    Shuffle,
    Sub,
    Var,
    is_float,
)
from tvmc.kernel.transform import known_multiple
from tvmc.kernel.visitor import EXPAND_LIMIT, Visitor, post_order

_CMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}
_LLVM_UNARY = {"sqrt": "sqrt", "fabs": "fabs", "floor": "floor", "ceil": "ceil"}
_LLVM_UNARY["round_even"] = "roundeven"
_LIBM_F64 = {"tanh": "tanh", "erf": "erf"}


def _signed(dtype: str) -> bool:
    return dtype.startswith("int")


def affine_lanes(e: Expr) -> tuple[Expr, int] | None:
    """(scalar base, constant lane stride) when `e` is base + lane * stride, else None."""
    return _Affine().visit(e)


class _Affine(Visitor):
    """affine_lanes' rules per node kind; each distinct node decomposed once."""

    def __init__(self) -> None:
        self.memo: dict[int, tuple[Expr, tuple[Expr, int] | None]] = {}

    def visit(self, e: Expr) -> tuple[Expr, int] | None:  # type: ignore[override]
        """`e` as (base, stride), or None."""
        if e.lanes == 1:
            return e, 0
        hit = self.memo.get(id(e))
        if hit is None:
            hit = self.memo[id(e)] = (e, super().visit(e))
        return hit[1]

    def visit_Ramp(self, e: Ramp) -> tuple[Expr, int] | None:
        return (e.base, e.stride.value) if isinstance(e.stride, IntImm) else None

    def visit_Broadcast(self, e: Broadcast) -> tuple[Expr, int] | None:
        return e.value, 0

    def visit_Add(self, e: Add | Sub) -> tuple[Expr, int] | None:
        a, b = self.visit(e.a), self.visit(e.b)
        if a is None or b is None:
            return None
        if isinstance(e, Add):
            return Add(a[0], b[0]), a[1] + b[1]
        return Sub(a[0], b[0]), a[1] - b[1]

    visit_Sub = visit_Add

    def visit_Mul(self, e: Mul) -> tuple[Expr, int] | None:
        for x, y in ((e.a, e.b), (e.b, e.a)):
            c = y.value if isinstance(y, Broadcast) else y
            if isinstance(c, IntImm):
                inner = self.visit(x)
                return None if inner is None else (Mul(inner[0], c), inner[1] * c.value)
        return None

    def generic_visit(self, e: Expr) -> tuple[Expr, int] | None:
        return None


_TREE: dict[int, tuple[Expr, ir.Value]] = {}  # ExprLowering.memo's mode: lowering a tree


class ExprLowering(Visitor):
    """Expression half of a function lowering; `b`, `vars`, `bufs` are set by the subclass.

    A statement's expression is lowered as a tree, a shared subexpression once per use (LLVM's
    CSE merges the copies). One whose tree would exceed EXPAND_LIMIT nodes is lowered as the DAG
    it is: each distinct node once, its value reused. That is sound because an expression lowers
    to straight-line code in one basic block, so a value dominates every later use in it.
    """

    span_loads = False  # targets whose wide loads of any length are cheap set it (CPUs)

    module: ir.Module
    b: ir.IRBuilder
    vars: dict[Var, ir.Value]
    bufs: dict[Buffer, ir.Value]
    multiples: dict[Var, int]  # what each index variable in scope is known a multiple of
    memo: dict[int, tuple[Expr, ir.Value]] | None = None  # None: outside any expression

    # ---- helpers ---------------------------------------------------------------------------------
    def widen(self, value: ir.Value, lanes: int) -> ir.Value:
        """`value` splatted to `lanes` when it is a scalar."""
        if lanes == 1 or lanes_of(value.type) == lanes:
            return value
        vt = ir.VectorType(value.type, lanes)
        if isinstance(value, ir.Constant):
            return ir.Constant(vt, [value] * lanes)
        one = self.b.insert_element(ir.Constant(vt, ir.Undefined), value, ir.Constant(I64, 0))
        zeros = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
        return self.b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), zeros)

    def iota(self, t: ir.Type, lanes: int, stride: int = 1) -> ir.Constant:
        return ir.Constant(ir.VectorType(t, lanes), [k * stride for k in range(lanes)])

    def int_op(self, op: str, a: ir.Value, b: ir.Value, signed: bool = True) -> ir.Value:
        value = getattr(self.b, op)(a, b)
        if signed:
            value.flags.append("nsw")  # C semantics for index math: lets LLVM widen and hoist
        return value

    # ---- expressions -----------------------------------------------------------------------------
    def expr(self, e: Expr) -> ir.Value:
        """The LLVM value of `e`."""
        memo = self.memo
        if memo is None:  # a statement's expression: a tree, unless too big to be one
            self.memo = {} if e.tree_nodes > EXPAND_LIMIT else _TREE
            try:
                return self.expr(e)
            finally:
                self.memo = None
        if memo is _TREE:  # the method table, not visit(): one frame less per level
            return self.methods[type(e)](self, e)  # type: ignore[no-any-return]
        if id(e) not in memo:  # children first, so each node's operands are lowered already
            for n in post_order(e, skip=lambda n: id(n) in memo):
                memo[id(n)] = (n, self.visit(n))  # the node kept alive, so its id stays its own
        return memo[id(e)][1]

    def visit_Var(self, e: Var) -> ir.Value:
        return self.vars[e]

    def visit_IntImm(self, e: IntImm | FloatImm) -> ir.Value:
        return ir.Constant(ir_type(e.dtype), e.value)

    visit_FloatImm = visit_IntImm

    def visit_Not(self, e: Not | BitNot) -> ir.Value:
        return self.b.not_(self.expr(e.a))

    visit_BitNot = visit_Not

    def visit_Select(self, e: Select) -> ir.Value:
        c, t, f = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
        return self.b.select(c, self.widen(t, e.lanes), self.widen(f, e.lanes))

    def visit_Cast(self, e: Cast) -> ir.Value:
        return self.cast(self.expr(e.value), e.value.dtype, e.dtype)

    def visit_Reinterpret(self, e: Reinterpret) -> ir.Value:
        value = self.expr(e.value)
        t = ir_type(e.dtype, lanes_of(value.type))
        return value if value.type == t else self.b.bitcast(value, t)

    def visit_Ramp(self, e: Ramp) -> ir.Value:
        if e.lanes == 1:  # a scalar, as every other one-lane value here
            return self.expr(e.base)
        base = self.widen(self.expr(e.base), e.lanes)
        step = self.int_op(
            "mul",
            self.widen(self.expr(e.stride), e.lanes),
            self.iota(ir_type(e.dtype), e.lanes),
        )
        return self.int_op("add", base, step, _signed(e.dtype))

    def visit_Broadcast(self, e: Broadcast) -> ir.Value:
        return self.widen(self.expr(e.value), e.lanes)

    def visit_Shuffle(self, e: Shuffle) -> ir.Value:
        """The vectors joined pairwise (shufflevector takes two), then one pick of lanes; LLVM
        folds the joins into the shuffles the target has."""
        values = [self.expr(v) for v in e.vectors]
        i32 = ir.IntType(32)
        if e.vectors[0].lanes == 1:  # scalars: inserted lane by lane
            out: ir.Value = ir.Constant(ir.VectorType(values[0].type, e.lanes), ir.Undefined)
            for lane, pick in enumerate(e.picks):
                out = self.b.insert_element(out, values[pick], ir.Constant(I64, lane))
            return out
        while len(values) > 1:
            if len(values) % 2:
                values.append(ir.Constant(values[0].type, ir.Undefined))
            width = 2 * lanes_of(values[0].type)
            both = ir.Constant(ir.VectorType(i32, width), list(range(width)))
            values = [self.b.shuffle_vector(values[k], values[k + 1], both)
                      for k in range(0, len(values), 2)]  # fmt: skip
        if e.lanes == 1:  # one lane is a scalar, as everywhere else in the lowering
            return self.b.extract_element(values[0], ir.Constant(I64, e.picks[0]))
        picks = ir.Constant(ir.VectorType(i32, e.lanes), list(e.picks))
        return self.b.shuffle_vector(values[0], ir.Constant(values[0].type, ir.Undefined), picks)

    def generic_visit(self, node: object) -> ir.Value:
        kind = "expression" if isinstance(node, Expr) else "statement"
        raise TypeError(f"cannot lower {kind} {type(node).__name__}")

    def binary(self, e: BinaryOp) -> ir.Value:
        """Arithmetic, min/max and logic on two operands."""
        a = self.widen(self.expr(e.a), e.lanes)
        b = self.widen(self.expr(e.b), e.lanes)
        dt, fp, signed = e.dtype, is_float(e.dtype), _signed(e.dtype)
        if isinstance(e, (Min, Max)):
            op = "<" if isinstance(e, Min) else ">"
            cmp = self.b.fcmp_ordered(op, a, b) if fp else self._icmp(op, a, b, signed)
            return self.b.select(cmp, a, b)
        if isinstance(e, And):
            return self.b.and_(a, b)
        if isinstance(e, Or):
            return self.b.or_(a, b)
        if isinstance(e, (Add, Sub, Mul)):
            name = {Add: "add", Sub: "sub", Mul: "mul"}[type(e)]
            return getattr(self.b, "f" + name)(a, b) if fp else self.int_op(name, a, b, signed)
        if isinstance(e, Div):
            if fp:
                return self.b.fdiv(a, b)
            return self.b.sdiv(a, b) if signed else self.b.udiv(a, b)
        if isinstance(e, (FloorDiv, Mod)):
            return self.floor_div_mod(e, a, b, dt)
        if isinstance(e, BitwiseOp):
            return self.bitwise(e, a, b, signed)
        raise TypeError(f"cannot lower {type(e).__name__}")

    def bitwise(self, e: BitwiseOp, a: ir.Value, b: ir.Value, signed: bool) -> ir.Value:
        """&, |, ^ and shifts; a shift amount outside [0, bits) shifts every bit out."""
        if not isinstance(e, (ShiftLeft, ShiftRight)):
            return {BitAnd: self.b.and_, BitOr: self.b.or_, BitXor: self.b.xor}[type(e)](a, b)
        bits = t_width(a.type)
        inside = self.b.icmp_unsigned("<", b, splat(b.type, bits))  # negative amounts too
        amount = self.b.and_(b, splat(b.type, bits - 1))  # in range, so never poison
        if isinstance(e, ShiftLeft):
            return self.b.select(inside, self.b.shl(a, amount), splat(a.type, 0))
        if not signed:
            return self.b.select(inside, self.b.lshr(a, amount), splat(a.type, 0))
        fill = self.b.ashr(a, splat(a.type, bits - 1))
        return self.b.select(inside, self.b.ashr(a, amount), fill)

    def floor_div_mod(self, e: BinaryOp, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        """Python's // and % (rounding towards minus infinity) from LLVM's truncating ops."""
        if is_float(dtype):
            if isinstance(e, FloorDiv):
                return self.b.call(intrinsic(self.module, "floor", a.type, 1), [self.b.fdiv(a, b)])
            r = self.b.frem(a, b)
            zero = splat(a.type, 0.0)
            diff = self.b.xor(self.b.fcmp_ordered("<", r, zero), self.b.fcmp_ordered("<", b, zero))
            fix = self.b.and_(self.b.fcmp_ordered("!=", r, zero), diff)
            return self.b.fadd(r, self.b.select(fix, b, zero))
        if not _signed(dtype):
            return self.b.udiv(a, b) if isinstance(e, FloorDiv) else self.b.urem(a, b)
        zero = splat(a.type, 0)
        r = self.b.srem(a, b)
        wrong_sign = self.b.icmp_signed("<", self.b.xor(r, b), zero)
        fix = self.b.and_(self.b.icmp_signed("!=", r, zero), wrong_sign)
        if isinstance(e, FloorDiv):
            return self.b.sub(self.b.sdiv(a, b), self.b.zext(fix, a.type))
        return self.b.add(r, self.b.select(fix, b, zero))

    # Aliases, not wrappers: a frame less per level of a deep expression (so a subclass that
    # overrides binary, compare, load or call aliases its own too).
    visit_BinaryOp = binary

    def _icmp(self, op: str, a: ir.Value, b: ir.Value, signed: bool) -> ir.Value:
        return self.b.icmp_signed(op, a, b) if signed else self.b.icmp_unsigned(op, a, b)

    def compare(self, e: CmpOp) -> ir.Value:
        """A comparison, giving i1 (or a vector of i1)."""
        a = self.widen(self.expr(e.a), e.lanes)
        b = self.widen(self.expr(e.b), e.lanes)
        op = _CMP[e.symbol]
        if is_float(e.a.dtype):
            # != is unordered (true for NaN) like numpy and C; the rest are ordered.
            fn = self.b.fcmp_unordered if op == "!=" else self.b.fcmp_ordered
            return fn(op, a, b)
        return self._icmp(op, a, b, _signed(e.a.dtype))

    visit_CmpOp = compare

    def cast(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """`v` of dtype `src` converted to `dst` (lanes preserved)."""
        if src == dst:
            return v
        lanes = lanes_of(v.type)
        t = ir_type(dst, lanes)
        if dst == "bool":
            if is_float(src):
                return self.b.fcmp_unordered("!=", v, splat(v.type, 0.0))
            return self.b.icmp_unsigned("!=", v, splat(v.type, 0))
        if is_float(src) and is_float(dst):
            return self.b.fpext(v, t) if _fbits(dst) > _fbits(src) else self.b.fptrunc(v, t)
        if is_float(dst):
            return self.b.sitofp(v, t) if _signed(src) else self.b.uitofp(v, t)
        if is_float(src):
            return self.b.fptosi(v, t) if _signed(dst) else self.b.fptoui(v, t)
        sw, dw = t_width(v.type), t_width(t)
        if dw < sw:
            return self.b.trunc(v, t)
        if dw == sw:
            return v
        return self.b.sext(v, t) if _signed(src) else self.b.zext(v, t)

    # ---- memory ----------------------------------------------------------------------------------
    def flat_offset(self, buf: Buffer, indices: tuple[Expr, ...]) -> ir.Value:
        """Row-major element offset (i64, possibly a vector) of `indices` into `buf`."""
        lanes = max(i.lanes for i in indices)
        total: ir.Value | None = None
        for idx, stride in zip(indices, buf.strides):
            v = self.cast(self.expr(idx), idx.dtype, "int64")
            v = self.widen(v, lanes)
            if stride != 1:
                v = self.int_op("mul", v, splat(v.type, stride))
            total = v if total is None else self.int_op("add", total, v)
        return total if total is not None else ir.Constant(I64, 0)

    def address(
        self, buf: Buffer, indices: tuple[Expr, ...], load: bool = False
    ) -> tuple[str, ir.Value, int, int]:
        """(kind, offset, lanes, align): kind is scalar, contiguous, uniform, strideN (a constant
        lane stride N), gather (any other: offset is a vector of lane offsets) or, for a load,
        spanN (stride N = 2..MAX_SPAN_STRIDE, `span_loads`); align is the bytes a contiguous
        access is known to be aligned to (else the element size)."""
        lanes = max((i.lanes for i in indices), default=1)
        if lanes == 1:
            return "scalar", self.flat_offset(buf, indices), 1, buf.itemsize
        parts = [affine_lanes(i) for i in indices]
        if any(p is None for p in parts):
            return "gather", self.flat_offset(buf, indices), lanes, buf.itemsize
        bases = tuple(p[0] for p in parts)  # type: ignore[index]
        base = self.flat_offset(buf, bases)
        step = sum(p[1] * s for p, s in zip(parts, buf.strides))  # type: ignore[index]
        if step == 1:
            return "contiguous", base, lanes, self.vector_align(buf, bases, lanes)
        if step == 0:
            return "uniform", base, lanes, buf.itemsize
        if load and self.span_loads and 1 < step <= MAX_SPAN_STRIDE:
            return f"span{step}", base, lanes, buf.itemsize
        return f"stride{step}", base, lanes, buf.itemsize

    def vector_align(self, buf: Buffer, bases: tuple[Expr, ...], lanes: int) -> int:
        """Alignment in bytes of `lanes` elements from `bases`: the element size, unless the
        target knows where its buffers start and the index is provably a multiple of lanes."""
        start = self.buffer_align(buf)
        if start <= buf.itemsize:
            return buf.itemsize
        multiple = 0
        for b, stride in zip(bases, buf.strides):
            multiple = math.gcd(multiple, known_multiple(b, self.multiples) * stride)
        elems = lanes if multiple == 0 else math.gcd(multiple, lanes)
        return min(start, buf.itemsize * (elems & -elems))  # the power-of-two part

    def buffer_align(self, buf: Buffer) -> int:
        """Bytes every buffer's first element is aligned to (targets override)."""
        return buf.itemsize

    def element_ptr(self, buf: Buffer, offset: ir.Value) -> ir.Value:
        return self.b.gep(self.bufs[buf], [offset], inbounds=True, source_etype=mem_type(buf.dtype))

    def load(self, e: Load) -> ir.Value:
        """A scalar, vector, broadcast or gathered load."""
        buf = e.buffer
        kind, off, lanes, align = self.address(buf, e.indices, load=True)
        if kind == "contiguous":
            v = self.b.load(self.element_ptr(buf, off), typ=mem_type(buf.dtype, lanes), align=align)
        elif kind.startswith("span"):
            # the span between the first and last lane, both read, so inside the buffer
            step = int(kind[4:])
            span = mem_type(buf.dtype, (lanes - 1) * step + 1)
            wide = self.b.load(self.element_ptr(buf, off), typ=span, align=align)
            picks = ir.Constant(
                ir.VectorType(ir.IntType(32), lanes), list(range(0, span.count, step))
            )
            v = self.b.shuffle_vector(wide, ir.Constant(span, ir.Undefined), picks)
        elif kind in ("scalar", "uniform"):
            v = self.b.load(self.element_ptr(buf, off), typ=mem_type(buf.dtype), align=align)
            v = self.widen(v, lanes)
        elif kind == "gather":
            v = self.gather(buf, off, lanes, align)
        else:  # constant strides: each lane's address folds into its load
            v = self.load_lanes(buf, self.lane_offsets(kind, off, lanes), lanes, align)
        if buf.dtype == "bool":
            v = self.b.icmp_unsigned("!=", v, splat(v.type, 0))
        return v

    visit_Load = load

    def gather(self, buf: Buffer, offsets: ir.Value, lanes: int, align: int) -> ir.Value:
        """The elements at a vector of computed offsets (targets override)."""
        return self.load_lanes(buf, self.lane_offsets("gather", offsets, lanes), lanes, align)

    def lane_offsets(self, kind: str, off: ir.Value, lanes: int) -> list[ir.Value]:
        """Each lane's offset of a strideN access (scalar adds to its base: an x86 load or store
        then takes base + constant as its address, where lanes taken out of a vector of offsets
        cost the AVX-512 channels tiles' transposing store ~2 shuffles a lane) or a gather."""
        if kind == "gather":
            return [self.b.extract_element(off, ir.Constant(I64, k)) for k in range(lanes)]
        step = int(kind[len("stride") :])
        return [off if k == 0 else self.b.add(off, ir.Constant(off.type, k * step))
                for k in range(lanes)]  # fmt: skip

    def load_lanes(
        self, buf: Buffer, offsets: list[ir.Value], lanes: int, align: int
    ) -> ir.Value:  # fmt: skip
        """The elements at `offsets`, one a lane, loaded lane by lane."""
        v = ir.Constant(mem_type(buf.dtype, lanes), ir.Undefined)
        for k, o in enumerate(offsets):
            x = self.b.load(self.element_ptr(buf, o), typ=mem_type(buf.dtype), align=align)
            v = self.b.insert_element(v, x, ir.Constant(I64, k))
        return v

    def store(self, buf: Buffer, indices: tuple[Expr, ...], value: Expr) -> None:
        """A scalar, vector or scattered store of `value`."""
        kind, off, lanes, align = self.address(buf, indices)
        lanes = max(lanes, value.lanes)
        v = self.widen(self.expr(value), lanes)
        if buf.dtype == "bool":
            v = self.b.zext(v, mem_type("bool", lanes))
        if kind == "contiguous":
            self.b.store(v, self.element_ptr(buf, off), align=align)
        elif kind == "scalar":
            self.b.store(v, self.element_ptr(buf, off), align=align)
        elif kind == "uniform":  # every lane hits one element: the last lane wins, as serially
            last = self.b.extract_element(v, ir.Constant(I64, lanes - 1))
            self.b.store(last, self.element_ptr(buf, off), align=align)
        else:  # lane order, so overlapping lanes behave like a serial loop
            for k, o in enumerate(self.lane_offsets(kind, off, lanes)):
                x = self.b.extract_element(v, ir.Constant(I64, k))
                self.b.store(x, self.element_ptr(buf, o), align=align)

    # ---- intrinsics ------------------------------------------------------------------------------
    def call(self, e: Call) -> ir.Value:
        """An intrinsic call (float16 computes in float32)."""
        args = [self.widen(self.expr(a), e.lanes if e.lanes > 1 else a.lanes) for a in e.args]
        t = args[0].type
        if e.name.startswith("reduce_"):
            return self.reduce(e.name[7:], args[0], e.dtype)
        if e.dtype == "float16":  # compute in float32, round once
            f32 = ir_type("float32", lanes_of(t))
            wide = [self.b.fpext(a, f32) for a in args]
            return self.b.fptrunc(self.float_call(e.name, wide, f32), t)
        return self.float_call(e.name, args, t)

    visit_Call = call

    def float_call(self, name: str, args: list[ir.Value], t: ir.Type) -> ir.Value:
        """A float intrinsic on values of type `t` (float32 or float64, scalar or vector)."""
        f32 = str(element(t)) == "float"
        if name in WIDE_FUNCTIONS:
            return self.b.call(wide_math_function(self.module, name, t), args)
        if name in POLY_FUNCTIONS and f32:
            return self.b.call(math_function(self.module, name, t), args)
        if name in _LLVM_UNARY:
            return self.b.call(intrinsic(self.module, _LLVM_UNARY[name], t, 1), args)
        if name == "fma":
            return self.b.call(intrinsic(self.module, "fma", t, 3), args)
        if name == "pow":
            return self.pow(args[0], args[1], t)
        if name in ("exp", "log"):
            return self.b.call(intrinsic(self.module, name, t, 1), args)
        if name == "sigmoid":
            ex = self.b.call(intrinsic(self.module, "exp", t, 1), [self.b.fneg(args[0])])
            return self.b.fdiv(splat(t, 1.0), self.b.fadd(splat(t, 1.0), ex))
        if name in _LIBM_F64:
            return self.per_lane(
                lambda x: self.b.call(declare(self.module, _LIBM_F64[name], x.type, [x.type]), [x]),
                args[0],
            )
        raise TypeError(f"cannot lower intrinsic {name} for {t}")

    def pow(self, x: ir.Value, y: ir.Value, t: ir.Type) -> ir.Value:
        """x**y (llvm.pow, i.e. libm's powf/pow on CPUs)."""
        return self.b.call(intrinsic(self.module, "pow", t, 2), [x, y])

    def per_lane(self, fn, v: ir.Value) -> ir.Value:  # type: ignore[no-untyped-def]
        lanes = lanes_of(v.type)
        if lanes == 1:
            return fn(v)
        out = ir.Constant(v.type, ir.Undefined)
        for k in range(lanes):
            x = fn(self.b.extract_element(v, ir.Constant(I64, k)))
            out = self.b.insert_element(out, x, ir.Constant(I64, k))
        return out

    def reduce(self, kind: str, v: ir.Value, dtype: str) -> ir.Value:
        """Horizontal add/max/min by halving shuffles (a tree, so log2(lanes) steps)."""
        fp, signed = is_float(dtype), _signed(dtype)

        def combine(a: ir.Value, b: ir.Value) -> ir.Value:
            if kind == "add":
                return self.b.fadd(a, b) if fp else self.b.add(a, b)
            op = ">" if kind == "max" else "<"
            cmp = self.b.fcmp_ordered(op, a, b) if fp else self._icmp(op, a, b, signed)
            return self.b.select(cmp, a, b)

        lanes = lanes_of(v.type)
        while lanes > 1 and lanes % 2 == 0:
            half = lanes // 2
            mask = ir.VectorType(ir.IntType(32), half)
            lo = self.b.shuffle_vector(v, v, ir.Constant(mask, list(range(half))))
            hi = self.b.shuffle_vector(v, v, ir.Constant(mask, list(range(half, lanes))))
            v, lanes = combine(lo, hi), half
        if lanes == 1 and isinstance(v.type, ir.VectorType):
            return self.b.extract_element(v, ir.Constant(I64, 0))
        acc = self.b.extract_element(v, ir.Constant(I64, 0)) if lanes > 1 else v
        for k in range(1, lanes):
            acc = combine(acc, self.b.extract_element(v, ir.Constant(I64, k)))
        return acc


def _fbits(dtype: str) -> int:
    return {"float16": 16, "float32": 32, "float64": 64}[dtype]


def t_width(t: ir.Type) -> int:
    """Bit width of an integer type or of a vector's integer elements."""
    return t.element.width if isinstance(t, ir.VectorType) else t.width
