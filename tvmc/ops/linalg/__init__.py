"""MatMul and Gemm: definitions (`definition`), CPU templates (`cpu`), CUDA templates (`gpu`,
on the shared tiled GEMM of tvmc.ops.schedule.gemm_gpu). Registered here with their tables."""

from tvmc.ops.linalg import cpu, gpu
from tvmc.ops.linalg.definition import (
    gemm,
    gemm_flops,
    gemm_rule,
    matmul,
    matmul_flops,
    matmul_rule,
    matmul_summary,
)
from tvmc.ops.registry import COMPLEX, OpDef, register

register(OpDef(
    "MatMul", matmul_rule, matmul,
    lowerings={"cpu": cpu.MATMUL, "cuda": gpu.MATMUL},
    kind=COMPLEX, num_inputs=(2, 2), flops=matmul_flops, weights=(1,), summary=matmul_summary,
))  # fmt: skip
register(OpDef(
    "Gemm", gemm_rule, gemm,
    lowerings={"cpu": cpu.GEMM, "cuda": gpu.GEMM},
    attrs={"transA": False, "transB": False, "alpha": 1.0, "beta": 1.0},
    kind=COMPLEX, num_inputs=(2, 3), flops=gemm_flops, weights=(1, 2), summary=matmul_summary,
))  # fmt: skip
