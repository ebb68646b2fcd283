"""LLVM targets: which triple/cpu/features to compile for, and the LLVM objects for them.

llvmlite is imported on first use (`init_llvm`): naming a target (`target_kind`, `is_native`)
loads no libLLVM, which `tvmc run` never needs.
"""

from __future__ import annotations

import functools
import os
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from tvmc.codegen.cuda_target import (  # noqa: F401  (re-exported: targets of both kinds)
    BASE_PTX_VERSION,
    CUDA_ARCHS,
    DEFAULT_CUDA_ARCH,
    NVPTX_TRIPLE,
    CUDATarget,
)
from tvmc.codegen.host import (
    feature_map,
    host_cpu,
    host_l1_data_bytes,
    host_private_cache_bytes,
    host_triple,
    is_host_arch,
    triple_arch,
)
from tvmc.errors import UsageError, did_you_mean, suggest

if TYPE_CHECKING:
    import llvmlite.binding as llvm

_LLVM_OPTIONS = ("-mtriple", "-mcpu", "-mattr")

# L2 per core of named x86 CPUs (LLVM's -mcpu names), from AMD's and Intel's documentation: what
# the conv planner assumes of a target that is not this machine's CPU (it measures its own).
_KB = 1 << 10
PRIVATE_CACHE_BYTES = {
    **dict.fromkeys(["znver1", "znver2", "znver3"], 512 * _KB),
    **dict.fromkeys(["znver4", "znver5"], 1024 * _KB),
    **dict.fromkeys(["haswell", "broadwell", "skylake"], 256 * _KB),
    **dict.fromkeys(["skylake-avx512", "cascadelake", "cooperlake"], 1024 * _KB),
    **dict.fromkeys(["icelake-server", "tigerlake", "alderlake"], 1280 * _KB),
    **dict.fromkeys(["sapphirerapids", "emeraldrapids", "graniterapids", "raptorlake"],
                    2048 * _KB),
}  # fmt: skip

# L1 data cache per core of the same CPUs (the same sources).
L1_DATA_BYTES = {
    **dict.fromkeys(["znver1", "znver2", "znver3", "znver4", "haswell", "broadwell", "skylake",
                     "skylake-avx512", "cascadelake", "cooperlake"], 32 * _KB),
    **dict.fromkeys(["znver5", "icelake-server", "tigerlake", "alderlake", "sapphirerapids",
                     "emeraldrapids", "graniterapids", "raptorlake"], 48 * _KB),
}  # fmt: skip

# Bytes a cycle a core's L2 sustains into its L1 while a tile streams its operands from there
# (the planner keeps operands in L1 only where a tile asks more: tvmc.ops.conv.cpu.l2_demand).
# AMD documents 32 a cycle on Zen 1 to 3 and 64 on Zen 4/5, Intel 64 on its cores since Haswell.
# AMD's cores sustained half of it (a Zen 3's 4x3 AVX2 channels tile asking 27 a cycle ran at
# 66-69% of the peak, a 6x2 one asking 21 at 76-79%; a Zen 5's 3x7 pixels tile asking 43 at
# 60-70%); Intel's AVX-512 Xeons stream nearly all of it with 64-byte loads (an AMX Xeon's 3x7
# pixels tiles asking 43 ran as fast as channels tiles asking 14; docs/performance.md, "An Intel
# Xeon"), Intel's AVX2 and client cores are counted at half (Intel gives Skylake 29 sustained).
L2_STREAM_BYTES_PER_CYCLE = {
    **dict.fromkeys(["znver1", "znver2", "znver3"], 16),
    **dict.fromkeys(["znver4", "znver5", "haswell", "broadwell", "skylake", "tigerlake",
                     "alderlake", "raptorlake"], 32),
    **dict.fromkeys(["skylake-avx512", "cascadelake", "cooperlake", "icelake-server",
                     "sapphirerapids", "emeraldrapids", "graniterapids"], 64),
}  # fmt: skip

# Bits each of a core's two FMA pipes works on (the same sources): a cycle's vector FMAs do at
# most 2 pipes x 2 flops x min(vector width, this) / 32 fp32 flops. Zen 1 splits a 256-bit FMA
# over two 128-bit pipes; Zen 2 to 4 and Intel's cores since Haswell have two 256-bit pipes (Zen
# 4 and the client AVX-512 cores run a 512-bit FMA over both: 32 flops a cycle); Zen 5 and
# Intel's AVX-512 Xeons two 512-bit ones: 64 (Xeons of one 512-bit unit, some Silver and Gold
# 5000s, and Zen 5's mobile parts, whose 512-bit datapath is split, share LLVM's names and are
# judged as the others are).
FMA_PIPE_BITS = {
    "znver1": 128,
    **dict.fromkeys(["znver2", "znver3", "znver4", "haswell", "broadwell", "skylake", "alderlake",
                     "raptorlake", "icelake-client", "tigerlake", "rocketlake"], 256),
    **dict.fromkeys(["znver5", "skylake-avx512", "cascadelake", "cooperlake", "icelake-server",
                     "sapphirerapids", "emeraldrapids", "graniterapids"], 512),
}  # fmt: skip
FMA_PIPES = 2

