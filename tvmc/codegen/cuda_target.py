"""CUDA targets (`cuda`, `cuda -arch=sm_90`): which GPU architecture to emit PTX for.

Plain data, no LLVM: the runtime checks a CUDA package's arch against the GPU with it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from tvmc.errors import UsageError

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_CUDA_ARCH = "sm_90"  # `cuda` alone, where no GPU is found to ask (docs/cuda.md)
BASE_PTX_VERSION = "ptx86"  # PTX ISA 8.6 (CUDA 12.8 drivers); newer archs need newer ISAs
# Every arch NVPTX (LLVM 22) emits code for, with the PTX ISA it needs beyond the base one:
# an arch LLVM refuses is a fatal LLVM error, so only these reach the code generator.
_ARCH_PTX = {"sm_103": "ptx88", "sm_110": "ptx90", "sm_120": "ptx87", "sm_121": "ptx88"}
CUDA_ARCHS = tuple(
    "sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 "
    "sm_90a sm_100 sm_100a sm_101 sm_103 sm_110 sm_120 sm_121".split()
)
_CUDA_OPTIONS = ("-arch",)


@dataclass(frozen=True)
class CUDATarget:
    """An NVIDIA GPU architecture (`cuda -arch=sm_90`): PTX for it JIT-compiles on that GPU."""

    arch: str = DEFAULT_CUDA_ARCH

    def __post_init__(self) -> None:
        if self.arch not in CUDA_ARCHS:
            raise UsageError(
                f"unknown CUDA architecture {self.arch!r} (-arch); valid: sm_XX with XX the "
                f"compute capability, one of {', '.join(CUDA_ARCHS)}"
            )

    @classmethod
    def parse(cls, target: str, default_arch: str | None = None) -> CUDATarget:
        """`cuda` or `cuda -arch=sm_XX`; without -arch: `default_arch`, else DEFAULT_CUDA_ARCH."""
        words = shlex.split(target)
        if not words or words[0] != "cuda":
            raise UsageError(f"a CUDA target starts with 'cuda', got {target!r}")
        arch = None
        for word in words[1:]:
            key, _, value = word.partition("=")
            if key not in _CUDA_OPTIONS or not value:
                raise UsageError(
                    f"unknown cuda target option {word!r}; valid: -arch=sm_XX "
                    "(e.g. 'cuda -arch=sm_90')"
                )
            arch = value
        return cls(arch or default_arch or DEFAULT_CUDA_ARCH)

    @classmethod
    def for_capability(cls, major: int, minor: int) -> CUDATarget:
        """The newest arch a GPU of compute capability major.minor runs (PTX JITs forward)."""
        plain = [a for a in CUDA_ARCHS if not a.endswith("a")]
        fits = [a for a in plain if cls(a).compute_capability <= (major, minor)]
        return cls(fits[-1] if fits else plain[0])

    @property
    def ptx_version(self) -> str:
        """The PTX ISA the code declares (`ptx86`: `.version 8.6`)."""
        return _ARCH_PTX.get(self.arch.rstrip("a"), BASE_PTX_VERSION)

    @property
    def compute_capability(self) -> tuple[int, int]:
        """(major, minor): sm_90 -> (9, 0), sm_120 -> (12, 0)."""
        digits = self.arch[3:].rstrip("a")
        return int(digits[:-1]), int(digits[-1])

    def __str__(self) -> str:
        return f"cuda -arch={self.arch}"
