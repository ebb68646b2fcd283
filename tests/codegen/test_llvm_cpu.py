"""CPU code generation: every example kernel, both load paths, against the interpreter and numpy."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.kernel.examples import CPU_EXAMPLES, TOLERANCE
from tvmc.codegen import (
    CodegenOptions,
    CPUModule,
    KernelSignature,
    emit_cpu,
    load_jit,
    load_object,
    load_shared,
)
from tvmc.codegen.lower_stmt import heap_bytes, heap_peak
from tvmc.kernel import (
    MAX_SPAN_STRIDE,
    Buffer,
    Kernel,
    KernelIRError,
    Shuffle,
    Stmt,
    allocate,
    if_then_else,
    interleave,
    interpret,
    loop,
    ramp,
    seq,
)

# The compiled code uses polynomial exp/tanh/erf (< 4e-7 relative, see test_mathfuncs) and
# reorders vector sums, so it meets the interpreter's tolerances against the float64 references
# and against the interpreter itself (float16 differs by at most an ulp, ~1e-3).


@functools.cache
def _compiled(name: str):
    ex = CPU_EXAMPLES[name]()
    return ex, emit_cpu([ex.kernel])


@pytest.mark.parametrize("loader", [load_shared, load_jit], ids=["shared", "jit"])
@pytest.mark.parametrize("name", sorted(CPU_EXAMPLES))
def test_example_matches_interpreter_and_numpy(name, loader):
    ex, artifact = _compiled(name)
    compiled = ex.inputs(np.random.default_rng(1))
    interpreted = [a.copy() for a in compiled]
    loader(artifact).run(ex.kernel.name, *compiled)
    interpret(ex.kernel, *interpreted)
    outputs = slice(len(compiled) - ex.n_outputs, None)
    for got, oracle, want in zip(
        compiled[outputs], interpreted[outputs], ex.reference(*interpreted)
    ):
        rtol, atol = TOLERANCE.get(got.dtype.name, (0, 0))
        np.testing.assert_allclose(got, oracle, rtol=rtol, atol=atol)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_vectorized_loop_becomes_vector_ir():
    _, artifact = _compiled("add_vectorized")
    assert "<16 x float>" in artifact.unoptimized_ir  # explicit, not left to the vectorizer
    _, mm = _compiled("matmul_tiled")
    assert "llvm.fma.v16f32" in mm.unoptimized_ir
    assert "vfmadd" in mm.assembly


def test_polynomial_math_needs_no_libm():
    _, artifact = _compiled("fused_chain")
    assert "tvmc.exp.v16f32" in artifact.unoptimized_ir
    for symbol in ("@expf", "@tanhf", "@erff"):
        assert symbol not in artifact.llvm_ir


def test_noalias_and_alignment_flags():
    a, c = Buffer("A", (64,)), Buffer("C", (64,))
    body = loop("i", 64, lambda i: c.store(i, a[i]))
    plain = emit_cpu([Kernel("copy", (a, c), body)]).unoptimized_ir
    assert 'ptr noalias %"A"' in plain and "align 64" not in plain.split("define")[1].split("\n")[0]
    aliased = emit_cpu([Kernel("copy", (a, c), body, {"noalias": False})]).unoptimized_ir
    assert "noalias" not in aliased.split("define")[1].split("\n")[0]
    aligned = emit_cpu([Kernel("copy", (a, c), body)], options=CodegenOptions(aligned_params=True))
    assert "align 64" in aligned.unoptimized_ir.split("define")[1].split("\n")[0]


def test_large_scratch_goes_to_the_heap_and_still_works():
    x, y = Buffer("X", (64,)), Buffer("Y", (64,))
    k = Kernel(
        "heap",
        (x, y),
        allocate(
            "big",
            (64, 64),
            lambda big: seq(
                loop("i", 64, lambda i: big.store((i, 63), x[i] * 2.0)),
                loop("i", 64, lambda i: y.store(i, big[i, 63])),
            ),
        ),
    )
    artifact = emit_cpu([k], options=CodegenOptions(stack_limit=1024))
    assert "aligned_alloc" in artifact.llvm_ir and "@free" in artifact.llvm_ir
    xv, yv = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    load_jit(artifact).run("heap", xv, yv)
    np.testing.assert_array_equal(yv, xv * 2)


def test_heap_peak_is_the_scratch_the_heap_holds_at_once():
    x = Buffer("X", (64,))
    big = 100_000  # floats: 400,000 bytes, over the stack limit
    one = big * 4

    def scratch(n: int = big, inner=None) -> Stmt:
        return allocate("s", (n,), lambda b: inner or x.store(0, b[0]))

    assert heap_peak(scratch(), 4) == one and heap_peak(scratch(1000), 4) == 0  # the stack's
    spread = loop("i", 3, lambda i: scratch(), kind="parallel")
    assert heap_peak(spread, 2) == 2 * one and heap_peak(spread, 8) == 3 * one  # 3 iterations
    inner = loop("j", 8, lambda j: scratch(), kind="parallel")
    assert heap_peak(loop("i", 8, lambda i: inner, kind="parallel"), 4) == 4 * one  # serial
    assert heap_peak(seq(scratch(), scratch(2 * big)), 1) == 2 * one  # one after the other
    assert heap_peak(scratch(inner=scratch()), 1) == 2 * one  # a scope inside another
    assert heap_bytes(Buffer("odd", (big + 1,))) == one + 64  # aligned_alloc's whole lines
    code = emit_cpu([Kernel("spread", (x,), spread)]).unoptimized_ir  # asks for what it counts
    assert f'call ptr @"aligned_alloc"(i64 64, i64 {one})' in code


def _heap_kernel(elements: int) -> Kernel:
    """y = 2x through heap scratch of `elements` floats (1 << 60: more than any address space)."""
    x, y = Buffer("X", (64,)), Buffer("Y", (64,))
    body = allocate("big", (elements,), lambda big: seq(
        loop("i", 64, lambda i: big.store(i, x[i] * 2.0)),
        loop("i", 64, lambda i: y.store(i, big[i])),
    ))  # fmt: skip
    return Kernel("heap", (x, y), body)


@pytest.mark.parametrize("load", [load_jit, load_shared])
def test_heap_scratch_that_cannot_be_had_skips_its_work_and_flags_it(load):
    module = load(emit_cpu([_heap_kernel(1 << 60)]))
    xv, yv = np.arange(64, dtype=np.float32), np.full(64, -1.0, np.float32)
    module.run("heap", xv, yv)  # aligned_alloc returns NULL: nothing is written through it
    np.testing.assert_array_equal(yv, -1.0)
    assert module.scratch_failed()
    assert not module.scratch_failed()  # asking clears the flag
    ok = load(emit_cpu([_heap_kernel(1 << 17)]))
    ok.run("heap", xv, yv)
    np.testing.assert_array_equal(yv, xv * 2)
    assert not ok.scratch_failed()


def test_several_kernels_and_extra_functions_share_one_module():
    a, c = Buffer("A", (8,)), Buffer("C", (8,))
    mod = CPUModule()
    mod.add_kernel(Kernel("double", (a, c), loop("i", 8, lambda i: c.store(i, a[i] * 2.0))))
    mod.add_kernel(Kernel("negate", (a, c), loop("i", 8, lambda i: c.store(i, -a[i]))))
    # A caller (e.g. a graph entry function) added by other code into the same module.
    from llvmlite import ir

    ptr = ir.PointerType()
    entry = ir.Function(mod.module, ir.FunctionType(ir.VoidType(), [ptr, ptr]), "entry")
    b = ir.IRBuilder(entry.append_basic_block())
    b.call(mod.module.globals["double"], entry.args)
    b.call(mod.module.globals["negate"], [entry.args[1], entry.args[1]])
    b.ret_void()
    artifact = mod.build()
    sig = KernelSignature("entry", (("A", (8,), "float32"), ("C", (8,), "float32")))
    loaded = load_object(artifact.object_code, [*artifact.kernels, sig])
    av, cv = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    loaded.run("entry", av, cv)
    np.testing.assert_array_equal(cv, -2 * av)
    assert KernelSignature.from_json(sig.to_json()) == sig


def test_duplicate_kernel_names_and_gpu_loops_are_rejected():
    a = Buffer("A", (4,))
    k = Kernel("k", (a,), loop("i", 4, lambda i: a.store(i, 0.0)))
    mod = CPUModule()
    mod.add_kernel(k)
    with pytest.raises(KernelIRError, match="two kernels named k"):
        mod.add_kernel(k)
    gpu = Kernel("g", (a,), loop("i", 4, lambda i: a.store(i, 0.0), kind="threadIdx.x"))
    with pytest.raises(KernelIRError, match="threadIdx.x, which this target lacks"):
        emit_cpu([gpu])


def test_run_checks_arrays():
    ex, artifact = _compiled("add")
    mod = load_jit(artifact)
    with pytest.raises(ValueError, match="A wants a C-contiguous float32"):
        mod.run("add", np.zeros(100), np.zeros(100, np.float32), np.zeros(100, np.float32))


def test_dump_code_kinds():
    _, artifact = _compiled("add")
    assert artifact.dump("kernel").startswith("kernel add(")
    assert "define void @add" in artifact.dump("ll")
    assert "add:" in artifact.dump("asm")
    with pytest.raises(ValueError, match="valid: kernel, ll, asm"):
        artifact.dump("ptx")


def test_vectorized_loops_that_need_scalar_code_fall_back_correctly():
    # A lane-dependent branch and a reduction into one element cannot be vector code: codegen
    # unrolls them, keeping the serial loop's meaning.
    x, y, s = Buffer("X", (16,)), Buffer("Y", (16,)), Buffer("S", (1,))

    def relu(i):
        return if_then_else(x[i] > 0.0, y.store(i, x[i]), y.store(i, 0.0))

    def total(i):
        return s.store(0, s[0] + x[i])

    body = seq(
        loop("i", 16, relu, "vectorized"), s.store(0, 0.0), loop("i", 16, total, "vectorized")
    )
    k = Kernel("fallback", (x, y, s), body)
    xv = np.linspace(-1, 1, 16, dtype=np.float32)
    yv, sv = np.zeros(16, np.float32), np.zeros(1, np.float32)
    load_jit(emit_cpu([k])).run("fallback", xv, yv, sv)
    np.testing.assert_array_equal(yv, np.maximum(xv, 0))
    np.testing.assert_allclose(sv[0], xv.sum(), atol=1e-6)


@pytest.mark.parametrize("stride", [2, 3, 4, 5])
def test_strided_vector_loads_read_their_span_once(stride):
    # Strides up to MAX_SPAN_STRIDE load the span the lanes cover and shuffle; the last lane
    # ends the buffer, so a load past the span would read outside it.
    lanes = 16
    x, y = Buffer("X", ((lanes - 1) * stride + 1,)), Buffer("Y", (lanes,))
    body = loop("i", lanes, lambda i: y.store(i, x[i * stride] * 2.0), "vectorized")
    k = Kernel("strided", (x, y), body)
    artifact = emit_cpu([k])
    span = f"<{(lanes - 1) * stride + 1} x float>"
    assert (span in artifact.unoptimized_ir) == (stride <= MAX_SPAN_STRIDE)
    xv = np.arange(x.shape[0], dtype=np.float32)
    yv = np.zeros(lanes, np.float32)
    load_jit(artifact).run("strided", xv, yv)
    np.testing.assert_array_equal(yv, xv[::stride] * 2.0)


def test_wide_strides_load_and_store_lane_by_lane_at_scalar_offsets():
    """A stride past MAX_SPAN_STRIDE (the AVX-512 channels tiles' transposing store reads its
    tile 32 floats apart) loads and stores lane by lane, each lane's offset a scalar add to the
    base (x86 folds it into the access), never taken out of a vector of offsets (LLVM had made
    base + k*32 a vector `or` and extracted every lane); the values are a serial loop's."""
    lanes, stride = 8, 32
    x, y = Buffer("X", (lanes * stride,)), Buffer("Y", (lanes * stride,))

    def add_one(j):
        return y.store(ramp(j, lanes, stride), x[ramp(j, lanes, stride)] + 1.0)

    body = loop("j", stride, add_one)
    k = Kernel("wide", (x, y), body)
    artifact = emit_cpu([k])
    assert "extractelement <8 x i64>" not in artifact.unoptimized_ir
    xv = np.arange(lanes * stride, dtype=np.float32)
    yv = np.zeros(lanes * stride, np.float32)
    load_jit(artifact).run("wide", xv, yv)
    np.testing.assert_array_equal(yv, xv + 1.0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("count,lanes", [(2, 16), (3, 8), (4, 16), (4, 1)])
def test_interleaved_vectors_store_as_one(count, lanes, dtype):
    """`interleave` of k vectors, stored contiguously, writes what k stores of stride k would
    (the Winograd output transform's tile rows); a Shuffle picking lanes back de-interleaves.
    Compiled, interpreted and numpy agree; narrow types move as bits."""
    x, y = Buffer("X", (count, lanes), dtype), Buffer("Y", (count * lanes,), dtype)
    z = Buffer("Z", (count * lanes,), dtype)
    vectors = [x[(j, ramp(0, lanes) if lanes > 1 else 0)] for j in range(count)]
    mixed = interleave(vectors)
    back = Shuffle((mixed,), tuple(k * count + j for j in range(count) for k in range(lanes)))
    body = seq(y.store(ramp(0, count * lanes), mixed), z.store(ramp(0, count * lanes), back))
    k = Kernel("interleaved", (x, y, z), body)
    xv = np.arange(count * lanes).reshape(count, lanes).astype(dtype)
    got = [np.zeros(count * lanes, dtype) for _ in range(2)]
    load_jit(emit_cpu([k])).run("interleaved", xv, *got)
    want = [xv.T.reshape(-1), xv.reshape(-1)]
    oracle = [np.zeros(count * lanes, dtype) for _ in range(2)]
    interpret(k, xv.copy(), *oracle)
    for a, b, c in zip(got, oracle, want):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)


