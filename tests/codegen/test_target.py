"""Targets: host defaults, -mcpu/-mattr, cross compilation to AArch64."""

from __future__ import annotations

import struct

import pytest

from tests.kernel.examples import add_vectorized
from tvmc.codegen import CPUTarget, emit_cpu, target_kind
from tvmc.codegen.loader import load_jit
from tvmc.errors import UsageError

EM_X86_64, EM_AARCH64 = 62, 183


def _e_machine(obj: bytes) -> int:
    assert obj[:4] == b"\x7fELF"
    return struct.unpack_from("<H", obj, 18)[0]


def test_host_target_builds_a_native_elf():
    t = CPUTarget.host()
    assert t.is_native and t.cpu
    artifact = emit_cpu([add_vectorized().kernel])
    assert _e_machine(artifact.object_code) == EM_X86_64


def test_aarch64_cross_compile_gives_an_aarch64_object():
    t = CPUTarget.parse("llvm -mtriple=aarch64-linux-gnu")
    assert (t.cpu, t.features, t.is_native) == ("generic", "", False)
    artifact = emit_cpu([add_vectorized().kernel], target=t)
    assert _e_machine(artifact.object_code) == EM_AARCH64
    assert "fadd" in artifact.assembly and "v0.4s" in artifact.assembly  # NEON, not x86
    with pytest.raises(RuntimeError, match="cannot run code for aarch64"):
        load_jit(artifact)


def test_mattr_disables_avx512():
    k = add_vectorized().kernel
    wide = emit_cpu([k], target=CPUTarget.parse("llvm -mcpu=skylake-avx512")).assembly
    assert "zmm" in wide
    narrow = emit_cpu([k], target=CPUTarget.parse("llvm -mattr=-avx512f")).assembly
    assert "zmm" not in narrow and "ymm" in narrow


def test_mcpu_is_honoured():
    t = CPUTarget.parse("llvm -mcpu=haswell")
    assert (t.cpu, t.features) == ("haswell", "")
    asm = emit_cpu([add_vectorized().kernel], target=t).assembly
    assert "ymm" in asm and "zmm" not in asm


@pytest.mark.parametrize(
    "text, message",
    [
        ("cuda", "starts with 'llvm'"),
        ("llvm -mfoo=bar", "unknown llvm target option '-mfoo=bar'"),
        ("llvm -mattr=avx2", "start with \\+ or -"),
        ("llvm -mtriple=nonsense-arch-x", "unknown target triple"),
    ],
)
def test_bad_target_strings_are_usage_errors(text, message):
    with pytest.raises(UsageError, match=message):
        CPUTarget.parse(text)


@pytest.mark.parametrize(
    "target, message",
    [
        ("llvm -mcpu=foo", "unknown CPU 'foo'"),
        ("llvm -mattr=+bogus", r"unknown CPU feature\(s\) \+bogus"),
    ],
)
def test_unknown_cpu_or_feature_is_a_clear_error(target, message):
    """Regression: LLVM only warns about these, then aborts while emitting code."""
    with pytest.raises(UsageError, match=message):
        CPUTarget.parse(target)


@pytest.mark.parametrize(
    "target, bits",
    [("llvm -mcpu=skylake-avx512", 512), ("llvm -mcpu=haswell", 256),
     ("llvm -mattr=-avx512f", 256), ("llvm -mcpu=znver4 -mattr=-avx512f", 256),
     ("llvm -mcpu=znver4 -mattr=-avx512f,-avx", 128), ("llvm -mtriple=aarch64-linux-gnu", 128)],
)  # fmt: skip
def test_vector_width_from_features_or_cpu_name(target, bits):
    assert CPUTarget.parse(target).vector_bits == bits


@pytest.mark.parametrize(
    "target, kind",
    [("llvm", "llvm"), ("llvm -mcpu=znver4", "llvm"), ("  cuda -arch=sm_90", "cuda"), ("", "")],
)
def test_target_kind_is_the_first_word(target: str, kind: str):
    assert target_kind(target) == kind