# A CPU with AMX tiles is an Intel Xeon of Sapphire Rapids or later, whatever LLVM names it (a VM
# may show another model number: LLVM then said rocketlake, a client core of one 512-bit FMA
# unit, for a Xeon whose two units measured 64 flops a cycle); it is judged as Sapphire Rapids.
AMX_XEONS = ("sapphirerapids", "emeraldrapids", "graniterapids")


@functools.cache
def init_llvm() -> ModuleType:
    """`llvmlite.binding`, every target and asm printer registered once (native, cross, NVPTX)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def target_kind(target: str) -> str:
    """The kind a target string names, its first word: `llvm`, `cuda` ('' for an empty one)."""
    words = target.split()
    return words[0] if words else ""


@dataclass(frozen=True)
class CPUTarget:
    """An LLVM CPU target; an object built for it runs only where these features exist."""

    triple: str
    cpu: str
    features: str = ""

    @classmethod
    def host(cls) -> CPUTarget:
        """This machine: its triple, CPU name and every feature it reports."""
        return cls.from_options()

    @classmethod
    def from_options(
        cls, mtriple: str | None = None, mcpu: str | None = None, mattr: str | None = None
    ) -> CPUTarget:
        """TVM's `-mtriple/-mcpu/-mattr`: unset triple and cpu mean the host; mattr refines."""
        llvm = init_llvm()
        triple = mtriple or host_triple()
        native = is_host_arch(triple)
        try:
            llvm.Target.from_triple(triple)
        except RuntimeError as err:
            raise UsageError(f"unknown target triple {triple!r}: {err}") from None
        cpu = mcpu or (host_cpu().name if native else "generic")
        base = host_cpu().features if native and not mcpu else ""
        extra = ",".join(f.strip() for f in (mattr or "").split(",") if f.strip())
        for feature in extra.split(",") if extra else ():
            if feature[0] not in "+-":
                raise UsageError(f"-mattr entries start with + or -, got {feature!r}")
        # Later entries win in LLVM's feature strings, so the user's -mattr goes last.
        features = ",".join(f for f in (base, extra) if f)
        if mcpu or extra:
            _check_known(triple, cpu, extra)
        return cls(triple, cpu, features)

    @classmethod
    def parse(cls, target: str) -> CPUTarget:
        """A target string such as `llvm -mcpu=znver4 -mattr=-avx512f`."""
        words = shlex.split(target)
        if not words or words[0] != "llvm":
            raise UsageError(f"a CPU target starts with 'llvm', got {target!r}")
        options: dict[str, str] = {}
        for word in words[1:]:
            key, _, value = word.partition("=")
            if key in _LLVM_OPTIONS and not value:
                raise UsageError(f"llvm target option {key} needs a value: {key}=VALUE")
            if key not in _LLVM_OPTIONS:
                valid = ", ".join(f"{o}=VALUE" for o in _LLVM_OPTIONS)
                raise UsageError(f"unknown llvm target option {word!r}; valid: {valid}."
                                 + did_you_mean(key, _LLVM_OPTIONS))  # fmt: skip
            options[key[1:]] = value
        return cls.from_options(**options)

    @property
    def vector_bits(self) -> int:
        """The widest float SIMD register: from -mattr/host features, else the CPU's name (an
        AVX-512 CPU told -avx512f keeps its AVX2)."""
        features = set(self.features.split(","))
        if "-avx512f" not in features and ("+avx512f" in features or self.cpu in _AVX512_CPUS):
            return 512
        named = self.cpu in _AVX2_CPUS or self.cpu in _AVX512_CPUS
        if "-avx" not in features and ({"+avx", "+avx2"} & features or named):
            return 256
        return 128

    @property
    def vector_registers(self) -> int:
        """Architectural SIMD registers: 32 with AVX-512 (zmm0-31) and on AArch64 (v0-31), 16
        for SSE/AVX2 (xmm/ymm0-15) and other targets."""
        if triple_arch(self.triple) in ("aarch64", "arm64") or self.vector_bits == 512:
            return 32
        return 16

    @property
    def private_cache_bytes(self) -> int:
        """A core's own cache (L2): this machine's (sysfs) where the target is its CPU, else
        the vendor's figure for a named x86 CPU (`-mcpu=znver3`: a package built here for
        another machine gets that machine's tiles), else 0 (unknown)."""
        return self._core_figure(host_private_cache_bytes, PRIVATE_CACHE_BYTES)

    @property
    def l1_data_bytes(self) -> int:
        """A core's L1 data cache, as `private_cache_bytes` finds the L2."""
        return self._core_figure(host_l1_data_bytes, L1_DATA_BYTES)

    @property
    def l2_stream_bytes_per_cycle(self) -> int:
        """Bytes a cycle the L2 sustains into L1 (`L2_STREAM_BYTES_PER_CYCLE`), for x86 CPUs
        LLVM names (0: unknown)."""
        return self._named_x86(L2_STREAM_BYTES_PER_CYCLE)

    @property
    def fma_flops_per_cycle(self) -> int:
        """fp32 flops a cycle of this target's vector FMAs, for x86 CPUs LLVM names (0: unknown):
        its pipes' width (`FMA_PIPE_BITS`) capped by the target's vectors (Zen 5 built for AVX2
        does 32, with AVX-512 64)."""
        pipe = self._named_x86(FMA_PIPE_BITS)
        return FMA_PIPES * 2 * min(pipe, self.vector_bits) // 32

    def _core_figure(self, host_figure: Callable[[], int], table: dict[str, int]) -> int:
        """`host_figure()` where the target is this machine's CPU, else its `table` entry."""
        if self.is_native and self.cpu == host_cpu().name:
            return host_figure()
        return self._named_x86(table)

    def _named_x86(self, table: dict[str, int]) -> int:
        """The `table` entry of this target's CPU if it is an x86 one (an AMX CPU's as Sapphire
        Rapids where LLVM names it otherwise: `AMX_XEONS`), else 0 (unknown)."""
        if triple_arch(self.triple) != "x86_64":
            return 0
        amx = self.cpu not in AMX_XEONS and feature_map(self.features).get("amx-tile", False)
        return table.get(AMX_XEONS[0] if amx else self.cpu, 0)

    @property
    def is_native(self) -> bool:
        """Whether objects for this target can run in this process."""
        return is_host_arch(self.triple)

    def target_machine(self, opt_level: int = 3) -> llvm.TargetMachine:
        """An LLVM TargetMachine emitting position-independent code (for .so and MCJIT alike)."""
        target = init_llvm().Target.from_triple(self.triple)
        return target.create_target_machine(
            cpu=self.cpu,
            features=self.features,
            opt=opt_level,
            reloc="pic",
            codemodel="default",
        )

    def __str__(self) -> str:
        return f"llvm -mtriple={self.triple} -mcpu={self.cpu}" + (
            f" -mattr={self.features}" if self.features else ""
        )


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine, speed_level: int = 3) -> None:
    """Runs the new pass manager's O`speed_level` pipeline on `module` in place."""
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)  # else the vectorizer's cost model is wrong
    llvm = init_llvm()
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pto.loop_vectorization = speed_level >= 2
    pto.slp_vectorization = speed_level >= 2
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)


