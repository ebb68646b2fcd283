"""GPU lowerings through NVPTX: every op family's default and a few tuned configs emit PTX that
ptxas assembles (skipped without ptxas), invalid configs are rejected before building, target
dispatch routes templates and spaces, and the nine light models lower for CUDA."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tests.lowering_helpers import lower_node
from tvmc.autotune.measure_cuda import ptxas_report
from tvmc.codegen.nvptx import emit_ptx
from tvmc.graph import Node, TensorType
from tvmc.kernel import Kernel, kernel_str, loop
from tvmc.ops import OPS
from tvmc.ops.lowering import LowerContext, LoweringTarget
from tvmc.ops.schedule.gpu_launch import GPUConfigError, check_gpu_config

CUDA = LoweringTarget(kind="cuda")
F32 = "float32"
HAVE_PTXAS = shutil.which("ptxas") is not None


def T(*shape: int, dtype: str = F32) -> TensorType:
    return TensorType(tuple(shape), dtype)


def kernels_of(
    op: str,
    types: list[TensorType],
    attrs: dict,
    config: dict | None = None,
    constant_from: int = 1,
) -> list[Kernel]:
    """The CUDA kernels of one node (inputs from `constant_from` on are constants)."""
    node = Node(
        op, [f"in{i}" for i in range(len(types))], ["out"], OPS[op].normalize_attrs(attrs, "test")
    )
    out_types = OPS[op].infer(node.attrs, types)
    constants = {i: np.zeros(t.shape, t.dtype) for i, t in enumerate(types) if i >= constant_from}
    ctx = LowerContext(CUDA, config or {})
    kernels, _, _ = lower_node(ctx, node, types, out_types, constants)
    return kernels


def assemble(kernels: list[Kernel], tmp_path) -> None:
    """emit_ptx, then ptxas for sm_90 when it is installed."""
    art = emit_ptx(kernels)
    for k in kernels:
        assert art.launch[k.name].block[0] <= 1024
    if HAVE_PTXAS:
        src = tmp_path / "k.ptx"
        src.write_text(art.ptx)
        done = subprocess.run(
            ["ptxas", "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr[-2000:]


CONV = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1]}
POOL = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2], "dilations": [1, 1]}
CASES = {
    "conv": ("Conv", [T(1, 16, 14, 14), T(32, 16, 3, 3), T(32)], CONV, {}),
    "conv_tuned": (
        "Conv",
        [T(1, 16, 14, 14), T(32, 16, 3, 3)],
        CONV,
        {"tile_m": (32, 4), "tile_n": (64, 8), "tile_k": 16, "unroll_k": True},
    ),
    "conv_small_tiles": (
        "Conv",
        [T(1, 16, 14, 14), T(32, 16, 3, 3)],
        CONV,
        {"tile_m": (16, 1), "tile_n": (16, 2), "tile_k": 8},
    ),
    "depthwise": ("Conv", [T(1, 16, 14, 14), T(16, 1, 3, 3)], {**CONV, "group": 16}, {}),
    "conv1d": (
        "Conv",
        [T(1, 4, 30), T(8, 4, 5)],
        {"kernel_shape": [5], "pads": [2, 2], "strides": [1], "dilations": [1]},
        {},
    ),
    "conv_transpose": (
        "ConvTranspose",
        [T(1, 8, 5, 5), T(8, 4, 3, 3)],
        {
            "kernel_shape": [3, 3],
            "strides": [2, 2],
            "pads": [0, 0, 0, 0],
            "dilations": [1, 1],
            "output_padding": [0, 0],
        },
        {"block": 128},
    ),
    "matmul": ("MatMul", [T(64, 96), T(96, 80)], {}, {}),
    "conv_split_k": ("Conv", [T(1, 256, 7, 7), T(512, 256, 3, 3), T(512)], CONV, {}),
    "batch_matmul": ("MatMul", [T(4, 12, 16), T(4, 16, 12)], {}, {"tile_m": (16, 2)}),
    "gemm_gemv": ("Gemm", [T(1, 512), T(100, 512), T(100)], {"transB": 1}, {}),
    "maxpool": ("MaxPool", [T(1, 8, 15, 15)], POOL, {}),
    "avgpool": ("AveragePool", [T(1, 8, 15, 15)], {**POOL, "count_include_pad": 1}, {"block": 64}),
    "global_avg": ("GlobalAveragePool", [T(1, 64, 7, 7)], {}, {}),
    "lrn": ("LRN", [T(1, 8, 5, 5)], {"size": 5}, {}),
    "lppool": ("LpPool", [T(1, 8, 15, 15)], {**POOL, "p": 3}, {}),
    "lppool_f16": ("LpPool", [T(1, 8, 15, 15, dtype="float16")], POOL, {"block": 64}),
    "softmax": ("Softmax", [T(4, 1000)], {"axes": [1]}, {}),
    "softmax_tuned": ("Softmax", [T(4, 1000)], {"axes": [1]}, {"reduce_threads": 1024}),
    "layer_norm": ("LayerNormalization", [T(8, 64), T(64), T(64)], {"axis": -1}, {}),
    "rms_norm": ("RMSNormalization", [T(8, 512), T(512)], {"axis": -1}, {}),
    "group_norm": ("GroupNormalization", [T(2, 32, 8, 8), T(32), T(32)], {"num_groups": 8}, {}),
    "lp_norm": ("LpNormalization", [T(4, 300)], {"axis": 1, "p": 1}, {}),
    "mvn": ("MeanVarianceNormalization", [T(2, 3, 8, 8)], {"axes": [0, 2, 3]}, {}),
    "nll_mean": (
        "NegativeLogLikelihoodLoss",
        [T(8, 10, 30), T(8, 30, dtype="int64"), T(10)],
        {"ignore_index": -1},
        {},
    ),
    "nll_none": (
        "NegativeLogLikelihoodLoss",
        [T(8, 10), T(8, dtype="int32")],
        {"reduction": "none"},
        {},
    ),
    "argmax": ("ArgMax", [T(4, 100)], {"axis": 1}, {}),
    "reduce_short_rows": ("ReduceMean", [T(64, 3, 5)], {"axes": [1, 2]}, {}),
    "reduce_columns": ("ReduceSum", [T(2, 64, 4096)], {"axes": [1]}, {}),
    "relu": ("Relu", [T(3, 1000)], {}, {}),
    # other dtypes: float16 accumulates in float32, 64-bit values skip the shuffles
    "softmax_f16": ("Softmax", [T(4, 100, dtype="float16")], {"axes": [1]}, {}),
    "rms_norm_f16": ("RMSNormalization", [T(4, 100, dtype="float16")] * 2, {"axis": 0}, {}),
    "conv_f16": (
        "Conv",
        [T(1, 8, 8, 8, dtype="float16"), T(8, 8, 3, 3, dtype="float16")],
        CONV,
        {},
    ),
    "reduce_int64": ("ReduceSum", [T(4, 100, dtype="int64")], {"axes": [1]}, {}),
    "argmax_f64": ("ArgMax", [T(4, 100, dtype="float64")], {"axis": 1}, {}),
    "matmul_int32": ("MatMul", [T(8, 16, dtype="int32"), T(16, 8, dtype="int32")], {}, {}),
    "maxpool_int8": ("MaxPool", [T(1, 2, 8, 8, dtype="int8")], POOL, {}),
    "transpose": ("Transpose", [T(2, 3, 40)], {"perm": [2, 0, 1]}, {}),
    "cumsum": ("CumSum", [T(4, 7, 40)], {"axis": 1, "exclusive": True}, {}),
    "cumprod_f16": ("CumProd", [T(3, 50, dtype="float16")], {"axis": 1, "reverse": True}, {}),
    # vision and linalg templates and computes with data-dependent positions
    "grid_sample_cubic": (
        "GridSample",
        [T(1, 3, 8, 8), T(1, 4, 4, 2)],
        {"mode": "cubic", "padding_mode": "reflection"},
        {},
    ),
    "grid_sample_3d_f16": (
        "GridSample",
        [T(1, 2, 4, 4, 4, dtype="float16"), T(1, 2, 2, 2, 3, dtype="float16")],
        {},
        {},
    ),
    "affine_grid": ("AffineGrid", [T(2, 2, 3)], {"size": [2, 1, 5, 6]}, {}),
    "roi_align": (
        "RoiAlign",
        [T(1, 4, 10, 10), T(3, 4), T(3, dtype="int64")],
        {"output_height": 2, "output_width": 3},
        {},
    ),
    "col2im": ("Col2Im", [T(1, 8, 12)], {"image_shape": [4, 5], "block_shape": [2, 2]}, {}),
    "det": ("Det", [T(4, 5, 5)], {}, {}),
    "deformable_columns": (
        "DeformableColumns",
        [T(1, 4, 6, 6), T(1, 18, 4, 4), T(1, 9, 4, 4)],
        {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1]},
        {},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ptx_assembles(case, tmp_path):
    op, types, attrs, config = CASES[case]
    kernels = kernels_of(op, types, attrs, config)
    check_gpu_config(kernels)
    assemble(kernels, tmp_path)


@pytest.mark.parametrize(
    "config,message",
    [
        ({"tile_m": (128, 1), "tile_n": (128, 1)}, "threads per block"),
        ({"tile_m": (128, 8), "tile_n": (128, 8), "tile_k": 64}, "shared memory"),
        ({"tile_m": (16, 3)}, "does not divide"),
        ({"tile_k": 16, "split_k": 5}, "split_k 5"),
        ({"schedule": "winograd"}, "schedule"),
    ],
)
def test_invalid_conv_configs_are_rejected(config, message):
    with pytest.raises(GPUConfigError, match=message):
        kernels_of("Conv", [T(1, 64, 28, 28), T(128, 64, 3, 3)], CONV, config)


def test_invalid_block_and_reduce_threads():
    with pytest.raises(GPUConfigError, match="block"):
        kernels_of("MaxPool", [T(1, 8, 15, 15)], POOL, {"block": 2048})
    with pytest.raises(GPUConfigError, match="reduce_threads"):
        kernels_of("Softmax", [T(4, 1000)], {"axes": [1]}, {"reduce_threads": 96})


def test_check_gpu_config_rejects_cpu_loops_and_launch_limits():
    from tvmc.kernel import Buffer

    y = Buffer("y", (2048,))
    par = Kernel("par", (y,), loop("i", 2048, lambda i: y.store(i, 0.0), kind="parallel"))
    with pytest.raises(GPUConfigError, match="parallel"):
        check_gpu_config([par])
    wide = Kernel("wide", (y,), loop("i", 2048, lambda i: y.store(i, 0.0), kind="threadIdx.x"))
    with pytest.raises(GPUConfigError, match="2048 threads"):
        check_gpu_config([wide])


def test_every_gpu_space_config_in_a_sample_builds_or_is_rejected_cleanly():
    """Tuning draws from the space: each config gives launchable kernels or GPUConfigError."""
    types = [T(1, 32, 14, 14), T(64, 32, 3, 3)]
    attrs = OPS["Conv"].normalize_attrs(CONV, "test")
    space = OPS["Conv"].space(attrs, types, CUDA)
    knobs = {"tile_m", "tile_n", "tile_k", "unroll_k", "split_k", "double_buffer", "schedule"}
    assert {k.name for k in space.knobs} == knobs
    built = rejected = 0
    for index in range(0, len(space), max(1, len(space) // 40)):
        try:
            kernels = kernels_of("Conv", types, CONV, space.get(index).values)
        except GPUConfigError:
            rejected += 1
            continue
        check_gpu_config(kernels)
        built += 1
    assert built and rejected


def _reduce_case(op: str) -> tuple:
    return (op, [T(3, 50)], {"axes": [1], "keepdims": 1}, {})


TEMPLATE_CASES = {
    **{
        c[0]: c
        for c in (
            CASES["conv"],
            CASES["conv_transpose"],
            CASES["matmul"],
            CASES["gemm_gemv"],
            CASES["maxpool"],
            CASES["avgpool"],
            CASES["lrn"],
            CASES["lppool"],
            CASES["layer_norm"],
            CASES["rms_norm"],
            CASES["group_norm"],
            CASES["lp_norm"],
            CASES["mvn"],
            CASES["nll_mean"],
            CASES["global_avg"],
            CASES["softmax"],
        )
    },
    **{
        op: _reduce_case(op)
        for op in (
            "ReduceSum",
            "ReduceMean",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceSumSquare",
            "ReduceLogSum",
            "ReduceLogSumExp",
        )
    },
    "ArgMax": ("ArgMax", [T(3, 50)], {"axis": 1}, {}),
    "ArgMin": ("ArgMin", [T(3, 50, dtype="int32")], {"axis": 0}, {}),
    "LogSoftmax": ("LogSoftmax", [T(3, 50)], {"axes": [1]}, {}),
    "Hardmax": ("Hardmax", [T(3, 50)], {"axes": [1]}, {}),
    "InstanceNormalization": ("InstanceNormalization", [T(1, 3, 8, 8), T(3), T(3)], {}, {}),
    "GlobalMaxPool": ("GlobalMaxPool", [T(1, 3, 8, 8)], {}, {}),
    "CumSum": ("CumSum", [T(3, 50)], {"axis": 0}, {}),
    "CumProd": ("CumProd", [T(3, 50, dtype="int64")], {"axis": 1}, {}),
    "ScatterND": ("ScatterND", [T(8, 16), T(3, 1, dtype="int64"), T(3, 16)], {}, {}),
    "ScatterElements": (
        "ScatterElements",
        [T(8, 16), T(8, 4, dtype="int64"), T(8, 4)],
        {"axis": 1, "reduction": "add"},
        {},
    ),
    "TopK": ("TopK", [T(6, 40)], {"k": 5, "axis": 1}, {}),
    "RoiAlign": ("RoiAlign", [T(1, 2, 6, 6), T(2, 4), T(2, dtype="int64")], {}, {}),
    "Col2Im": ("Col2Im", [T(1, 4, 4)], {"image_shape": [3, 3], "block_shape": [2, 2]}, {}),
    "Det": ("Det", [T(2, 3, 3)], {}, {}),
    "Resize": (  # a CPU's contiguous upsample; the compute's loop nest on a GPU
        "Resize",
        [T(1, 2, 8, 8)],
        {"sizes": [1, 2, 16, 32], "scales": [1.0, 1.0, 2.0, 4.0], "mode": "linear"},
        {},
    ),
}


def test_every_template_op_has_a_gpu_lowering():
    """Every template op of tvmc builds GPU-only loops on CUDA (probe ops of tests excepted)."""
    ours = {
        name
        for name, op in OPS.items()  # other tests register probe ops of their own
        if op.is_template and op.reference.__module__.startswith("tvmc.")
    }
    assert set(TEMPLATE_CASES) == ours
    for op, types, attrs, config in TEMPLATE_CASES.values():
        kernels = kernels_of(op, types, attrs, config)
        check_gpu_config(kernels)
        assert all("blockIdx.x" in kernel_str(k) for k in kernels), op


def test_schedules_of_reductions():
    """Long rows: a block per row with warp shuffles; short rows and many columns: a thread per
    row, no barrier."""
    rows = kernel_str(kernels_of("Softmax", [T(4, 1000)], {"axes": [1]})[0])
    assert "shuffle_xor" in rows and "barrier()" in rows
    float64 = kernel_str(kernels_of("ReduceSum", [T(4, 100, dtype="float64")], {"axes": [1]})[0])
    assert "shuffle_xor" not in float64 and "barrier()" in float64  # the shared-memory tree
    columns = kernel_str(kernels_of("ReduceSum", [T(2, 64, 4096)], {"axes": [1]})[0])
    assert "barrier()" not in columns


def test_split_k_by_default_when_output_tiles_are_few():
    kernels = kernels_of("Conv", [T(1, 256, 7, 7), T(512, 256, 3, 3)], CONV)
    assert [k.name.rsplit("_", 1)[-1] for k in kernels] == ["conv", "sum"]
    assert len(kernels_of("Conv", [T(1, 16, 56, 56), T(64, 16, 3, 3)], CONV)) == 1


def test_dispatch_routes_by_target_kind():
    types = [T(1, 16, 14, 14), T(32, 16, 3, 3)]
    attrs = OPS["Conv"].normalize_attrs(CONV, "test")
    cpu_space = OPS["Conv"].space(attrs, types, LoweringTarget())
    gpu_space = OPS["Conv"].space(attrs, types, CUDA)
    assert {k.name for k in gpu_space.knobs} != {k.name for k in cpu_space.knobs}
    cpu = kernels_of("Conv", types, CONV)  # lowered with CUDA: no parallel loop anywhere
    check_gpu_config(cpu)
    pool_attrs = OPS["MaxPool"].normalize_attrs(POOL, "test")
    # tunable on the GPU only: no space (so no tuning task) on the CPU
    assert OPS["MaxPool"].space(pool_attrs, types[:1], LoweringTarget()) is None
    assert OPS["MaxPool"].space(pool_attrs, types[:1], CUDA).knobs[0].name == "block"
    pool = kernels_of("MaxPool", types[:1], POOL)
    assert "blockIdx.x" in kernel_str(pool[0]) and "parallel" not in kernel_str(pool[0])


@pytest.mark.slow
@pytest.mark.parametrize("name", __import__("tvmc.models", fromlist=["x"]).LIGHT_MODELS)
def test_light_models_lower_for_cuda_and_assemble(name, tmp_path):
    from tvmc.frontend import convert_model
    from tvmc.lower import lower_graph
    from tvmc.models import randomized_light_model
    from tvmc.passes import IMPORT_PIPELINE, run_passes

    graph = run_passes(convert_model(randomized_light_model(name)), IMPORT_PIPELINE)
    program = lower_graph(graph, CUDA).program
    check_gpu_config(program.kernels)
    art = emit_ptx(program.kernels)
    assert all(d.block[0] <= 1024 for d in art.launch.values())
    report = ptxas_report(art.ptx, "sm_90")  # None without ptxas; PTX it refuses raises
    if report is not None:  # and no kernel spills registers to local memory
        spills = {k: r.spill_bytes for k, r in report.items() if r.spill_bytes}
        assert not spills, spills
