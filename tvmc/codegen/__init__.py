"""Code generators: kernel IR -> LLVM IR (llvmlite) -> CPU objects or CUDA PTX.

In: `tvmc.kernel.Kernel`s (imports tvmc.kernel, tvmc.config, tvmc.errors, llvmlite, numpy).
Out: `emit_cpu` / `CPUModule` -> `CPUArtifact` (LLVM IR, asm, object bytes); `load_shared` /
`load_jit` -> `LoadedModule` (ctypes functions; parallel loops on pool.py's thread pool);
`emit_ptx` -> `PTXArtifact` (PTX text and launch dimensions per kernel); `emit_cuda_program` ->
`CUDAArtifact` (a whole Program's PTX and its launch list) for a `CUDATarget` (`cuda -arch=sm_XX`).

What running a package needs imports no LLVM: `abi` (kernel signatures, launches, symbols),
`layout`, `loader` (a .so through ctypes), `pool`, `threads`, `host` (this CPU, cached) and
`cuda_target`. The names below are imported on first use (`tvmc.lazy`), so `tvmc run` loads
neither llvmlite nor the code generators.
"""

from typing import TYPE_CHECKING

from tvmc.lazy import lazy_exports

_EXPORTS = {
    "NUM_THREADS_SYMBOL": "tvmc.codegen.abi",
    "CPUArtifact": "tvmc.codegen.llvm_cpu",
    "CPUModule": "tvmc.codegen.llvm_cpu",
    "CPUTarget": "tvmc.codegen.target",
    "CUDAArtifact": "tvmc.codegen.cuda_program",
    "CUDATarget": "tvmc.codegen.cuda_target",
    "CodegenOptions": "tvmc.codegen.llvm_cpu",
    "KernelSignature": "tvmc.codegen.abi",
    "Launch": "tvmc.codegen.abi",
    "LaunchDims": "tvmc.codegen.nvptx",
    "LoadedModule": "tvmc.codegen.loader",
    "PTXArtifact": "tvmc.codegen.nvptx",
    "emit_cpu": "tvmc.codegen.llvm_cpu",
    "emit_cuda_program": "tvmc.codegen.cuda_program",
    "emit_ptx": "tvmc.codegen.nvptx",
    "link_shared": "tvmc.codegen.loader",
    "load_jit": "tvmc.codegen.loader",
    "load_library": "tvmc.codegen.loader",
    "load_object": "tvmc.codegen.loader",
    "load_shared": "tvmc.codegen.loader",
    "num_threads": "tvmc.codegen.threads",
    "physical_cores": "tvmc.codegen.threads",
    "set_num_threads": "tvmc.codegen.threads",
    "target_kind": "tvmc.codegen.target",
}
__all__ = [
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
    "NUM_THREADS_SYMBOL",
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
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from tvmc.codegen.abi import NUM_THREADS_SYMBOL, KernelSignature, Launch
    from tvmc.codegen.cuda_program import CUDAArtifact, emit_cuda_program
    from tvmc.codegen.cuda_target import CUDATarget
    from tvmc.codegen.llvm_cpu import CodegenOptions, CPUArtifact, CPUModule, emit_cpu
    from tvmc.codegen.loader import (
        LoadedModule,
        link_shared,
        load_jit,
        load_library,
        load_object,
        load_shared,
    )
    from tvmc.codegen.nvptx import LaunchDims, PTXArtifact, emit_ptx
    from tvmc.codegen.target import CPUTarget, target_kind
    from tvmc.codegen.threads import num_threads, physical_cores, set_num_threads
