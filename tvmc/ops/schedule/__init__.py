"""Scheduling pieces shared by op families: loop nests that more than one family's templates build.

- `injective`: the schedule of computes (`schedule_injective`, a table by target kind) and
  `make_kernel`.
- `microkernel`: CPU register tiles, packed operands, accumulators, index helpers.
- `reduction` / `reduction_gpu`: the row-reduction kernel of reductions, softmax, norms and
  global pools, on a CPU and on a GPU (`REDUCTION` routes by target kind).
- `gpu_launch`: GPU launch limits, one-thread-per-element grids, config checks.
- `gemm_gpu` / `gemm_gpu_kernel`: the shared-memory tiled GEMM of MatMul, Gemm and the
  implicit-GEMM conv: its tiles, knob space, defaults and tile movers / its kernels.

Op-specific templates live in their family (tvmc.ops.<family>); only what two families share
belongs here.
"""
