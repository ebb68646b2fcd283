"""Pooling, global pooling and LRN templates, compiled natively (a few interpreted), vs ORT.

The pool cases of tests/ops/test_pool.py, plus shapes for the vectorized stride-1 interior
(16-lane blocks, an overlapping last block, a narrow tail under an epilogue), stride-2 plain
loops, windows above MAX_UNROLLED_TAPS (the looped form) and parallel planes; LpPool over the
same windows. Tolerance: float32 rtol 1e-5, atol 1e-6 (averages divide the same sums; LRN's and
LpPool's powers differ by an ulp).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lowering_helpers import check_lowered, run_node
from tests.ops.kernel_checks import check
from tests.ops.template_checks import FORCE_PARALLEL, check_template, loop_kinds
from tvmc.graph import Node, TensorType
from tvmc.kernel import Allocate, Kernel
from tvmc.kernel.transform import walk
from tvmc.ops import evaluate_node
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.pool import cpu as pool_cpu
from tvmc.ops.pool.cpu import axis_runs

POOLS = ["MaxPool", "AveragePool"]


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize(
    "x_shape,attrs",
    [
        ((1, 2, 7, 8), {"kernel_shape": [2, 2]}),
        ((2, 3, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ((1, 2, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [0, 1, 1, 0]}),
        ((1, 2, 9), {"kernel_shape": [3], "strides": [2]}),  # 1D
        ((1, 2, 40), {"kernel_shape": [4], "pads": [2, 1]}),  # 1D, vectorized
        ((1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 3], "strides": [2, 2, 2]}),  # 3D
        ((1, 2, 4, 5, 20), {"kernel_shape": [3, 3, 3], "pads": [1, 1, 1, 1, 1, 1]}),
        ((1, 3, 9, 45), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # 43 = 32 + overlap
        ((1, 3, 9, 45), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ],
)
def test_pool(op, x_shape, attrs, rng):
    check_lowered(op, {"x": randn(rng, *x_shape)}, attrs, opset=13)


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 0]])
def test_pool_ceil_mode(op, pads, rng):
    attrs = {"kernel_shape": [3, 2], "strides": [2, 3], "pads": pads, "ceil_mode": 1}
    check_lowered(op, {"x": randn(rng, 1, 2, 7, 8)}, attrs, opset=12)


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("kernel,stride,pads", [(9, 9, [0, 0, 0, 0]), (192, 192, [0, 0, 0, 0]),
                                                (8, 3, [1, 1, 1, 1])])  # fmt: skip
def test_pool_ceil_mode_window_longer_than_input(op, count_include_pad, kernel, stride, pads, rng):
    # one window in ceil mode, its overhang padded: adaptive pooling exported at a small input
    # (torchvision's EfficientNet at 7x7 gives AveragePool 192x192)
    attrs = {"kernel_shape": [kernel, kernel], "strides": [stride, stride], "pads": pads,
             "ceil_mode": 1}  # fmt: skip
    if op == "AveragePool":
        attrs["count_include_pad"] = count_include_pad
    elif count_include_pad:
        pytest.skip("MaxPool has no count_include_pad")
    x = randn(rng, 1, 3, 7, 5)
    check_lowered(op, {"x": x}, attrs, opset=19)
    if kernel == 9:  # the CUDA template, interpreted
        check(op, {"x": x}, attrs, opset=19, target=LoweringTarget(kind="cuda"))


def test_pool_window_longer_than_input_without_ceil_mode_is_a_model_error(rng):
    from tests.onnx_helpers import single_node_model
    from tvmc.errors import ModelError
    from tvmc.frontend import convert_model

    model = single_node_model("MaxPool", {"x": randn(rng, 1, 3, 7, 7)}, {"kernel_shape": [9, 9]})
    with pytest.raises(ModelError, match="does not fit"):
        convert_model(model)


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("width,strides", [(7, [2, 2]), (37, [1, 1])])
def test_average_pool_count_include_pad(ceil_mode, count_include_pad, width, strides, rng):
    attrs = {"kernel_shape": [3, 3], "strides": strides, "pads": [2, 0, 1, 2],
             "ceil_mode": ceil_mode, "count_include_pad": count_include_pad}  # fmt: skip
    check_lowered("AveragePool", {"x": randn(rng, 1, 2, 8, width)}, attrs, opset=19)


@pytest.mark.parametrize("op,opset", [("MaxPool", 12), ("AveragePool", 19)])
@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_pool_dilations(op, opset, ceil_mode, rng):
    attrs = {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [2, 1], "pads": [1, 0, 2, 1],
             "ceil_mode": ceil_mode}  # fmt: skip
    check_lowered(op, {"x": randn(rng, 1, 2, 10, 29)}, attrs, opset=opset)


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_pool_auto_pad(op, auto_pad, rng):
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": auto_pad}
    check_lowered(op, {"x": randn(rng, 1, 2, 9, 8)}, attrs, opset=11)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_max_pool_integers(dtype, rng):
    x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (1, 2, 6, 70), dtype=dtype)
    attrs = {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]}
    check_lowered("MaxPool", {"x": x}, attrs, opset=12)


@pytest.mark.parametrize("op", POOLS)
def test_pool_float16(op, rng):
    x = randn(rng, 1, 2, 6, 20).astype(np.float16)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    check_lowered(op, {"x": x}, attrs, opset=13, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    "op,x_shape,attrs",
    [
        ("AveragePool", (1, 2, 12, 20), {"kernel_shape": [9, 9], "pads": [2, 2, 2, 2],
                                         "count_include_pad": 1}),
        ("MaxPool", (1, 2, 12, 20), {"kernel_shape": [9, 9], "pads": [2, 2, 2, 2],
                                     "strides": [1, 2]}),
        ("AveragePool", (1, 2, 100), {"kernel_shape": [70], "pads": [2, 2]}),
    ],
)  # fmt: skip
def test_big_windows_loop(op, x_shape, attrs, rng):
    """Windows of more than 64 taps loop over their outer dims (not vectorized)."""
    check_lowered(op, {"x": randn(rng, *x_shape)}, attrs, opset=13, rtol=1e-5, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(op=st.sampled_from(POOLS), data=st.data())
def test_pool_random_2d(op, data):
    kernel = data.draw(st.lists(st.integers(1, 3), min_size=2, max_size=2))
    strides = data.draw(st.lists(st.integers(1, 3), min_size=2, max_size=2))
    pads = [data.draw(st.integers(0, k - 1)) for k in kernel * 2]
    size = [k + data.draw(st.integers(0, 20)) for k in kernel]
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads,
             "ceil_mode": data.draw(st.integers(0, 1))}  # fmt: skip
    if op == "AveragePool":
        attrs["count_include_pad"] = data.draw(st.integers(0, 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    check_lowered(op, {"x": randn(rng, 2, 3, *size)}, attrs, opset=13)


def test_axis_runs_split_interior_and_borders():
    runs = axis_runs(56, 112, 3, 2, 1, 1, 1, include_pad=False)  # the ResNet-50 stem
    assert [(r.first, r.stop, r.k_lo, r.k_hi, r.count) for r in runs] == [
        (0, 1, 1, 3, 2),
        (1, 56, 0, 3, 3),
    ]


@pytest.mark.parametrize(
    "op,x_shape,attrs,kinds",
    [
        ("MaxPool", (1, 16, 56, 56), {"kernel_shape": [3, 3], "strides": [2, 2],
                                      "pads": [1, 1, 1, 1]}, {"parallel", "vectorized"}),
        ("AveragePool", (2, 32, 28, 28), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
         {"parallel", "vectorized"}),
    ],
)  # fmt: skip
def test_large_pools_run_in_parallel(op, x_shape, attrs, kinds, rng):
    kernels = check_template(op, {"x": randn(rng, *x_shape)}, attrs, opset=13, epilogue=False)
    assert kinds <= loop_kinds(kernels)


def scratch_rows(kernels: list[Kernel]) -> list[Allocate]:
    return [n for k in kernels for n in walk(k.body) if isinstance(n, Allocate)]


@pytest.mark.parametrize("op", [*POOLS, "LpPool"])
@pytest.mark.parametrize(
    "x_shape,attrs",
    [
        ((1, 8, 27, 27), {"kernel_shape": [3, 3], "strides": [2, 2]}),  # squeezenet: 13 wide
        ((1, 4, 31, 31), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
        ((1, 3, 9, 45), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 1, 2, 0],
                         "dilations": [2, 1]}),  # begin pads differ from end pads
        ((1, 2, 3, 50, 33), {"kernel_shape": [2, 3, 3], "strides": [1, 2, 2]}),  # 3D
        ((1, 2, 4, 4), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [2, 2, 2, 2],
                        "ceil_mode": 1}),  # rows whose window lies wholly in the padding
    ],
)  # fmt: skip
def test_strided_pools_combine_columns_first(op, x_shape, attrs, rng):
    kernels = check_template(op, {"x": randn(rng, *x_shape)}, attrs, opset=19, epilogue=True)
    (line,) = scratch_rows(kernels)
    assert line.buffer.shape == (x_shape[-1],) and "vectorized" in loop_kinds(kernels)


def test_strided_1d_pools_and_long_rows_keep_the_plain_loop(rng, monkeypatch):
    attrs = {"kernel_shape": [3], "strides": [2]}
    kernels = check_template("MaxPool", {"x": randn(rng, 1, 4, 41)}, attrs, opset=13)
    assert not scratch_rows(kernels)
    monkeypatch.setattr(pool_cpu, "MAX_LINE", 40)  # rows of 41: the stack scratch would not fit
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2]}
    kernels = check_template("MaxPool", {"x": randn(rng, 1, 4, 5, 41)}, attrs, opset=13)
    assert not scratch_rows(kernels)


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # narrow tail, no overlap
        ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ],
)
def test_pool_epilogue(op, attrs, rng):
    check_template(op, {"x": randn(rng, 2, 3, 9, 45)}, attrs, opset=13, config=FORCE_PARALLEL)


@pytest.mark.parametrize("op", POOLS)
def test_pool_interpreted(op, rng):
    attrs = {"kernel_shape": [3, 3], "strides": [1, 2], "pads": [1, 1, 1, 1]}
    check_lowered(op, {"x": randn(rng, 1, 2, 5, 20)}, attrs, opset=13, use_interpreter=True)


# ---- global pools --------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 5, 6), (1, 4, 3, 2, 5), (1, 64, 7, 7),
                                   (1, 16, 40, 40)])  # fmt: skip
def test_global_pool(op, shape, rng):
    check_lowered(op, {"x": randn(rng, *shape)}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_epilogue_and_interpreted(op, rng):
    x = randn(rng, 2, 3, 5, 21)
    check_template(op, {"x": x}, opset=13, config=FORCE_PARALLEL)
    check_lowered(op, {"x": x}, use_interpreter=True)


# ---- LRN -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "attrs",
    [{"size": 3}, {"size": 5, "alpha": 1e-2, "beta": 0.6, "bias": 2.0}, {"size": 1},
     {"size": 5, "beta": 0.5}, {"size": 3, "beta": 1.0, "alpha": 0.1}],
)  # fmt: skip
def test_lrn(attrs, rng):
    check_lowered("LRN", {"x": randn(rng, 2, 7, 3, 37) * 3}, attrs, opset=13)


def test_lrn_large_epilogue_and_interpreted(rng):
    kernels = check_template("LRN", {"x": randn(rng, 1, 32, 40, 40)}, {"size": 5}, opset=13,
                             epilogue=False)  # fmt: skip
    assert {"parallel", "vectorized"} <= loop_kinds(kernels)
    check_template("LRN", {"x": randn(rng, 1, 5, 2, 19)}, {"size": 3}, opset=13)
    check_lowered("LRN", {"x": randn(rng, 1, 5, 2, 19)}, {"size": 3}, use_interpreter=True)


def test_lrn_even_size_follows_the_spec(rng):
    """onnxruntime rejects even sizes: compare with tvmc's reference (floor((size-1)/2) before)."""
    x = randn(rng, 1, 6, 2, 18)
    node = Node("LRN", ["x"], ["y"], {"size": 4, "alpha": 1e-2, "beta": 0.75, "bias": 1.0})
    (want,) = evaluate_node(node, [x])
    (got,) = run_node(node, [x], [TensorType.of(want)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_unit_shapes(rng):
    check_lowered("MaxPool", {"x": randn(rng, 1, 1, 1, 1)}, {"kernel_shape": [1, 1]}, opset=13)
    attrs = {"kernel_shape": [1, 3], "pads": [0, 1, 0, 1]}
    check_lowered("AveragePool", {"x": randn(rng, 1, 1, 1, 3)}, attrs, opset=13)
    check_lowered("GlobalAveragePool", {"x": randn(rng, 1, 3, 1, 1)})
    check_lowered("LRN", {"x": randn(rng, 1, 1, 1, 1)}, {"size": 3})


# ---- LpPool --------------------------------------------------------------------------------------
LP_WINDOWS = [
    ((1, 2, 7, 8), {"kernel_shape": [2, 2]}),
    ((2, 3, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 40), {"kernel_shape": [4], "pads": [2, 1]}),  # 1D, vectorized
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 3], "strides": [2, 2, 2]}),  # 3D
    ((1, 3, 9, 45), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # 43 = 32 + overlap
]


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("x_shape,attrs", LP_WINDOWS)
def test_lp_pool(p, x_shape, attrs, rng):
    check("LpPool", {"x": randn(rng, *x_shape)}, {**attrs, "p": p}, opset=18)


