"""Pools (MaxPool, AveragePool, LpPool, global pools) and LRN: definitions (`definition`),
windowed CPU and CUDA templates (`cpu`, `gpu`; tunable on CUDA in `block`), global pools as row
reductions (`global_pool`), MaxPool's Indices output as a compute (`argmax`)."""

from tvmc.ops.pool import argmax, cpu, gpu
from tvmc.ops.pool.definition import (
    average_pool,
    average_pool_rule,
    global_average_pool,
    global_average_pool_rule,
    global_max_pool,
    global_max_pool_rule,
    lp_pool,
    lp_pool_rule,
    lrn,
    lrn_rule,
    max_pool,
    max_pool_rule,
)
from tvmc.ops.pool.global_pool import GLOBAL_AVERAGE_POOL, GLOBAL_MAX_POOL
from tvmc.ops.registry import OPAQUE, REDUCTION, REQUIRED, OpDef, register
from tvmc.ops.window import WINDOW_ATTRS

register(OpDef(
    "MaxPool", max_pool_rule, max_pool,
    lowerings={"cpu": cpu.MAX_POOL, "cuda": gpu.MAX_POOL},
    attrs={**WINDOW_ATTRS, "ceil_mode": 0}, kind=OPAQUE,
))  # fmt: skip
register(argmax.DEFINITION)
register(OpDef(
    "AveragePool", average_pool_rule, average_pool,
    lowerings={"cpu": cpu.AVERAGE_POOL, "cuda": gpu.AVERAGE_POOL},
    attrs={**WINDOW_ATTRS, "ceil_mode": 0, "count_include_pad": 0}, kind=OPAQUE,
))  # fmt: skip
register(OpDef(
    "LpPool", lp_pool_rule, lp_pool,
    lowerings={"cpu": cpu.LP_POOL, "cuda": gpu.LP_POOL},
    attrs={**WINDOW_ATTRS, "ceil_mode": 0, "p": 2}, kind=OPAQUE,
))  # fmt: skip
register(OpDef(
    "GlobalAveragePool", global_average_pool_rule, global_average_pool,
    lowerings=GLOBAL_AVERAGE_POOL, kind=REDUCTION,
))  # fmt: skip
register(OpDef(
    "GlobalMaxPool", global_max_pool_rule, global_max_pool,
    lowerings=GLOBAL_MAX_POOL, kind=REDUCTION,
))  # fmt: skip
register(OpDef(
    "LRN", lrn_rule, lrn,
    lowerings={"cpu": cpu.LRN, "cuda": gpu.LRN},
    attrs={"size": REQUIRED, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}, kind=OPAQUE,
))  # fmt: skip
