"""Runtime: load compiled code and run it, one foreign call per inference; time and profile it.

In: tvmc.codegen (loading objects, threads), tvmc.kernel.program (the plan's data types).
Out: `Executor`, `ProgramInfo`, `Timings`.
"""

from tvmc.runtime.executor import Executor, ProgramInfo, Timings, aligned_empty, mean_seconds

__all__ = ["Executor", "ProgramInfo", "Timings", "aligned_empty", "mean_seconds"]
