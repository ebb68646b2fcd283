"""Narrow types compiled for this CPU (and to PTX): every conversion bit for bit as ml_dtypes'
astype, over every bit pattern of each narrow type and a million and a half float32s."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from tests.kernel.narrow import NARROW, WIDE, bits_of, cast_kernel, edge_samples, every_pattern
from tvmc.codegen import emit_cpu, emit_ptx, load_jit
from tvmc.dtypes import NARROW_FLOATS
from tvmc.kernel import Buffer, Kernel, loop


def compiled(pairs: list[tuple[str, str]], n: int):
    """One module converting `n` elements for each (src, dst) pair: a runner taking (x, dst)."""
    kernels = {pair: cast_kernel(*pair, n) for pair in pairs}
    module = load_jit(emit_cpu(list(kernels.values())))

    def run(x: np.ndarray, dst: str) -> np.ndarray:
        y = np.zeros(n, dst)
        module.run(kernels[x.dtype.name, dst].name, x, y)
        return y

    return run


def expected(x: np.ndarray, dst: str) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return x.astype(dst)


def check(run, x: np.ndarray, dst: str) -> None:
    got, want = run(x, dst), expected(x, dst)
    bad = bits_of(got) != bits_of(want)
    assert not bad.any(), (
        f"{x.dtype.name} -> {dst}: {int(bad.sum())} differ, e.g. input bits "
        f"{bits_of(x[bad][:4]).tolist()} give {bits_of(got[bad][:4]).tolist()}, "
        f"want {bits_of(want[bad][:4]).tolist()}"
    )


@pytest.mark.parametrize("src", NARROW)
def test_every_pattern_converts_to_every_type(src):
    x = every_pattern(src, 256)
    targets = [d for d in (*WIDE, *NARROW) if d != src]
    run = compiled([(src, d) for d in targets], x.size)
    for dst in targets:
        check(run, x, dst)


@functools.cache
def float32_sample() -> np.ndarray:
    """Every float32 whose low 13 bits are 0, 1 or random: all exponents, signs and the
    mantissa bits that decide any narrow float's rounding, ties included (1.5 million)."""
    top = np.arange(1 << 19, dtype=np.uint32) << 13
    noise = np.random.default_rng(0).integers(0, 1 << 13, top.size).astype(np.uint32)
    return np.concatenate([top, top | 1, top | noise]).view(np.float32)


def test_float32_sample_encodes_exactly():
    x = float32_sample()
    run = compiled([("float32", d) for d in NARROW], x.size)
    for dst in NARROW:
        check(run, x, dst)


def test_every_float16_and_float64_edges_encode_exactly():
    f16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    with np.errstate(invalid="ignore"):  # signalling NaNs among the samples
        f64 = np.concatenate([edge_samples(d).astype(np.float64) for d in NARROW_FLOATS])
    f64 = np.concatenate([f64, np.nextafter(f64, np.inf), np.nextafter(f64, -np.inf)])
    f64 = np.resize(f64, -(-f64.size // 16) * 16)
    for x in (f16, f64):
        run = compiled([(x.dtype.name, d) for d in NARROW], x.size)
        for dst in NARROW:
            check(run, x, dst)


def test_integers_encode_exactly():
    for src in ("int8", "int32", "int64", "uint64"):
        big = [2**24 + 2**16 + 1, 2**30 + 3, 2**53 + 1, 2**62 + 2**53 + 2**52 + 1]
        values = np.arange(-4096, 4096).tolist() + (big * 4 if src != "int8" else [])
        x = np.array(values).astype(src)
        run = compiled([(src, d) for d in NARROW], x.size)
        for dst in NARROW:
            check(run, x, dst)


def test_ptx_moves_narrow_types_as_integers():
    def thread_cast(src: str, dst: str) -> Kernel:
        x, y = Buffer("x", (64,), src), Buffer("y", (64,), dst)
        body = loop("t", 64, lambda t: y.store(t, x[t].astype(dst)), kind="threadIdx.x")
        return Kernel("encode" if src == "float32" else "decode", (x, y), body)

    ptx = emit_ptx([thread_cast("float32", "bfloat16"), thread_cast("float8_e4m3fn", "float32")])
    assert "st.global.b16" in ptx.ptx and "ld.global.nc.b8" in ptx.ptx  # the stored bits
    assert "bf16" not in ptx.ptx and "e4m3" not in ptx.ptx  # no sm_89+ conversion instructions