@pytest.mark.parametrize("opset", [11, 18, 22])
@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
def test_lp_pool_opsets_and_auto_pad(opset, auto_pad, rng):
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": auto_pad}
    if auto_pad == "NOTSET":
        attrs["pads"] = [1, 0, 1, 1]
    check("LpPool", {"x": randn(rng, 1, 2, 9, 8)}, attrs, opset=opset)  # p: the default 2


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("p", [1, 3])
def test_lp_pool_ceil_mode_and_dilations(ceil_mode, p, rng):
    """Opset 18 brought dilations and ceil_mode (the overhang adds nothing)."""
    attrs = {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [2, 1], "pads": [1, 0, 2, 1],
             "ceil_mode": ceil_mode, "p": p}  # fmt: skip
    check("LpPool", {"x": randn(rng, 1, 2, 10, 29)}, attrs, opset=18)
    ceil = {"kernel_shape": [3, 2], "strides": [2, 3], "ceil_mode": ceil_mode, "p": p}
    check("LpPool", {"x": randn(rng, 1, 2, 7, 8)}, ceil, opset=22)


def test_lp_pool_float16_big_windows_epilogue_and_interpreted(rng):
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    x16 = randn(rng, 1, 2, 6, 20).astype(np.float16)
    check("LpPool", {"x": x16}, attrs, opset=18, rtol=2e-3, atol=2e-3)
    big = {"kernel_shape": [9, 9], "pads": [2, 2, 2, 2], "p": 3}  # looped: over 64 taps
    check("LpPool", {"x": randn(rng, 1, 2, 12, 20)}, big, opset=18)
    x = randn(rng, 2, 3, 9, 45)
    check_template("LpPool", {"x": x}, attrs, opset=18, config=FORCE_PARALLEL)
    check("LpPool", {"x": x}, {**attrs, "p": 1}, opset=18, use_interpreter=True)
    cuda = {"target": LoweringTarget(kind="cuda")}
    check("LpPool", {"x": x}, {**attrs, "strides": [1, 2], "p": 3}, opset=18, **cuda)
    check("LpPool", {"x": x}, {"kernel_shape": [2, 3], "ceil_mode": 1, "strides": [2, 2]},
          opset=18, **cuda)  # fmt: skip


