"""Runtime: load compiled code and run it, one foreign call per inference; time and profile it.

In: tvmc.codegen's modules that load no LLVM (`abi`, `layout`, `loader`, `pool`, `threads`,
`host`, `cuda_target`; `loader` imports llvmlite only to JIT a mod.o), tvmc.plan (the plan's
data types; no kernel IR), and for CUDA the driver API through cuda-bindings (imported lazily,
`cuda_driver`).
Out: `Executor`, `ProgramInfo`, `Timings`; `cuda.CUDAExecutor` (a program's PTX on the GPU,
replayed as one CUDA graph).
"""

from tvmc.runtime.executor import Executor, ProgramInfo, aligned_empty
from tvmc.runtime.timing import Timings, mean_seconds

__all__ = ["Executor", "ProgramInfo", "Timings", "aligned_empty", "mean_seconds"]
