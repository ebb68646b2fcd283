"""Code generators: kernel IR -> LLVM IR (llvmlite) -> CPU objects or CUDA PTX.

In: `tvmc.kernel.Kernel`s (imports tvmc.kernel, tvmc.config, tvmc.errors, llvmlite, numpy).
Out: `emit_cpu` / `CPUModule` -> `CPUArtifact` (LLVM IR, asm, object bytes); `load_shared` /
`load_jit` -> `LoadedModule` (ctypes functions; parallel loops on pool.py's thread pool);
`emit_ptx` -> `PTXArtifact` (PTX text and launch dimensions per kernel); `emit_cuda_program` ->
`CUDAArtifact` (a whole Program's PTX and its launch list) for a `CUDATarget` (`cuda -arch=sm_XX`).
"""

from tvmc.codegen.cuda_program import CUDAArtifact, Launch, emit_cuda_program
from tvmc.codegen.llvm_cpu import (
    NUM_THREADS_SYMBOL,
    CodegenOptions,
    CPUArtifact,
    CPUModule,
    KernelSignature,
    emit_cpu,
)
from tvmc.codegen.loader import (
    LoadedModule,
    link_shared,
    load_jit,
    load_library,
    load_object,
    load_shared,
)
from tvmc.codegen.nvptx import LaunchDims, PTXArtifact, emit_ptx
from tvmc.codegen.target import CPUTarget, CUDATarget, target_kind
from tvmc.codegen.threads import num_threads, physical_cores, set_num_threads

__all__ = [
    "NUM_THREADS_SYMBOL",
    "CPUArtifact",
    "CPUModule",
    "CPUTarget",
    "CUDAArtifact",
    "CUDATarget",
    "CodegenOptions",
    "KernelSignature",
    "Launch",
    "LaunchDims",
    "LoadedModule",
    "PTXArtifact",
    "emit_cpu",
    "emit_cuda_program",
    "emit_ptx",
    "link_shared",
    "load_jit",
    "load_library",
    "load_object",
    "load_shared",
    "num_threads",
    "physical_cores",
    "set_num_threads",
    "target_kind",
]
