"""A whole Program for CUDA: one PTX module holding every kernel, plus the launch list.

The CPU backend compiles an entry function that makes every call; on the GPU the host makes the
calls, so the "entry" is data: per call, the kernel's name, its grid, block and static shared
bytes, and the program buffers it takes (one pointer per kernel param, in order). The runtime
(tvmc.runtime.cuda) resolves those buffers to device pointers once and captures the launches
as one CUDA graph. The PTX ends with its plan's layout digest (`tvmc.codegen.layout`), a
comment line the runtime compares with the plan a package states.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvmc.codegen.abi import KernelSignature, Launch
from tvmc.codegen.layout import layout_digest, program_plan, ptx_with_layout
from tvmc.codegen.nvptx import emit_ptx
from tvmc.codegen.target import NVPTX_TRIPLE, CUDATarget
from tvmc.kernel import KernelIRError
from tvmc.kernel.program import Program
from tvmc.kernel.transform import MAX_STATIC_SHARED_BYTES, MAX_THREADS_PER_BLOCK

DUMP_KINDS = ("kernel", "ll", "ptx", "asm")  # asm: the PTX too (it is the GPU's assembly)


@dataclass(frozen=True)
class CUDAArtifact:
    """PTX for a whole program, the texts it came from, and the launches that run it."""

    target: CUDATarget
    ptx: str
    llvm_ir: str
    kernel_text: str
    kernels: tuple[KernelSignature, ...]
    launches: tuple[Launch, ...]

    def dump(self, kind: str) -> str:
        """`--dump-code` text: kernel (kernel IR), ll (NVPTX LLVM IR), ptx (or asm: the PTX)."""
        texts = {"kernel": self.kernel_text, "ll": self.llvm_ir, "ptx": self.ptx, "asm": self.ptx}
        if kind not in texts:
            raise ValueError(f"unknown code kind {kind!r}; valid: {', '.join(DUMP_KINDS)}")
        return texts[kind]


def check_launch(name: str, block: tuple[int, int, int], shared_bytes: int) -> None:
    """KernelIRError when no GPU could launch this: too many threads or too much shared memory."""
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise KernelIRError(
            f"kernel {name}: {threads} threads per block {list(block)}, "
            f"more than the {MAX_THREADS_PER_BLOCK} a GPU launches"
        )
    if shared_bytes > MAX_STATIC_SHARED_BYTES:
        raise KernelIRError(
            f"kernel {name}: {shared_bytes} bytes of static shared memory, "
            f"more than the {MAX_STATIC_SHARED_BYTES} a block may declare"
        )


def emit_cuda_program(program: Program, target: CUDATarget | None = None) -> CUDAArtifact:
    """Compile every kernel of `program` into one PTX module and list its launches in order."""
    program.validate()
    target = target or CUDATarget()
    artifact = emit_ptx(program.kernels, target.arch, target.ptx_version)
    for name, dims in artifact.launch.items():
        check_launch(name, dims.block, dims.shared_bytes)
    launches = tuple(
        Launch(
            call.kernel,
            artifact.launch[call.kernel].grid,
            artifact.launch[call.kernel].block,
            artifact.launch[call.kernel].shared_bytes,
            call.args,
            call.node,
            call.flops,
        )
        for call in program.calls
    )
    digest = layout_digest(program_plan(program, artifact.kernels, launches))
    ptx = ptx_with_layout(artifact.ptx, digest)
    return CUDAArtifact(target, ptx, artifact.llvm_ir, artifact.kernel_text, artifact.kernels,
                        launches)  # fmt: skip


__all__ = ["NVPTX_TRIPLE", "CUDAArtifact", "Launch", "check_launch", "emit_cuda_program"]
