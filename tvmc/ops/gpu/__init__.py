"""GPU (CUDA) lowerings: the schedules and templates used when `LoweringTarget.kind == "cuda"`.

In: tvmc.kernel, tvmc.ops lowering helpers. Out: kernels with only GPU-bound loops (blockIdx /
threadIdx), serial or unrolled loops inside a thread, shared scratch and barriers, which
tvmc.codegen.nvptx turns into PTX. How they are chosen:

- `launch.py`: block/thread limits, `grid_loop` (one thread per element), `check_gpu_config`
  (the cheap validator a tuner runs before building) and `GPUConfigError`.
- `reduction.py`: the GPU form of `reduce_schedule.reduction_kernel` (reductions, softmax,
  norms, global pools): one block per row with a shared-memory tree, or one thread per row when
  rows are short. `schedule_injective` has its GPU form in `launch.grid_loop`.
- `reduction_spaces.py`: the CUDA-only `reduce_threads` spaces of the ops built on it.
- `gemm.py`: the shared-memory tiled GEMM (block and register tiles, split-K) and its space.
- `linalg.py`, `conv.py`, `pool.py`: GPU variants of the templates that build their own loop
  nests, registered with `@template(op, ..., target="cuda")` (imported by tvmc.ops).

This package's __init__ imports nothing, so tvmc.ops.lowering can import `launch` early.
"""