# ---- MaxPool's Indices output --------------------------------------------------------------------
@pytest.mark.parametrize(
    "x_shape,attrs",
    [
        ((1, 2, 7, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ((2, 3, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ((1, 2, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [0, 1, 1, 0],
                        "ceil_mode": 1}),
        ((1, 2, 10, 9), {"kernel_shape": [3, 2], "dilations": [2, 3], "pads": [1, 0, 2, 1]}),
        ((1, 2, 9), {"kernel_shape": [3], "strides": [2]}),  # 1D
        ((1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 3], "strides": [2, 2, 2]}),  # 3D
    ],
)  # fmt: skip
@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(x_shape, attrs, storage_order, rng):
    x = randn(rng, *x_shape)
    attrs = {**attrs, "storage_order": storage_order}
    check_lowered("MaxPool", {"x": x}, attrs, num_outputs=2, opset=12, expect="MaxPoolIndices")


def test_max_pool_indices_take_the_first_maximum_and_never_padding(rng):
    """Ties (int8 values from a few levels, all equal, all -inf) pick the first in ONNX's
    order, as onnxruntime does; the CUDA schedule interpreted agrees."""
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    ties = rng.integers(-2, 2, (1, 3, 7, 8)).astype(np.int8)
    check_lowered("MaxPool", {"x": ties}, attrs, num_outputs=2, opset=12)
    flat = np.full((1, 2, 5, 5), -np.inf, np.float32)
    check_lowered("MaxPool", {"x": flat}, attrs, num_outputs=2, opset=12)
    x = randn(rng, 2, 3, 9, 8)
    check_lowered("MaxPool", {"x": x}, {**attrs, "storage_order": 1}, num_outputs=2, opset=12,
                  target=LoweringTarget(kind="cuda"))  # fmt: skip