# CPUs whose names imply their vector width when no feature list says it (-mcpu without -mattr).
_AVX512_CPUS = frozenset(
    "skylake-avx512 cascadelake cooperlake cannonlake icelake-client icelake-server tigerlake "
    "rocketlake sapphirerapids emeraldrapids graniterapids znver4 znver5 x86-64-v4".split()
)
_AVX2_CPUS = frozenset(
    "haswell broadwell skylake alderlake raptorlake meteorlake arrowlake znver1 znver2 znver3 "
    "x86-64-v3 bdver4".split()
)


def _llvm_report(triple: str, cpu: str, features: str) -> str:
    """What LLVM prints on the C stderr while making a target machine (it only warns there)."""
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)  # LLVM reports on the C stderr, not Python's
        try:
            target = init_llvm().Target.from_triple(triple)
            target.create_target_machine(cpu=cpu, features=features)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        return captured.read().decode(errors="replace")


@functools.cache
def llvm_names(triple: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The CPU names and feature names LLVM knows for `triple` (its -mcpu=help listing)."""
    cpus: list[str] = []
    features: list[str] = []
    section = None
    for line in _llvm_report(triple, "help", "").splitlines():
        if line.startswith("Available CPUs"):
            section = cpus
        elif line.startswith("Available features"):
            section = features
        elif section is not None and line.startswith("  ") and " - " in line:
            section.append(line.split()[0])
        elif not line.strip() and section is features and features:
            section = None  # the usage text after the lists
    return tuple(cpus), tuple(features)


def _check_known(triple: str, cpu: str, features: str) -> None:
    """UsageError for a CPU or feature LLVM does not know (it would only warn, then miscompile)."""
    report = _llvm_report(triple, cpu, features)
    if "not a recognized processor" in report:
        hint = did_you_mean(cpu, llvm_names(triple)[0])
        raise UsageError(
            f"unknown CPU {cpu!r} for {triple} (-mcpu).{hint or ' LLVM knows names such as'}"
            + ("" if hint else " x86-64-v3, skylake-avx512, znver4, neoverse-n1, cortex-a72")
        )
    unknown = sorted({line.split("'")[1] for line in report.splitlines()
                      if "not a recognized feature" in line and "'" in line})  # fmt: skip
    if unknown:
        known = llvm_names(triple)[1]
        hints = [f"{name[0]}{suggest(name[1:], known)}" for name in unknown
                 if name[:1] in "+-" and suggest(name[1:], known)]  # fmt: skip
        hint = f" Did you mean {', '.join(map(repr, hints))}?" if hints else ""
        raise UsageError(
            f"unknown CPU feature(s) {', '.join(unknown)} for {triple} (-mattr).{hint}"
        )