@pytest.mark.parametrize(
    "target, registers",
    [("llvm -mcpu=skylake-avx512", 32), ("llvm -mcpu=haswell", 16),
     ("llvm -mattr=-avx512f", 16), ("llvm -mtriple=aarch64-linux-gnu", 32)],
)  # fmt: skip
def test_vector_registers_from_the_architecture(target, registers):
    assert CPUTarget.parse(target).vector_registers == registers


def test_private_cache_of_the_host_or_a_named_cpu():
    """A core's cache size comes from this machine's sysfs for its own CPU, from the vendor's
    figure for a named x86 CPU, and is unknown (0) otherwise."""
    assert CPUTarget.parse("llvm -mtriple=aarch64-linux-gnu").private_cache_bytes == 0
    assert CPUTarget.parse("llvm").private_cache_bytes >= 0
    host = CPUTarget.host().cpu
    for cpu, size in (("znver3", 512 << 10), ("skylake-avx512", 1 << 20), ("haswell", 256 << 10)):
        if cpu != host:
            assert CPUTarget.parse(f"llvm -mcpu={cpu}").private_cache_bytes == size
    if host != "x86-64":
        assert CPUTarget.parse("llvm -mcpu=x86-64").private_cache_bytes == 0


@pytest.mark.parametrize(
    "target, flops",
    [("llvm -mcpu=znver5", 64), ("llvm -mcpu=znver5 -mattr=-avx512f", 32),
     ("llvm -mcpu=znver4", 32), ("llvm -mcpu=znver3", 32), ("llvm -mcpu=znver1", 16),
     ("llvm -mcpu=sapphirerapids", 64), ("llvm -mcpu=haswell", 32),
     ("llvm -mcpu=x86-64", 0), ("llvm -mtriple=aarch64-linux-gnu", 0)],
)  # fmt: skip
def test_fma_flops_per_cycle_of_named_cpus(target, flops):
    """Two FMA pipes of the documented width, capped by the target's vectors: Zen 5's 512-bit
    pipes do 64 fp32 flops a cycle with AVX-512, 32 built for AVX2; Zen 4 runs a 512-bit FMA
    over two 256-bit pipes; unknown CPUs and other architectures say 0."""
    assert CPUTarget.parse(target).fma_flops_per_cycle == flops


def test_a_cpu_with_amx_is_judged_as_a_sapphire_rapids_xeon():
    """A VM may show a Xeon's AMX under another model number: LLVM named one rocketlake (one
    512-bit FMA unit, 32 flops a cycle) whose two units measured 64 flops a cycle. AMX comes
    only with Sapphire Rapids and later Xeons, so their figures apply; a later -amx-tile wins."""
    triple = "x86_64-unknown-linux-gnu"
    assert CPUTarget(triple, "rocketlake", "+avx512f").fma_flops_per_cycle == 32
    amx = CPUTarget(triple, "rocketlake", "+avx512f,+amx-tile")
    assert amx.fma_flops_per_cycle == 64
    assert amx.l2_stream_bytes_per_cycle == 64
    assert CPUTarget(triple, "rocketlake", "+avx512f,+amx-tile,-amx-tile").fma_flops_per_cycle == 32
    assert CPUTarget(triple, "graniterapids", "+amx-tile").fma_flops_per_cycle == 64
    assert CPUTarget("aarch64-linux-gnu", "rocketlake", "+amx-tile").fma_flops_per_cycle == 0


@pytest.mark.parametrize(
    "cpu, stream",
    [("znver3", 16), ("znver4", 32), ("znver5", 32), ("haswell", 32), ("skylake-avx512", 64),
     ("sapphirerapids", 64), ("x86-64", 0)],
)  # fmt: skip
def test_l2_stream_rate_of_named_cpus(cpu, stream):
    """What the L2 sustains into L1: half the documented fill rate on AMD's cores (measured on
    the Zen 3 and Zen 5) and Intel's AVX2 ones, all of it on Intel's AVX-512 Xeons."""
    target = CPUTarget("x86_64-unknown-linux-gnu", cpu, "")
    assert target.l2_stream_bytes_per_cycle == stream