def test_a_one_lane_shuffle_is_a_scalar():
    x, y = Buffer("X", (8,)), Buffer("Y", (1,))
    body = y.store(0, Shuffle((x[ramp(0, 8)],), (5,)) + 1.0)
    xv, yv = np.arange(8, dtype=np.float32), np.zeros(1, np.float32)
    load_jit(emit_cpu([Kernel("pick", (x, y), body)])).run("pick", xv, yv)
    assert yv[0] == 6.0


def test_loads_at_computed_offsets_are_one_gather():
    # Lane by lane, each computed offset was extracted from a vector before its load.
    x, idx, y = Buffer("X", (64,)), Buffer("I", (16,), "int32"), Buffer("Y", (16,))
    body = loop("i", 16, lambda i: y.store(i, x[idx[i]] + 1.0), "vectorized")
    k = Kernel("gathered", (x, idx, y), body)
    artifact = emit_cpu([k])
    assert "llvm.masked.gather.v16f32" in artifact.unoptimized_ir
    xv = np.arange(64, dtype=np.float32) * 0.5
    iv = np.random.default_rng(0).integers(0, 64, 16).astype(np.int32)
    yv = np.zeros(16, np.float32)
    load_jit(artifact).run("gathered", xv, iv, yv)
    np.testing.assert_array_equal(yv, xv[iv] + 1.0)


@pytest.mark.parametrize("extent", [1, 3])
def test_a_one_lane_ramp_is_its_base(extent):
    # Code written for `lanes` wide vectors meets a plane of one: ramp(i, 1) is a scalar index.
    # It was lowered as a <1 x i32> vector added to a scalar (LLVM's "operands must be the same
    # type").
    x, y = Buffer("X", (extent,)), Buffer("Y", (extent,))
    body = loop("i", extent, lambda i: y.store(ramp(i, 1), x[ramp(i, 1)] * 3.0))
    k = Kernel("one_lane", (x, y), body)
    xv = np.arange(extent, dtype=np.float32) + 1.0
    yv = np.zeros(extent, np.float32)
    load_jit(emit_cpu([k])).run("one_lane", xv, yv)
    np.testing.assert_array_equal(yv, xv * 3.0)
    yi = np.zeros(extent, np.float32)
    interpret(k, xv, yi)
    np.testing.assert_array_equal(yi, xv * 3.0)
