"""Conv and ConvTranspose templates, compiled natively, against onnxruntime.

Every schedule (pixels, channels, depthwise) is forced through the attribute variants, and
shapes are chosen to hit each tail of the tilings: channels not a multiple of the tile, rows
not a multiple of the row block, rows cut in chunks, partial pixel chunks, partial vectors.
float32 tolerance: rtol 1e-4, atol 1e-5 (the kernels sum in a different order).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lowering_helpers import check_lowered, lower_node
from tests.onnx_helpers import assert_close, run_onnxruntime, single_node_model
from tvmc.codegen import CPUTarget, emit_cpu, load_shared
from tvmc.frontend import convert_model
from tvmc.graph import Node, TensorType
from tvmc.kernel import Buffer, Kernel, const, kernel_str, loop, maximum, seq
from tvmc.kernel.interpret import interpret
from tvmc.ops import OPS
from tvmc.ops.conv.cpu import (
    Core,
    default_limits,
    geometry_of,
    next_outer_step,
    plan,
    tiled_geometry,
)
from tvmc.ops.conv.cpu_tiles import (
    PACE_SLACK,
    Ahead,
    ChannelTiling,
    PixelTiling,
    paced_offset,
    remainder_pixels,
    remainder_rows,
)
from tvmc.ops.lowering import Epilogue, LowerContext, LoweringTarget, buffer_shape, ref_of_buffer
from tvmc.passes import IMPORT_PIPELINE, run_passes

TOL = {"rtol": 1e-4, "atol": 1e-5}


def randn(rng: np.random.Generator, *shape: int, dtype: Any = np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def lower_and_run(
    node: Node,
    arrays: list[np.ndarray],
    constant: list[bool],
    out_type: TensorType,
    config: Mapping[str, Any] | None = None,
    epilogue_extra: bool = False,
    target: CPUTarget | None = None,
    interpreted: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """(output, residual) of the node's template; with `epilogue_extra` the epilogue is
    relu(v + 0.5) + residual[idx], the residual read from another buffer at the same indices.
    `target`: lowered and compiled for that CPU (default: an AVX-512 lowering for this host).
    `interpreted`: run by the kernel interpreter, which checks every access and prefetch."""
    lowering = LoweringTarget(num_threads=2)
    if target is not None:
        lowering = LoweringTarget("cpu", target.vector_bits, 2, target.vector_registers)
    ctx = LowerContext(lowering, config or {})
    types = [TensorType.of(a) for a in arrays]
    bufs = [Buffer(f"in{i}", buffer_shape(t.shape), t.dtype) for i, t in enumerate(types)]
    refs = [
        ref_of_buffer(f"in{i}", t, b, a if c else None)
        for i, (t, b, a, c) in enumerate(zip(types, bufs, arrays, constant))
    ]
    out = Buffer("out", buffer_shape(out_type.shape), out_type.dtype)
    data = {b: np.ascontiguousarray(a).reshape(b.shape) for b, a in zip(bufs, arrays)}
    epilogue, residual = None, None
    if epilogue_extra:
        res_buf = Buffer("residual", out.shape, out.dtype)
        residual = np.random.default_rng(1).standard_normal(out.shape).astype(out.dtype)
        data[res_buf] = residual

        def apply(idx, v):
            return maximum(v + 0.5, 0.0) + res_buf[idx]

        epilogue = Epilogue(apply, (res_buf,), flat_planes=True)  # as the lowering's would be

    kernels = OPS[node.op].build(ctx, node.attrs, refs, [out], epilogue)
    data[out] = np.full(out.shape, np.nan, out.dtype)
    data.update(ctx.params)
    data.update({b: np.full(b.shape, np.nan, b.dtype) for b in ctx.temps})
    if interpreted:
        for k in kernels:
            interpret(k, *(data[b] for b in k.params))
        return data[out].reshape(out_type.shape), residual
    module = load_shared(emit_cpu(kernels, target))
    for k in kernels:
        module.run(k.name, *(data[b] for b in k.params))
    return data[out].reshape(out_type.shape), residual


def check_conv(
    op: str,
    x: np.ndarray,
    w: np.ndarray,
    attrs: Mapping[str, Any],
    bias: np.ndarray | None = None,
    config: Mapping[str, Any] | None = None,
    runtime_weight: bool = False,
    epilogue: bool = False,
    target: CPUTarget | None = None,
    tol: Mapping[str, float] = TOL,
    interpreted: bool = False,
) -> None:
    """One conv node through its template (for `target`, default this host; or the kernel
    interpreter) against onnxruntime."""
    inputs = {"x": x, **({"w": w} if runtime_weight else {})}
    constants = {
        **({} if runtime_weight else {"w": w}),
        **({"b": bias} if bias is not None else {}),
    }
    order = ["x", "w", *(["b"] if bias is not None else [])]
    model = single_node_model(op, inputs, attrs, constants, input_order=order)
    want = run_onnxruntime(model, inputs)[0]
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    (node,) = graph.nodes
    arrays = [x, w, *([bias] if bias is not None else [])]
    constant = [False, not runtime_weight, True][: len(arrays)]
    got, residual = lower_and_run(
        node, arrays, constant, graph.types[node.outputs[0]], config, epilogue, target, interpreted
    )
    if residual is not None:
        want = np.maximum(want + np.float32(0.5), 0) + residual
    assert_close(got, want, **tol)


CONV_CASES = [
    ((1, 3, 8, 8), (4, 3, 3, 3), {}),
    ((2, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 9, 7), (5, 3, 3, 2), {"pads": [0, 1, 2, 0], "strides": [2, 1]}),  # asymmetric
    ((1, 4, 11, 10), (6, 4, 3, 3), {"dilations": [2, 3], "pads": [2, 2, 2, 2]}),
    ((2, 4, 9, 7), (6, 2, 3, 3), {"group": 2, "strides": [2, 1], "dilations": [2, 1]}),
    ((1, 4, 6, 6), (5, 4, 1, 1), {}),
    ((1, 4, 9), (4, 4, 3), {"pads": [1, 2]}),  # 1D
    ((2, 6, 20), (6, 2, 5), {"group": 3, "strides": [3], "dilations": [2]}),
    ((1, 2, 5, 6, 7), (3, 2, 3, 3, 2), {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]}),  # 3D
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES)
@pytest.mark.parametrize("schedule", ["pixels", "channels"])
def test_conv_variants(x_shape, w_shape, attrs, schedule, rng):
    bias = randn(rng, w_shape[0]) if len(x_shape) != 3 else None
    check_conv(
        "Conv",
        randn(rng, *x_shape),
        randn(rng, *w_shape),
        attrs,
        bias,
        config={"schedule": schedule},
    )


@pytest.mark.parametrize(
    "x_shape,w_shape,attrs",
    [
        ((1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
        ((1, 4, 10, 10), (8, 1, 3, 3), {"group": 4, "strides": [2, 2]}),  # multiplier 2
        ((2, 5, 23, 9), (5, 1, 5, 3), {"group": 5, "pads": [2, 1, 0, 1], "dilations": [1, 2]}),
        ((1, 3, 41), (3, 1, 3), {"group": 3, "pads": [1, 1], "strides": [2]}),  # 1D
    ],
)
@pytest.mark.parametrize("schedule", ["depthwise", "pixels", "channels"])
def test_conv_depthwise(x_shape, w_shape, attrs, schedule, rng):
    check_conv(
        "Conv",
        randn(rng, *x_shape),
        randn(rng, *w_shape),
        attrs,
        randn(rng, w_shape[0]),
        config={"schedule": schedule},
    )


@pytest.mark.parametrize(
    "x_shape,w_shape,attrs,config",
    [
        # rows of 37 with padding columns: row blocks that do not divide the 40 rows
        ((1, 20, 40, 37), (17, 20, 3, 3), {"pads": [1, 1, 1, 1]}, {"schedule": "pixels"}),
        # channels 40 = 16 + 16 + 8: a partial channel vector; 37 pixels in chunks of 8
        (
            (1, 20, 40, 37),
            (40, 20, 3, 3),
            {"pads": [1, 1, 1, 1]},
            {"schedule": "channels", "tile_rows": 8},
        ),
        # a 1x1 conv read in place (no transform), 11 = 6 + 5 output channels
        ((1, 32, 16, 16), (11, 32, 1, 1), {}, {"schedule": "pixels"}),
        # a row of 150 pixels cut into two chunks
        ((1, 5, 3, 150), (7, 5, 1, 1), {}, {"schedule": "pixels", "tile_vectors": 6}),
        # 1x1 stride 2: one phase plane; 13x13 output rows in blocks
        ((1, 16, 26, 26), (24, 16, 1, 1), {"strides": [2, 2]}, {}),
        # pixel chunks of 5 over a row of 13 (last chunk 3 wide), 3 channel blocks
        (
            (1, 8, 13, 13),
            (48, 8, 3, 3),
            {"pads": [1, 1, 1, 1]},
            {"schedule": "channels", "tile_rows": 5, "tile_vectors": 1},
        ),
        # channels-outer tile order, tiny tiles
        (
            (2, 6, 9, 11),
            (10, 6, 3, 3),
            {"pads": [0, 1, 1, 0], "strides": [1, 2]},
            {
                "schedule": "pixels",
                "order": "channels_outer",
                "tile_rows": 3,
                "tile_vectors": 1,
            },
        ),
        # every tap unrolled (no kernel-row loop), both schedules, strided and grouped
        (
            (1, 6, 11, 12),
            (8, 3, 3, 5),
            {"group": 2, "strides": [2, 1], "pads": [1, 2, 1, 2]},
            {"unroll_taps": "all", "schedule": "channels"},
        ),
        (
            (1, 6, 11, 12),
            (8, 3, 3, 5),
            {"group": 2, "strides": [2, 1], "pads": [1, 2, 1, 2]},
            {"unroll_taps": "row", "schedule": "pixels"},
        ),
    ],
)
def test_conv_tails(x_shape, w_shape, attrs, config, rng):
    check_conv(
        "Conv",
        randn(rng, *x_shape),
        randn(rng, *w_shape),
        attrs,
        randn(rng, w_shape[0]),
        config=config,
    )


@pytest.mark.parametrize("schedule", ["pixels", "channels", "depthwise"])
def test_conv_runtime_weight(schedule, rng):
    group = 6 if schedule == "depthwise" else 2
    w = randn(rng, 6, 6 // group, 3, 3)
    check_conv(
        "Conv",
        randn(rng, 1, 6, 9, 10),
        w,
        {"pads": [1, 1, 1, 1], "group": group},
        randn(rng, 6),
        config={"schedule": schedule},
        runtime_weight=True,
    )


@pytest.mark.parametrize("schedule", ["pixels", "channels", "depthwise"])
def test_conv_epilogue(schedule, rng):
    group = 16 if schedule == "depthwise" else 1
    w = randn(rng, 16, 16 // group, 3, 3)
    check_conv(
        "Conv",
        randn(rng, 1, 16, 12, 13),
        w,
        {"pads": [1, 1, 1, 1], "group": group},
        randn(rng, 16),
        config={"schedule": schedule},
        epilogue=True,
    )


@pytest.mark.parametrize(
    "x_shape,w_shape,attrs",
    [
        ((1, 2, 5, 4), (2, 3, 3, 3), {}),
        ((2, 2, 5, 4), (2, 3, 3, 3), {"strides": [2, 3]}),
        ((1, 2, 5, 4), (2, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 1]}),
        (
            (1, 4, 5, 4),
            (4, 3, 3, 3),
            {
                "strides": [2, 3],
                "output_padding": [1, 2],
                "group": 2,
                "dilations": [1, 2],
                "pads": [1, 0, 0, 1],
            },
        ),
        ((1, 4, 5, 5), (4, 1, 3, 3), {"strides": [2, 2], "group": 4}),  # depthwise
        ((1, 2, 5, 4), (2, 3, 3, 3), {"strides": [2, 3], "output_shape": [9, 11]}),
        ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),  # > full
        ((1, 3, 7), (3, 2, 4), {"strides": [3], "output_padding": [2]}),  # 1D
        ((1, 2, 4, 3), (2, 3, 9, 9), {"strides": [2, 2]}),  # 20 columns per output: stuffed
        ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "pads": [0, 1, 0, 0, 1, 1]}),
    ],
)
def test_conv_transpose(x_shape, w_shape, attrs, rng):
    bias = randn(rng, w_shape[1] * attrs.get("group", 1))
    check_conv("ConvTranspose", randn(rng, *x_shape), randn(rng, *w_shape), attrs, bias)


# strided ConvTranspose runs as columns + gather (cpu_transpose): phases, edges, empty phases
STRIDED_TRANSPOSE = [
    ((1, 3, 6, 5), (3, 4, 2, 2), {"strides": [2, 2]}),  # U-Net's 2x2: one tap per output
    ((1, 3, 6, 5), (3, 4, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # 4 taps each
    ((2, 4, 5, 6), (4, 2, 3, 3), {"strides": [3, 2], "pads": [2, 0, 1, 1],
                                  "output_padding": [2, 1], "group": 2}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "dilations": [2, 2]}),  # odd phases: none
    ((1, 2, 3, 2), (2, 2, 2, 2), {"strides": [4, 5], "output_padding": [3, 1]}),  # bias only
    ((1, 2, 1, 1), (2, 3, 5, 5), {"strides": [2, 2], "pads": [2, 2, 2, 2]}),  # all edges
    ((1, 2, 1, 2), (2, 3, 4, 4), {"strides": [3, 3]}),  # shorter than the taps' reach
    ((1, 2, 4, 4), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [10, 9]}),
    ((1, 6, 5, 4), (6, 1, 3, 3), {"strides": [2, 2], "group": 6, "pads": [0, 1, 1, 0]}),
    ((1, 3, 2, 3, 4), (3, 2, 2, 2, 3), {"strides": [2, 2, 3], "pads": [0, 1, 0, 1, 0, 1]}),
    ((1, 3, 9), (3, 4, 5), {"strides": [2], "dilations": [3], "pads": [3, 1]}),  # 1-D
    ((1, 3, 3, 2), (3, 2, 8, 8), {"strides": [8, 8]}),  # patch un-embedding: 64 phases
]  # fmt: skip


@pytest.mark.parametrize("x_shape,w_shape,attrs", STRIDED_TRANSPOSE)
@pytest.mark.parametrize("bias,epilogue", [(False, False), (True, True)])
def test_conv_transpose_columns(x_shape, w_shape, attrs, bias, epilogue, rng):
    b = randn(rng, w_shape[1] * attrs.get("group", 1)) if bias else None
    x, w = randn(rng, *x_shape), randn(rng, *w_shape)
    check_conv("ConvTranspose", x, w, attrs, b, epilogue=epilogue)


def test_conv_transpose_columns_interpreted(rng):
    # the interpreter checks every access of the gather, edges included
    attrs = {"strides": [3, 2], "pads": [2, 0, 1, 1], "output_padding": [2, 1], "group": 2}
    check_lowered("ConvTranspose", {"x": randn(rng, 1, 4, 5, 6)}, attrs,
                  constants={"w": randn(rng, 4, 2, 3, 3)}, use_interpreter=True,
                  config={"in_place": False}, **TOL)  # fmt: skip


def test_strided_conv_transpose_skips_the_stuffed_zeros():
    """A 2x2 stride-2 ConvTranspose is a 1x1 conv over the input as it is (no transform kernel
    writing a zero-stuffed copy) and a gather: 4x fewer multiply-adds than the stuffed conv."""
    x = TensorType((1, 8, 16, 16), "float32")
    w = np.zeros((8, 4, 2, 2), np.float32)
    attrs = OPS["ConvTranspose"].normalize_attrs(
        {
            "kernel_shape": [2, 2],
            "strides": [2, 2],
            "pads": [0] * 4,
            "dilations": [1, 1],
            "output_padding": [0, 0],
        },
        "",
    )
    (out_type,) = OPS["ConvTranspose"].infer(attrs, [x, TensorType.of(w)])
    refs = [ref_of_buffer("x", x, Buffer("x", x.shape)),
            ref_of_buffer("w", TensorType.of(w), Buffer("w", w.shape), w)]  # fmt: skip
    ctx = LowerContext(LoweringTarget(num_threads=2), {})
    kernels = OPS["ConvTranspose"].build(ctx, attrs, refs, [Buffer("y", out_type.shape)], None)
    # the columns conv reads x in place, then the gather: no copy of x, stuffed or not
    assert [k.name.rsplit("_", 1)[-1] for k in kernels] == ["conv", "col2im"]
    (cols,) = ctx.temps
    assert cols.shape == (1, 4 * 4, 16, 16)  # (batch, out channels x taps, rows, columns)


def test_conv_transpose_runtime_weight(rng):
    check_conv(
        "ConvTranspose",
        randn(rng, 1, 4, 5, 4),
        randn(rng, 4, 3, 3, 3),
        {"strides": [2, 2], "group": 2, "pads": [1, 1, 0, 0]},
        runtime_weight=True,
    )


def test_conv_float64_against_reference(rng):
    x, w, b = (
        randn(rng, 1, 5, 9, 8, dtype=np.float64),
        randn(rng, 7, 5, 3, 3, dtype=np.float64),
        None,
    )
    model = single_node_model("Conv", {"x": x}, {"pads": [1, 1, 1, 1]}, {"w": w})
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    (node,) = graph.nodes
    got, _ = lower_and_run(node, [x, w], [False, True], graph.types[node.outputs[0]])
    want = OPS["Conv"].reference(node.attrs, x, w, b)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_conv_float16_accumulates_in_float32(rng):
    x, w = randn(rng, 1, 6, 9, 8, dtype=np.float16), randn(rng, 5, 6, 3, 3, dtype=np.float16)
    model = single_node_model("Conv", {"x": x}, {"pads": [1, 1, 1, 1]}, {"w": w})
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    (node,) = graph.nodes
    got, _ = lower_and_run(node, [x, w], [False, True], graph.types[node.outputs[0]])
    want = OPS["Conv"].reference(node.attrs, x, w)
    np.testing.assert_allclose(
        got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3
    )


@pytest.mark.parametrize(
    "x_shape,w_shape,attrs",
    [
        ((1, 3, 6, 5), (20, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
        ((1, 4, 5, 5), (4, 1, 3, 3), {"group": 4, "strides": [2, 2]}),
    ],
)
def test_conv_interpreted(x_shape, w_shape, attrs, rng):
    # the kernel IR interpreter checks every access: no read outside a buffer, even in slack
    check_lowered(
        "Conv",
        {"x": randn(rng, *x_shape)},
        attrs,
        constants={"w": randn(rng, *w_shape)},
        use_interpreter=True,
        **TOL,
    )


def test_conv_in_place_1x1_interpreted(rng):
    # the in-place 1x1 path reads whole rows through the last axis's flat offset, which the
    # interpreter allows within the buffer
    check_lowered(
        "Conv",
        {"x": randn(rng, 1, 4, 4, 4)},
        {},
        constants={"w": randn(rng, 5, 4, 1, 1)},
        use_interpreter=True,
        **TOL,
    )


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    data=st.data(),
    schedule=st.sampled_from(["pixels", "channels"]),
    group=st.sampled_from([1, 2]),
)
def test_conv_random_windows(data, schedule, group):
    # random 2-D windows against the numpy reference (itself checked against onnxruntime)
    k = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 4)), "kernel")
    s = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)), "strides")
    d = data.draw(st.tuples(st.integers(1, 2), st.integers(1, 2)), "dilations")
    pads = data.draw(st.lists(st.integers(0, 2), min_size=4, max_size=4), "pads")
    size = [data.draw(st.integers(d[i] * (k[i] - 1) + 1, 12), f"size{i}") for i in range(2)]
    rng = np.random.default_rng(0)
    x = randn(rng, 1, 2 * group, *size)
    w = randn(rng, 3 * group, 2, *k)
    attrs = {"kernel_shape": list(k), "strides": list(s), "dilations": list(d), "pads": pads,
             "group": group}  # fmt: skip
    model = single_node_model("Conv", {"x": x}, attrs, {"w": w})
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    (node,) = graph.nodes
    out_type = graph.types[node.outputs[0]]
    got, _ = lower_and_run(node, [x, w], [False, True], out_type, {"schedule": schedule})
    np.testing.assert_allclose(got, OPS["Conv"].reference(node.attrs, x, w), **TOL)


# ---- many stride phases (patch embeddings) -------------------------------------------------------
PATCH_CASES = [
    ((1, 3, 64, 48), (8, 3, 16, 16), {"strides": [16, 16]}),  # ViT's patchify, 256 phases
    ((1, 3, 50, 46), (8, 3, 8, 8), {"strides": [8, 8], "pads": [1, 2, 3, 4]}),
    ((1, 2, 40, 41), (4, 2, 4, 4), {"strides": [8, 6]}),  # phases but not every one read
    ((1, 2, 6, 30, 31), (3, 2, 3, 5, 5), {"strides": [1, 5, 5], "pads": [0, 1, 2, 1, 0, 0]}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", PATCH_CASES)
def test_conv_with_many_stride_phases(x_shape, w_shape, attrs, rng):
    """Convs whose input transform has more than MAX_UNROLLED_PHASES planes fill them with one
    loop over the phases: correct, and a transform kernel whose size does not grow with them."""
    x, w = randn(rng, *x_shape), randn(rng, *w_shape)
    check_conv("Conv", x, w, {"kernel_shape": list(w_shape[2:]), **attrs})
    check_lowered("Conv", {"x": x}, {"kernel_shape": list(w_shape[2:]), **attrs}, {"w": w},
                  use_interpreter=True, config={"in_place": False}, **TOL)  # fmt: skip


def patch_embedding_kernels(config: dict) -> list:
    """The kernels of ViT's patch embedding (16x16/16 3->768 @224) under `config`, AVX2."""
    x = TensorType((1, 3, 224, 224), "float32")
    w = np.zeros((768, 3, 16, 16), np.float32)
    attrs = OPS["Conv"].normalize_attrs(
        {"kernel_shape": [16, 16], "strides": [16, 16], "pads": [0] * 4, "dilations": [1, 1]}, ""
    )
    (out_type,) = OPS["Conv"].infer(attrs, [x, TensorType.of(w)])
    refs = [ref_of_buffer("x", x, Buffer("x", x.shape)), ref_of_buffer("w", TensorType.of(w),
            Buffer("w", w.shape), w)]  # fmt: skip
    ctx = LowerContext(LoweringTarget(vector_bits=256, num_threads=2, vector_registers=16), config)
    return OPS["Conv"].build(ctx, attrs, refs, [Buffer("y", out_type.shape)], None)


def test_patch_embedding_transform_is_one_loop_nest():
    """256 phase planes used to be 256 loop nests, which LLVM took minutes to optimise."""
    kernels = patch_embedding_kernels({"schedule": "channels", "phased": True})
    (transform,) = [k for k in kernels if "input" in k.name]
    assert len(kernel_str(transform).splitlines()) < 20


def test_unpadded_patch_embedding_reads_its_input_in_place():
    """Its channels tiles read the input unphased: unpadded, that is the input as it is."""
    kernels = patch_embedding_kernels({})
    assert not [k for k in kernels if "input" in k.name]


def conv_attrs(w_shape, attrs):
    """`attrs` with ONNX's defaults for a conv of weights `w_shape`, normalized."""
    n = len(w_shape) - 2
    onnx_defaults = {"kernel_shape": w_shape[2:], "strides": [1] * n, "pads": [0] * 2 * n,
                     "dilations": [1] * n, "group": 1}  # fmt: skip
    return OPS["Conv"].normalize_attrs({**onnx_defaults, **attrs}, "Conv")


def conv_geometry(x_shape, w_shape, attrs):
    """The geometry of a float32 conv of these shapes and (ONNX) attributes."""
    types = [TensorType(s, "float32") for s in (x_shape, w_shape)]
    return geometry_of("Conv", conv_attrs(w_shape, attrs), types)


def default_plan(x_shape, w_shape, attrs, constant_weights=False):
    """The plan an empty config gets on the AVX-512 target `lower_and_run` lowers for (by
    default the direct conv's: runtime weights leave Winograd out)."""
    full = conv_attrs(w_shape, attrs)
    geo = geometry_of("Conv", full, [TensorType(s, "float32") for s in (x_shape, w_shape)])
    target = LoweringTarget(num_threads=2)
    return plan({}, geo, target.lanes("float32"), target.vector_registers,
                constant_weights=constant_weights)  # fmt: skip


@pytest.mark.parametrize(
    "x_shape,w_shape,attrs,schedule,order",
    [
        # weights many times the input: channels_outer, for channels and for pixels tiles
        ((1, 32, 7, 7), (400, 32, 3, 3), {"pads": [1, 1, 1, 1]}, "channels", "channels_outer"),
        ((1, 256, 16, 16), (400, 256, 1, 1), {"strides": [2, 2]}, "pixels", "channels_outer"),
        # input larger than the weights, 40 channels in blocks of 6: pixels_outer
        ((1, 16, 30, 30), (40, 16, 3, 3), {"pads": [1, 1, 1, 1]}, "pixels", "pixels_outer"),
        # stride 2: the input is four phase planes of 15x15 per channel (14,400 floats against
        # 4,608 of weights; one phase plane alone, 3,600, would put the weights outer)
        ((1, 16, 28, 28), (32, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]},
         "pixels", "pixels_outer"),
        # 3 input channels (fewer than the 16 lanes): pixels tiles, channels_outer
        ((1, 3, 23, 23), (16, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]},
         "pixels", "channels_outer"),
        ((2, 3, 20, 20), (20, 3, 3, 3), {"pads": [1, 1, 1, 1]}, "pixels", "channels_outer"),
    ],
)  # fmt: skip
def test_conv_default_orders(x_shape, w_shape, attrs, schedule, order, rng):
    """The default plans `default_order` picks for resnet- and vgg-like shapes compute the conv."""
    chosen = default_plan(x_shape, w_shape, attrs)
    assert (chosen.schedule, chosen.order) == (schedule, order)
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    check_conv("Conv", x, w, attrs, b, config={"schedule": schedule})  # not Winograd


PREFETCH_CASES = [
    # 1x1 in place, 7x7 planes (resnet50's last stage, small)
    ((1, 64, 7, 7), (80, 64, 1, 1), {}),
    # 3x3 padded through the input transform, 3 channel blocks of 16 for channels tiles
    ((1, 20, 12, 12), (48, 20, 3, 3), {"pads": [1, 1, 1, 1]}),
    # grouped and strided, row chunks
    ((2, 8, 9, 40), (12, 4, 3, 3), {"group": 2, "strides": [2, 1], "pads": [1, 1, 1, 1]}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", PREFETCH_CASES)
@pytest.mark.parametrize("schedule", ["pixels", "channels"])
@pytest.mark.parametrize("order", ["pixels_outer", "channels_outer"])
def test_conv_prefetch_keeps_results(x_shape, w_shape, attrs, schedule, order, rng):
    """Fetching the next outer step's operand ahead (weights or input) changes no value."""
    config = {"schedule": schedule, "order": order, "prefetch": True, "tile_rows": 3}
    check_conv("Conv", randn(rng, *x_shape), randn(rng, *w_shape), attrs,
               randn(rng, w_shape[0]), config=config)  # fmt: skip


@pytest.mark.parametrize("order", ["pixels_outer", "channels_outer"])
@pytest.mark.parametrize("schedule", ["pixels", "channels"])
def test_conv_prefetch_interpreted(schedule, order, rng):
    # the interpreter reads each prefetched element: every address lies in its buffer
    check_lowered(
        "Conv",
        {"x": randn(rng, 1, 6, 9, 10)},
        {"pads": [1, 1, 1, 1]},
        constants={"w": randn(rng, 40, 6, 3, 3)},
        use_interpreter=True,
        config={"in_place": False, "prefetch": True, "schedule": schedule, "order": order,
                "tile_rows": 2},
        **TOL,
    )  # fmt: skip


def pointwise_conv_kernels(
    channels: int, out_channels: int, plane: int, config: Mapping[str, Any],
    epilogue: Epilogue | None = None, threads: int = 2,
) -> list:  # fmt: skip
    """The kernels of a 1x1 conv (zero weights) over one image of `plane` x `plane`, output
    buffer "y", built from `config`."""
    x = np.zeros((1, channels, plane, plane), np.float32)
    w = np.zeros((out_channels, channels, 1, 1), np.float32)
    node = Node("Conv", ["x", "w"], ["y"], OPS["Conv"].normalize_attrs(
        {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0] * 4, "dilations": [1, 1],
         "group": 1}, "Conv"))  # fmt: skip
    ctx = LowerContext(LoweringTarget(num_threads=threads), config)
    refs = [
        ref_of_buffer("x", TensorType.of(x), Buffer("x", x.shape, "float32"), None),
        ref_of_buffer("w", TensorType.of(w), Buffer("w", w.shape, "float32"), w),
    ]
    out = Buffer("y", (1, out_channels, plane, plane))
    return OPS["Conv"].build(ctx, node.attrs, refs, [out], epilogue)


def test_conv_prefetch_emits_llvm_prefetch():
    """The knob reaches the code: one prefetch per reduction step, none without it."""

    def text(config):
        kernels = pointwise_conv_kernels(64, 80, 7, config)
        return "\n".join(kernel_str(k) for k in kernels), emit_cpu(kernels).llvm_ir

    (ir_on, llvm_on), (ir_off, llvm_off) = text({"prefetch": True}), text({})
    assert "prefetch(" in ir_on and "prefetch(" not in ir_off
    assert "llvm.prefetch" in llvm_on and "llvm.prefetch" not in llvm_off


@pytest.mark.parametrize(
    "config",
    [
        {"schedule": "pixels", "tile_rows": 4, "order": "pixels_outer"},  # 2 rows a tile
        {"schedule": "pixels", "tile_rows": 4, "tile_vectors": 1},  # rows cut in chunks
        {"schedule": "pixels", "tile_rows": 4, "split": 2},  # fetched in the last chunk only
    ],
)
def test_pixel_tiles_fetch_the_epilogue_reads_ahead(config, rng):
    """A tile prefetches the residual lines its epilogue will read, each inside the residual
    (the interpreter checks every prefetch) and the result unchanged; 6 of 7 channels a tile
    and a row that ends in the middle of a vector exercise the clamps."""
    x, w, b = randn(rng, 1, 8, 5, 11), randn(rng, 7, 8, 1, 1), randn(rng, 7)
    check_conv("Conv", x, w, {}, b, config=config, epilogue=True, interpreted=True)
    check_conv("Conv", x, w, {}, b, config=config, epilogue=True)


def test_epilogue_reads_reach_the_tile_as_prefetches():
    residual = Buffer("residual", (1, 8, 6, 6))
    epilogue = Epilogue(lambda idx, v: v + residual[idx], (residual,))
    kernels = pointwise_conv_kernels(8, 8, 6, {"schedule": "pixels"}, epilogue, threads=1)
    assert "prefetch(residual" in "\n".join(kernel_str(k) for k in kernels)


@pytest.mark.parametrize(
    "x_shape,w_shape,cache_bytes,fetch",
    [
        # channels_outer: the weights (1 MB) against a core's cache
        ((1, 512, 7, 7), (512, 512, 1, 1), 512 << 10, True),
        ((1, 512, 7, 7), (512, 512, 1, 1), 2 << 20, False),
        # pixels_outer: the input (3.2 MB)
        ((1, 256, 56, 56), (64, 256, 1, 1), 1 << 20, True),
        ((1, 256, 56, 56), (64, 256, 1, 1), 4 << 20, False),
        # a cache of unknown size: never
        ((1, 256, 56, 56), (64, 256, 1, 1), 0, False),
    ],
)
def test_default_prefetch_where_the_outer_operand_outgrows_the_cache(
    x_shape, w_shape, cache_bytes, fetch
):
    chosen = default_plan(x_shape, w_shape, {})
    n = len(w_shape) - 2
    full = OPS["Conv"].normalize_attrs({"kernel_shape": w_shape[2:], "strides": [1] * n,
                                        "pads": [0] * 2 * n, "dilations": [1] * n, "group": 1},
                                       "Conv")  # fmt: skip
    geo = geometry_of("Conv", full, [TensorType(s, "float32") for s in (x_shape, w_shape)])
    with_cache = plan({}, geo, 16, 32, cache_bytes // 4)
    assert with_cache.prefetch == fetch
    assert with_cache.order == chosen.order  # the cache moves nothing else
    assert plan({"prefetch": not fetch}, geo, 16, 32, cache_bytes // 4).prefetch == (not fetch)


@pytest.mark.parametrize("x_shape,w_shape,attrs", PREFETCH_CASES)
@pytest.mark.parametrize("schedule", ["pixels", "channels"])
@pytest.mark.parametrize("order", ["pixels_outer", "channels_outer"])
def test_conv_split_reduction_keeps_results(x_shape, w_shape, attrs, schedule, order, rng):
    """A reduction cut into chunks of input channels (sums kept between runs of the tile loop,
    bias and epilogue in the last) computes the conv, with and without prefetches."""
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    for split, fetch in ((2, False), (4, True)):
        config = {"schedule": schedule, "order": order, "split": split, "prefetch": fetch,
                  "tile_rows": 3}  # fmt: skip
        check_conv("Conv", x, w, attrs, b, config=config)
        check_conv("Conv", x, w, attrs, b, config=config, epilogue=True)


@pytest.mark.parametrize("channels", [640, 624])  # 40 blocks in 8 groups; 39 (the last short)
def test_conv_split_chunks_inside_channel_blocks_keep_results(channels, rng):
    """With many channel blocks a split channels_outer loop runs its chunks inside groups of
    blocks (one parallel loop over the groups, `_tile_loop`): still the conv, epilogue included."""
    x, w, b = randn(rng, 1, 32, 5, 5), randn(rng, channels, 32, 1, 1), randn(rng, channels)
    for fetch in (False, True):
        config = {"schedule": "channels", "order": "channels_outer", "split": 4,
                  "prefetch": fetch, "tile_vectors": 1, "tile_rows": 3}  # fmt: skip
        check_conv("Conv", x, w, {}, b, config=config)
        check_conv("Conv", x, w, {}, b, config=config, epilogue=True)


@pytest.mark.parametrize("schedule", ["pixels", "channels"])
def test_conv_split_reduction_interpreted(schedule, rng):
    # every partial-sum access lies in its temp; the chunks add up in the interpreter too
    check_lowered(
        "Conv",
        {"x": randn(rng, 1, 6, 9, 10)},
        {"pads": [1, 1, 1, 1]},
        constants={"w": randn(rng, 40, 6, 3, 3), "b": randn(rng, 40)},
        use_interpreter=True,
        config={"in_place": False, "schedule": schedule, "split": 3, "tile_rows": 2},
        **TOL,
    )


def test_conv_split_chunks_inside_block_groups_interpreted(rng):
    """Every access of chunks run inside groups of channel blocks lies in its buffer: 9 blocks
    (the last partial) in groups of 2, the last group one block short."""
    config = {"in_place": False, "schedule": "channels", "order": "channels_outer",
              "split": 3, "tile_vectors": 1, "tile_rows": 3}  # fmt: skip
    constants = {"w": randn(rng, 136, 6, 1, 1), "b": randn(rng, 136)}
    x = {"x": randn(rng, 1, 6, 5, 5)}
    check_lowered("Conv", x, {}, constants=constants, use_interpreter=True, config=config, **TOL)


def test_conv_split_knob_falls_back_where_it_cannot_apply():
    """A split that does not divide the input channels, or of a depthwise conv, runs unsplit."""
    geo = conv_geometry((1, 24, 7, 7), (64, 24, 1, 1), {})
    assert plan({"split": 5}, geo, 16, 32).split == 1
    assert plan({"split": 0}, geo, 16, 32).split == 1
    assert plan({"split": 4}, geo, 16, 32).split == 4
    dw = conv_geometry((1, 24, 7, 7), (24, 1, 3, 3), {"group": 24})
    assert plan({"split": 2}, dw, 16, 32).split == 1


@pytest.mark.parametrize(
    "x_shape,w_shape,cache_bytes,lanes,split",
    [
        # channels_outer reads the input (1024 x 196 floats, 800 KB) once per channel block:
        # 4 chunks of 256 channels (200 KB) fit half of a 512 KB cache, 1 of a 2 MB one
        ((1, 1024, 14, 14), (512, 1024, 1, 1), 512 << 10, 8, 4),
        ((1, 1024, 14, 14), (512, 1024, 1, 1), 2 << 20, 8, 1),
        # 3x3 512->512 @7 in 4x3 tiles: a channel block's weights (24 x 512 x 9 floats)
        # outgrow the cache
        ((1, 512, 7, 7), (512, 512, 3, 3), 512 << 10, 8, 4),
        # a short reduction is never cut (chunks of fewer than MIN_CHUNK_STEPS steps)
        ((1, 32, 112, 112), (64, 32, 1, 1), 64 << 10, 8, 1),
        # a cache of unknown size: never
        ((1, 1024, 14, 14), (512, 1024, 1, 1), 0, 8, 1),
    ],
)  # fmt: skip
def test_default_split_where_the_inner_operand_outgrows_the_cache(
    x_shape, w_shape, cache_bytes, lanes, split
):
    geo = conv_geometry(x_shape, w_shape, {"pads": [1, 1, 1, 1]} if w_shape[-1] == 3 else {})
    knobs = {"schedule": "channels", "tile_vectors": 3, "tile_rows": 4} if w_shape[-1] == 3 else {
        "schedule": "pixels"}  # fmt: skip
    chosen = plan(knobs, geo, lanes, 16, cache_bytes // 4)
    assert chosen.split == split and geo.icg % split == 0


def test_default_split_leaves_pointwise_pixel_tiles_whole_where_they_fit_the_cache():
    """A pointwise conv's pixels tiles, pixels_outer, stream all the weights for every tile:
    resnet50's 1x1 512->128 @28 (AVX-512 3x7 tiles, ~706 KB of weights and a tile's input) runs
    unsplit on a 1 MB cache (Zen 4: 97.7% of the peak against 95.4% in two chunks); on 512 KB
    they fit only in chunks, which fit half of it as before."""
    geo = conv_geometry((1, 512, 28, 28), (128, 512, 1, 1), {})

    def chosen(cache_kb: int):
        return plan({}, geo, 16, 32, (cache_kb << 10) // 4)

    assert chosen(1024).tiling == PixelTiling(4, 1, 7, 3) and chosen(1024).order == "pixels_outer"
    assert chosen(1024).split == 1 and chosen(512).split == 4


def test_default_split_counts_what_a_channels_tile_reads_of_strided_planes():
    """A pixels_outer channels tile of a 3x3/2 conv reads MR positions at each of 9 taps of a
    channel's four phase planes, not the ~2,500 positions between its first and last tap:
    resnet50's 3x3/2 128 @56 (6x2 through the rows) splits in 4 on a 512 KB cache, not 8."""
    geo = conv_geometry((1, 128, 56, 56), (128, 128, 3, 3),
                        {"pads": [1, 1, 1, 1], "strides": [2, 2]})  # fmt: skip
    cfg = {"plan": ["channels", 2, 6, "pixels_outer", "all", "flat"]}
    chosen = plan(cfg, geo, 8, 16, (512 << 10) // 4)
    assert chosen.tiling == ChannelTiling(6, 2, True) and geo.max_tap_offset > 2000
    assert chosen.split == 4


def test_default_split_keeps_a_chunk_of_weights_in_l1_where_l2_feeds_slowly():
    """A 4x3 AVX2 channels tile asks ~27 bytes a cycle of weights and input; a Zen 3 L2 moves
    32 at best (~17 sustained): the chunk's weights of a channel block (24 channels) fit a
    quarter of its 32 KB L1 at 64 channels, 8 chunks of resnet50's 1x1 512->2048 @7 (95% of
    the peak against 69% unsplit). Where the L2 moves 64 (Zen 4, Intel) or is not known, or
    with too few channel blocks per thread, the L2 rule alone: unsplit."""
    geo = conv_geometry((1, 512, 7, 7), (2048, 512, 1, 1), {})
    tile = {"schedule": "channels", "order": "channels_outer", "tile_vectors": 3, "tile_rows": 4}
    l2 = (512 << 10) // 4

    def split(core):
        return plan(tile, geo, 8, 16, l2, core=core).split

    assert split(Core(32 << 10, 16, 2)) == 8
    assert split(Core(32 << 10, 32, 2)) == split(Core()) == split(Core(32 << 10, 16, 32)) == 1


def test_default_split_keeps_a_chunk_of_input_in_l1_where_it_can():
    """resnet50's 1x1 2048->512 @7 (AVX2 5x2 tiles, 16-channel blocks): 128-channel chunks put
    a block's weights in a quarter of L1, but their 25 KB of input and two blocks' 8 KB of
    weights overflow 32 KB; 64-channel chunks fit, so that the input stays in L1 over a group's
    blocks (97% of the Zen 3's peak against 85-88%). 1024->256 @14's input chunk (196 pixels a
    channel) fits in L1 only below 64 channels: it keeps the weights rule's chunks."""
    tile = {"schedule": "channels", "order": "channels_outer", "tile_vectors": 2, "tile_rows": 5}
    l2, core = (512 << 10) // 4, Core(32 << 10, 16, 2)
    deep = conv_geometry((1, 2048, 7, 7), (512, 2048, 1, 1), {})
    wide = conv_geometry((1, 1024, 14, 14), (256, 1024, 1, 1), {})
    assert plan(tile, deep, 8, 16, l2, core=core).split == 32
    assert plan(tile, wide, 8, 16, l2, core=core).split == 8


def test_default_prefetch_of_multi_tap_channel_tiles():
    """A channels tile of a 3x3 conv fetches the next block's weights ahead by default where it
    leaves a register spare (two for a step of more than 9 taps) and an outer step has few
    tiles a fetched line; never the 4x3 AVX2 tile (all 16 registers), nor the input ahead of
    a pixels_outer loop on 16 registers. 1x1 tiles and AVX-512 tiles keep the cache rule."""
    three = conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), {"pads": [1, 1, 1, 1]})
    five = conv_geometry((1, 512, 7, 7), (512, 512, 5, 5), {"pads": [2, 2, 2, 2]})
    wide = conv_geometry((1, 96, 54, 54), (256, 96, 5, 5), {"pads": [2, 2, 2, 2],
                                                             "strides": [2, 2]})  # fmt: skip
    one = conv_geometry((1, 512, 7, 7), (2048, 512, 1, 1), {})
    cache = (512 << 10) // 4
    channels = {"schedule": "channels", "order": "channels_outer"}

    def fetches(cfg, geo, lanes=8, registers=16, cache=cache):
        return plan({**channels, **cfg}, geo, lanes, registers, cache).prefetch

    spare = plan(channels, three, 8, 16, cache)
    assert (spare.tiling.mr, spare.tiling.nv, spare.unroll_taps) == (5, 2, "all")
    assert spare.prefetch  # 5x2: three registers spare
    assert not fetches({"tile_vectors": 3, "tile_rows": 4}, three)  # 4x3: none spare
    assert fetches({"tile_vectors": 2, "tile_rows": 6}, three)  # 6x2, a 9-tap step: one
    flat = ["channels", 2, 5, "channels_outer", "all", "flat"]
    assert plan({"plan": flat}, five, 8, 16, cache).tiling == ChannelTiling(5, 2, True)
    assert fetches({"plan": flat}, five)  # 5x2, a 25-tap step
    six = conv_geometry((1, 96, 26, 26), (256, 96, 5, 5), {"pads": [2, 2, 2, 2]})
    assert plan({"plan": [*flat[:2], 6, *flat[3:]]}, six, 8, 16, cache).tiling.mr == 6
    assert not fetches({"plan": [*flat[:2], 6, *flat[3:]]}, six)  # 6x2, a 25-tap step
    rows = {"plan": ["channels", 2, 5, "channels_outer", "none"]}  # 162 tiles a 1-line step
    assert plan(rows, wide, 8, 16, cache).tiling.chunks(wide) * 27 == 162
    assert not fetches(rows, wide)
    assert fetches({**rows, "plan": [*rows["plan"][:4], "all"]}, wide)  # a 25-line step
    assert not fetches({"order": "pixels_outer"}, three, cache=1)
    assert fetches({"order": "pixels_outer"}, three, 16, 32, cache=1)
    assert fetches({}, three, 16, 32)
    assert fetches({}, one)


AVX2 = CPUTarget.parse("llvm -mcpu=znver3")  # AVX2 and FMA, no AVX-512: 8 lanes, 16 registers


@pytest.mark.skipif(CPUTarget.host().vector_bits < 256, reason="AVX2 code does not run here")
@pytest.mark.parametrize(
    "x_shape,w_shape,attrs,schedule,tile,flat",
    [
        # 6 rows of 56 read as one row of 336 (pointwise): 14 tiles of 3 vectors, 4 channels
        # (was 6 x 2 in 4 chunks of each row, 14 of 16 lanes used, and one row of 1 x 7 before)
        ((1, 16, 6, 56), (64, 16, 1, 1), {}, "pixels", (4, 3), False),
        # 2 vectors of channels x 6 pixels of the 14x14 planes as one row: 196 of 198 pixels
        # useful (5-pixel tiles in rows of 14: 14 of 15; 14x1 before that spilled)
        ((1, 256, 14, 14), (64, 256, 3, 3), {"pads": [1, 1, 1, 1]}, "channels", (6, 2), True),
        # one 28-pixel row x 2 vectors of channels, 6 pixels per tile: the last tile partly
        # outside; 6 such rows as one row: 28 whole tiles
        ((1, 64, 1, 28), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, "channels", (6, 2), False),
        ((1, 64, 6, 28), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, "channels", (6, 2), True),
        # 7x7 planes: 5-pixel tiles over the planes as one row, 49 of 50 useful (4x3 in rows: 7
        # of 8), the last tile's spare pixel a repeat
        ((1, 64, 7, 7), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, "channels", (5, 2), True),
    ],
)  # fmt: skip
def test_conv_avx2_default_tiles(x_shape, w_shape, attrs, schedule, tile, flat, rng):
    """AVX2 code of the default plans computes the conv (it runs on any AVX2 host)."""
    geo = geometry_of("Conv", conv_attrs(w_shape, attrs),
                      [TensorType(s, "float32") for s in (x_shape, w_shape)],
                      LoweringTarget.of_cpu(AVX2, 2))  # fmt: skip
    chosen = plan({}, geo, AVX2.vector_bits // 32, AVX2.vector_registers, constant_weights=False)
    got = (chosen.tiling.mr, chosen.tiling.nv), getattr(chosen.tiling, "flat", False)
    assert (chosen.schedule, *got) == (schedule, tile, flat)
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    # sums of up to 2304 products of unit normals (|sum| ~ 50) in another order than
    # onnxruntime's: float32 rounding reaches ~1e-4 absolute
    tol = {"rtol": 1e-4, "atol": 3e-4}
    direct = {"schedule": schedule}  # the 3x3 ones run as Winograd by default
    check_conv("Conv", x, w, attrs, b, target=AVX2, tol=tol, config=direct)
    check_conv("Conv", x, w, attrs, b, target=AVX2, epilogue=True, tol=tol, config=direct)


PADDED = {"pads": [1, 1, 1, 1]}
FLAT_CASES = [
    # 7x7 planes in 5-pixel tiles: 49 = 9 x 5 + 4, the last tile one of 4 pixels
    ((2, 16, 7, 7), (24, 16, 3, 3), PADDED, {}),
    # stride 2 (four phase planes), a partial channel vector (20 of 24 channels)
    ((1, 8, 13, 13), (20, 8, 3, 3), {**PADDED, "strides": [2, 2]}, {}),
    # a reduction split in 4 chunks of 8 channels
    ((1, 32, 7, 7), (64, 32, 3, 3), PADDED, {"split": 4, "order": "channels_outer"}),
    # pixels_outer, each tile fetching the next one's input ahead
    ((1, 16, 9, 9), (16, 16, 3, 3), PADDED, {"order": "pixels_outer", "prefetch": True}),
    # grouped; 3-D (planes of 3 x 7 x 7)
    ((1, 8, 7, 7), (32, 4, 3, 3), {**PADDED, "group": 2}, {}),
    ((1, 4, 3, 7, 7), (16, 4, 1, 3, 3), {"pads": [0, 1, 1, 0, 1, 1]}, {}),
    # 7x7: a kernel row a step by default (49 taps in one spilled), the step table's offsets
    ((1, 8, 9, 9), (16, 8, 7, 7), {"pads": [3, 3, 3, 3]}, {}),
]


@pytest.mark.skipif(CPUTarget.host().vector_bits < 256, reason="AVX2 code does not run here")
@pytest.mark.parametrize("x_shape,w_shape,attrs,config", FLAT_CASES)
def test_flat_channel_tiles(x_shape, w_shape, attrs, config, rng):
    """Channel tiles over the output planes as one row (each pixel reading the input at its own
    plane position) compute the conv, with and without an epilogue (AVX2, 5-pixel tiles)."""
    knobs = {"schedule": "channels", "tile_rows": 5, "tile_vectors": 2, **config}
    geo = geometry_of("Conv", conv_attrs(w_shape, attrs),
                      [TensorType(s, "float32") for s in (x_shape, w_shape)],
                      LoweringTarget.of_cpu(AVX2, 2))  # fmt: skip
    chosen = plan(knobs, geo, 8, 16)
    assert chosen.tiling.flat and chosen.tiling.mr == 5
    assert not plan(knobs, geo, 8, 16, flat_rows=False).tiling.flat
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    check_conv("Conv", x, w, attrs, b, target=AVX2, config=knobs)
    check_conv("Conv", x, w, attrs, b, target=AVX2, epilogue=True, config=knobs)


UNPHASED = {"schedule": "channels", "phased": False}
UNPHASED_CASES = [
    # flat 5-pixel tiles, the last one of 4 pixels
    ((1, 8, 13, 13), (20, 8, 3, 3), {**PADDED, "strides": [2, 2]}, {"tile_rows": 5}),
    # tiles within rows (rows of 7: 3-pixel tiles, the last one of 1 pixel)
    ((2, 8, 13, 13), (16, 8, 3, 3), {**PADDED, "strides": [2, 2]},
     {"tile_rows": 3, "tile_vectors": 1, "plan": ("channels", 1, 3, "channels_outer", "all")}),
    # pixels_outer, each tile fetching the next one's input ahead; a split reduction
    ((1, 16, 15, 15), (16, 16, 3, 3), {**PADDED, "strides": [2, 2]},
     {"order": "pixels_outer", "prefetch": True, "tile_rows": 4}),
    ((1, 32, 9, 9), (24, 32, 3, 3), {**PADDED, "strides": [2, 2]},
     {"split": 4, "order": "channels_outer", "prefetch": True}),
    # strides (3, 2) and a dilation; 1-D; 3-D; grouped
    ((1, 4, 17, 16), (8, 4, 3, 3), {"pads": [2, 1, 2, 1], "strides": [3, 2],
                                    "dilations": [2, 1]}, {}),
    ((1, 6, 29), (8, 6, 5), {"pads": [2, 2], "strides": [4]}, {}),
    ((1, 4, 5, 9, 9), (8, 4, 3, 3, 3), {"pads": [1] * 6, "strides": [2, 2, 2]}, {}),
    ((1, 8, 11, 11), (16, 4, 3, 3), {**PADDED, "strides": [2, 2], "group": 2}, {}),
    # a kernel row a step, one tap a step (the steps' offsets from the table)
    ((1, 3, 23, 23), (16, 3, 7, 7), {"pads": [3] * 4, "strides": [4, 4]}, {"unroll_taps": "row"}),
    ((1, 4, 11, 11), (8, 4, 3, 3), {**PADDED, "strides": [2, 2]}, {"unroll_taps": "none"}),
    # kernel = stride, unpadded: the input read in place (a patch embedding)
    ((1, 3, 16, 16), (12, 3, 4, 4), {"strides": [4, 4]}, {}),
    # unpadded, the window not reaching the input's last row and column: a copy
    ((1, 4, 12, 12), (8, 4, 3, 3), {"strides": [2, 2]}, {}),
]  # fmt: skip


@pytest.mark.parametrize("x_shape,w_shape,attrs,config", UNPHASED_CASES)
def test_unphased_channel_tiles_compute_the_conv(x_shape, w_shape, attrs, config, rng):
    """Channels tiles reading the input padded but not split into stride phases (its output
    pixels `stride` apart): the same results interpreted (every access checked, the prefetches
    too), compiled, with an epilogue and as AVX2 code."""
    check_conv_everywhere(x_shape, w_shape, attrs, {**UNPHASED, **config}, rng)


def test_strided_avx2_channel_tiles_read_the_input_unphased_by_default():
    """On 16-register targets a strided channels tile reads the padded input (one plane a
    channel); a stride-1 one, a pixels tile and an AVX-512 tile keep the phases."""

    def chosen(w_shape, attrs, config, registers=16):
        geo = geometry_of("Conv", conv_attrs(w_shape, attrs),
                          [TensorType(s, "float32") for s in ((1, 64, 28, 28), w_shape)],
                          LoweringTarget.of_cpu(AVX2, 2))  # fmt: skip
        return plan(config, geo, 8 if registers == 16 else 16, registers)

    strided = {**PADDED, "strides": [2, 2]}
    w = (64, 64, 3, 3)
    assert not chosen(w, strided, {"schedule": "channels"}).phased
    assert chosen(w, strided, {"schedule": "channels"}, registers=32).phased
    assert chosen(w, PADDED, {"schedule": "channels"}).phased
    assert chosen(w, strided, {"schedule": "pixels", "phased": False}).phased
    assert chosen(w, strided, {"schedule": "channels", "phased": True}).phased
    assert chosen((64, 64, 1, 1), {"strides": [2, 2]}, {"schedule": "channels"}).phased


def test_flat_channel_tiles_over_short_rows_fetching_weights_ahead_keep_the_phases():
    """A flat tile over output rows shorter than two tiles that fetches its weights ahead
    reads the phases (resnet50's 3x3/2 512 @14: 5-pixel tiles over rows of 7); without the
    prefetch, over rows of two tiles or more, or with no register spare for the prefetch
    (4x3), the padded input."""

    def chosen(x_shape, out_channels, **config):
        geo = conv_geometry(x_shape, (out_channels, x_shape[1], 3, 3),
                            {**PADDED, "strides": [2, 2]})  # fmt: skip
        return plan({"schedule": "channels", **config}, geo, 8, 16, cache_elements=1 << 17)

    def summary(p):
        return p.tiling, p.prefetch, p.phased

    assert summary(chosen((1, 512, 14, 14), 512)) == (ChannelTiling(5, 2, True), True, True)
    assert not chosen((1, 512, 14, 14), 512, prefetch=False).phased
    # 6-pixel tiles over rows of 14; a 4x3 tile (no spare register)
    assert summary(chosen((1, 256, 28, 28), 256)) == (ChannelTiling(6, 2, True), True, False)
    assert summary(chosen((1, 128, 14, 14), 192)) == (ChannelTiling(4, 3, True), False, False)


def test_avx2_pixel_tiles_unroll_a_kernel_row_by_default():
    """On 16-register targets a pixels tile steps a kernel row at a time (vgg19's 3->64, the
    7x7/2 first convs); a one-tap row, AVX-512, depthwise and channels tiles in rows do not."""

    def unroll(x_shape, w_shape, attrs, config, registers=16):
        geo = conv_geometry(x_shape, w_shape, attrs)
        return plan(config, geo, 8 if registers == 16 else 16, registers).unroll_taps

    pixels = {"schedule": "pixels"}
    assert unroll((1, 3, 32, 32), (64, 3, 3, 3), PADDED, pixels) == "row"
    assert unroll((1, 3, 32, 32), (64, 3, 7, 7), {"pads": [3] * 4, "strides": [2, 2]},
                  pixels) == "row"  # fmt: skip
    assert unroll((1, 3, 32, 32), (64, 3, 3, 3), PADDED, pixels, registers=32) == "none"
    assert unroll((1, 16, 32, 32), (64, 16, 1, 1), {}, pixels) == "none"
    assert unroll((1, 16, 8, 8), (64, 16, 3, 1), {"pads": [1, 0, 1, 0]}, pixels) == "none"
    assert unroll((1, 8, 16, 16), (8, 1, 3, 3), {**PADDED, "group": 8}, {}) == "none"
    rows = {"schedule": "channels", "flat_rows": False}
    assert unroll((1, 16, 14, 14), (64, 16, 3, 3), PADDED, rows) == "none"


def test_flat_tiles_and_their_unrolled_taps_by_registers():
    """A flat channels tile unrolls every tap of a step up to 25 on 16-register targets (AVX2),
    a kernel row a step beyond (7x7: 18 ymm values spilled a step with all 49); 32-register
    targets (AVX-512) take flat multi-tap tiles only for kernels of up to 9 taps, of up to
    MAX_FLAT_TAP_ROWS pixels (zfnet512's 5x5/2 as a flat 14x2 tile spilled 403 zmm values a
    step): tiles within rows otherwise."""

    def conv(c, k, size, out=64, stride=1):
        return conv_geometry((1, c, size, size), (out, c, k, k),
                             {"pads": [k // 2] * 4, "strides": [stride] * 2})  # fmt: skip

    avx2_five = plan({"schedule": "channels", "tile_rows": 6, "tile_vectors": 2},
                     conv(64, 5, 13), 8, 16)  # fmt: skip
    assert avx2_five.tiling.flat and avx2_five.unroll_taps == "all"
    avx2_seven = plan({"schedule": "channels", "tile_rows": 6, "tile_vectors": 2},
                      conv(64, 7, 13), 8, 16)  # fmt: skip
    assert avx2_seven.tiling.flat and avx2_seven.unroll_taps == "row"
    zfnet = conv_geometry((1, 96, 54, 54), (256, 96, 5, 5), {"strides": [2, 2]})
    wide = plan({"schedule": "channels"}, zfnet, 16, 32)
    assert not wide.tiling.flat and wide.unroll_taps == "none"
    two_vectors = {"schedule": "channels", "tile_rows": 14, "tile_vectors": 2}
    three = plan(two_vectors, conv(64, 3, 15, 256), 16, 32)  # 225 pixels: 9 x 25 (was 14 x 17)
    assert three.tiling == ChannelTiling(9, 2, True) and three.unroll_taps == "all"


def test_avx2_flat_tiles_where_rows_leave_a_smaller_tile():
    """On 16 registers a flat channels tile is taken where it models FLAT_DENSITY_GAIN more
    throughput than the tile within rows, though it fills no more lanes: alexnet's 5x5 convs
    @26 as 6x2 over the planes (rows of 26 as 2x4: 72% of the Zen 3's peak against 95%), not
    zfnet512's 5x5/2 @25 (5x2 fills its rows; 6x2 flat models 1.04x more); AVX-512 keeps the
    lanes rule alone."""
    alexnet = conv_geometry((1, 96, 26, 26), (256, 48, 5, 5), {"pads": [2] * 4, "group": 2})
    assert plan({"schedule": "channels"}, alexnet, 8, 16).tiling == ChannelTiling(6, 2, True)
    rows = plan({"schedule": "channels"}, alexnet, 8, 16, flat_rows=False)
    assert rows.tiling == ChannelTiling(2, 4)
    zfnet = conv_geometry((1, 96, 54, 54), (256, 96, 5, 5), {"strides": [2, 2]})
    assert plan({"schedule": "channels"}, zfnet, 8, 16).tiling == ChannelTiling(5, 2)
    fcos = conv_geometry((1, 24, 4, 4), (24, 24, 3, 3), {"pads": [1] * 4})  # 8x2 flat: 1.33x
    assert plan({"schedule": "channels"}, fcos, 16, 32).tiling == ChannelTiling(4, 2)


def test_flat_channel_tiles_interpreted(rng):
    """Every read and store of a flat channel tile lies in its buffer (the interpreter checks
    each access; the last tile's spare pixels neither read past the input nor store)."""
    x_shape, w_shape = (1, 6, 7, 7), (16, 6, 3, 3)
    knobs = {"schedule": "channels", "tile_rows": 5, "tile_vectors": 1, "in_place": False}
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    check_conv("Conv", x, w, PADDED, b, config=knobs, interpreted=True)


def test_pointwise_pixel_tiles_that_outrun_the_l2_leave_for_channel_tiles():
    """On two 512-bit FMA pipes (Zen 5: 64 flops a cycle, 48 KB L1, L2 sustaining 32 bytes a
    cycle into it) an AVX-512 3x7 pixels tile asks 43 bytes a cycle of input where its panel (every
    input channel's 7 vectors) outgrows L1: resnet50's 1x1 512->128 @28 and 256->64 @56 ran
    at 60-70% of the peak, as 2x14 channels tiles at 85-88%. 64->256 @56's panel (28 KB)
    stays in L1: pixels. A Zen 4 core (32 flops a cycle: 21 bytes asked), an Intel Xeon's (whose
    L2 sustains 64 bytes a cycle: pixels tiles ran as fast as channels tiles) or one not known
    keeps the pixels tiles."""
    l2 = (1 << 20) // 4
    zen5, zen4 = Core(48 << 10, 32, 2, 64), Core(32 << 10, 32, 2, 32)
    xeon = Core(48 << 10, 64, 2, 64)

    def schedule(x_shape, w_shape, core, attrs=None):
        geo = conv_geometry(x_shape, w_shape, attrs or {})
        return plan({}, geo, 16, 32, l2, constant_weights=False, core=core).schedule

    assert schedule((1, 512, 28, 28), (128, 512, 1, 1), zen5) == "channels"
    assert schedule((1, 256, 56, 56), (64, 256, 1, 1), zen5) == "channels"
    assert schedule((1, 64, 56, 56), (256, 64, 1, 1), zen5) == "pixels"
    for core in (zen4, xeon, Core()):
        assert schedule((1, 512, 28, 28), (128, 512, 1, 1), core) == "pixels"
        assert schedule((1, 256, 56, 56), (64, 256, 1, 1), core) == "pixels"
    # the rule reads pointwise convs only: a 3x3 conv's taps share their lines
    first = {"strides": [2, 2], "pads": [3, 3, 3, 3]}
    assert schedule((1, 3, 224, 224), (64, 3, 7, 7), zen5, first) == "pixels"


def test_default_pack_input_where_far_planes_feed_many_blocks():
    """AVX2 6x2 pixels tiles of a Zen 3 (32 KB L1), pixels_outer: resnet50's 1x1 256->64 @56
    (11 channel blocks read 256 lines 12.5 KB apart) packs its tiles' input; 512->128 @28 in
    its chunks of 256 (split 2: 16 KB packed). Not with fewer than 64 channels a chunk
    (32->128 @27), planes under half a page apart (256->128 @14: 784 B), a chunk too big for
    L1 packed (1024 channels unsplit), one channel block, too few pixel tiles for the
    threads, the L1 unknown, a 3x3 conv, channels_outer or channels tiles, or AVX-512's tiles
    (3 or more lines a step: not measured)."""
    tile = {"schedule": "pixels", "tile_vectors": 2, "tile_rows": 6, "order": "pixels_outer"}
    l2, core = (512 << 10) // 4, Core(32 << 10, 16, 2)

    def chosen(x_shape, w_shape, config=tile, attrs=None, core=core):
        return plan(config, conv_geometry(x_shape, w_shape, attrs or {}), 8, 16, l2, core=core)

    def packs(*args, **kwargs):
        return chosen(*args, **kwargs).pack_input

    assert packs((1, 256, 56, 56), (64, 256, 1, 1))
    assert packs((1, 512, 28, 28), (128, 512, 1, 1), config={**tile, "split": 2})
    assert not packs((1, 32, 27, 27), (128, 32, 1, 1))
    assert not packs((1, 256, 14, 14), (128, 256, 1, 1))
    assert not packs((1, 1024, 28, 28), (128, 1024, 1, 1), config={**tile, "split": 1})
    assert not packs((1, 256, 56, 56), (6, 256, 1, 1))
    assert not packs((1, 256, 56, 56), (64, 256, 1, 1), core=Core())
    # 49 pixel tiles of 28x28: enough for 2 threads, not for 16 (4 tiles a thread at least)
    assert not packs((1, 512, 28, 28), (128, 512, 1, 1), config={**tile, "split": 2},
                     core=Core(32 << 10, 16, 16))  # fmt: skip
    assert not packs((1, 256, 56, 56), (64, 256, 3, 3), attrs={"pads": [1, 1, 1, 1]})
    assert not packs((1, 256, 56, 56), (64, 256, 1, 1), config={**tile, "order": "channels_outer"})
    assert not packs((1, 256, 56, 56), (64, 256, 1, 1), config={**tile, "schedule": "channels"})
    avx512 = plan({"schedule": "pixels"}, conv_geometry((1, 256, 56, 56), (64, 256, 1, 1), {}),
                  16, 32, l2, core=core)  # fmt: skip
    assert avx512.tiling.nv > 2 and not avx512.pack_input
    assert not packs((1, 256, 56, 56), (64, 256, 1, 1), config={**tile, "pack_input": False})
    # asked for, a packed input needs one tap and the pixels_outer loop
    assert packs((1, 8, 5, 11), (7, 8, 1, 1), config={**tile, "pack_input": True}, core=Core())
    assert not packs((1, 8, 5, 11), (7, 8, 3, 3), config={**tile, "pack_input": True})


PACKED = {"schedule": "pixels", "order": "pixels_outer", "pack_input": True}


def check_conv_everywhere(x_shape, w_shape, attrs, knobs, rng):
    """A conv with bias under `knobs` against the reference: interpreted (every access checked
    against its buffer), compiled, with an epilogue, and as AVX2 code where that runs."""
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    check_conv("Conv", x, w, attrs, b, config=knobs, interpreted=True)
    check_conv("Conv", x, w, attrs, b, config=knobs, epilogue=True)
    if CPUTarget.host().vector_bits >= 256:
        check_conv("Conv", x, w, attrs, b, target=AVX2, config=knobs)


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, config",
    [
        ((1, 8, 5, 11), (7, 8, 1, 1), {}, {}),  # 11-wide rows: lines straddle
        ((1, 8, 9, 9), (13, 8, 1, 1), {}, {"tile_vectors": 1, "prefetch": True}),
        ((1, 16, 9, 9), (12, 16, 1, 1), {}, {"split": 2, "prefetch": True, "tile_rows": 4}),
        ((2, 8, 6, 6), (8, 4, 1, 1), {"group": 2}, {"tile_vectors": 1}),
        ((1, 8, 9, 9), (7, 8, 1, 1), {"strides": [2, 2]}, {"tile_rows": 3}),
        ((1, 8, 5, 5), (3, 8, 1, 1), {}, {}),  # one channel block: only the filling one
    ],
)
def test_pixel_tiles_packing_their_input_compute_the_conv(x_shape, w_shape, attrs, config, rng):
    """The first channel block of a pixel tile copies the input it reads into local scratch,
    the others read it there: the same results interpreted (every access checked against its
    buffer, the next tile's prefetches too), compiled, with an epilogue and as AVX2 code."""
    knobs = {**PACKED, **config}
    check_conv_everywhere(x_shape, w_shape, attrs, knobs, rng)


def test_the_last_channel_block_of_a_pixels_tile_computes_its_channels_alone():
    """64 channels in 6-row tiles: 10 blocks and one of 4 rows (not 6 with 2 of padding);
    MR dividing the channels, or one block holding them, leaves no remainder."""
    assert remainder_rows(64, 6) == 4 and remainder_rows(128, 6) == 2
    assert remainder_rows(96, 6) is None and remainder_rows(4, 6) is None


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, config",
    [
        ((1, 3, 20, 20), (10, 3, 5, 5), {"pads": [2] * 4, "strides": [2, 2]},
         {"schedule": "pixels", "tile_rows": 4, "order": "channels_outer"}),
        ((1, 16, 9, 9), (14, 16, 1, 1), {},
         {"schedule": "pixels", "tile_rows": 6, "order": "pixels_outer", "split": 2,
          "prefetch": True}),
        ((1, 16, 9, 9), (13, 16, 3, 3), PADDED,
         {"schedule": "pixels", "tile_rows": 4, "order": "channels_outer", "split": 4,
          "prefetch": True}),
        ((1, 16, 8, 8), (22, 8, 1, 1), {"group": 2}, {**PACKED, "tile_rows": 3}),
    ],
)  # fmt: skip
def test_pixel_tiles_with_a_short_last_block_compute_the_conv(x_shape, w_shape, attrs, config, rng):
    """A last channel block of fewer rows than MR (`remainder_rows`), with a split reduction
    (each tile's partial sums at its own place), fetches ahead and packed input."""
    check_conv_everywhere(x_shape, w_shape, attrs, config, rng)


def test_the_last_channels_tile_of_a_row_computes_its_pixels_alone():
    """49 pixels in 6-pixel tiles: 8 tiles and one of 1 (not 9 of 6, 5 of them repeats or
    reads past the row); MR dividing the pixels leaves no remainder. The short tile is code
    of its own: a 7x7 plane in flat 5-pixel tiles holds tiles of 5 and of 4."""
    assert remainder_pixels(49, 6) == 1 and remainder_pixels(9, 4) == 1
    assert remainder_pixels(48, 6) is None and remainder_pixels(5, 5) is None
    plan = ["channels", 1, 5, "channels_outer", "none", "flat"]
    text = "\n".join(kernel_str(k) for k in pointwise_conv_kernels(16, 16, 7, {"plan": plan}))
    assert "allocate acc: float32[5, 16]" in text and "allocate acc: float32[4, 16]" in text
    plan = ["channels", 1, 6, "channels_outer", "none"]  # rows of 6 in tiles of 6
    text = "\n".join(kernel_str(k) for k in pointwise_conv_kernels(16, 16, 6, {"plan": plan}))
    assert text.count("allocate acc:") == 1


CHANNEL_REMAINDER = {"schedule": "channels", "tile_vectors": 1}


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, config",
    [
        # flat 6-pixel tiles over 7x7 planes (8 and one of 1), a split reduction fetching the
        # next channel block's weights ahead
        ((1, 16, 7, 7), (20, 16, 3, 3), PADDED,
         {"tile_rows": 6, "split": 2, "order": "channels_outer", "prefetch": True}),
        # tiles in rows of 9 (two of 4, one of 1), reading the input in place up to its end
        ((1, 16, 7, 9), (16, 16, 1, 1), {}, {"tile_rows": 4, "flat_rows": False}),
        # pixels_outer, each tile fetching the next one's input ahead (rows of 9: 4, 4, 1)
        ((1, 8, 9, 9), (16, 8, 3, 3), PADDED,
         {"tile_rows": 4, "flat_rows": False, "order": "pixels_outer", "prefetch": True}),
        # strided and unphased, flat (7x7 outputs: 9 tiles of 5 and one of 4); 1-D (11 of 4)
        ((1, 8, 14, 14), (16, 8, 3, 3), {**PADDED, "strides": [2, 2]},
         {"tile_rows": 5, "phased": False}),
        ((2, 8, 11), (16, 8, 3), {"pads": [1, 1]}, {"tile_rows": 4}),
    ],
)  # fmt: skip
def test_channel_tiles_with_a_short_last_tile_compute_the_conv(
    x_shape, w_shape, attrs, config, rng
):
    """A row's (flat: the planes') last channels tile of fewer pixels than MR
    (`remainder_pixels`): split reductions keep its partial sums at its own place, fetches
    ahead stay in their buffers, an input read in place is read no further than its end."""
    check_conv_everywhere(x_shape, w_shape, attrs, {**CHANNEL_REMAINDER, **config}, rng)


def test_packed_input_fills_in_the_first_block_and_fetches_the_next_tile():
    """One local block of a tile's input (64 channels x 16 lanes), filled by the first channel
    block (a store a step), whose steps fetch the next tile's line (16 x 16 planes: one line
    a channel, on lines); without `prefetch`, no fetches."""

    def text(prefetch):
        config = {**PACKED, "tile_vectors": 1, "prefetch": prefetch}
        kernels = pointwise_conv_kernels(64, 80, 16, config, threads=1)
        return "\n".join(kernel_str(k) for k in kernels)

    fetching, plain = text(True), text(False)
    assert fetching.count("tile_input[") > 0 and "tile_input" in plain
    assert fetching.count("prefetch(") == 1 and plain.count("prefetch(") == 0


def test_channel_tiles_unroll_their_transposing_store_over_one_vector_block():
    """A channels tile in rows of at most 16 output channels stores them channel by channel
    in straight-line code (constant places in the tile: shuffles, not computed gathers);
    wider blocks and tiles through the rows keep the loop."""

    def unrolled(plan):
        kernels = pointwise_conv_kernels(64, 80, 9, {"plan": plan})
        lines = [t for t in "\n".join(kernel_str(k) for k in kernels).splitlines()
                 if "for (j:" in t]  # fmt: skip
        (kind,) = {t.strip().endswith("unrolled {") for t in lines}  # the 9th pixel's tile too
        return kind

    rows = ["channels", 1, 5, "channels_outer", "none"]  # 16 lanes: one vector
    assert unrolled(rows)
    assert not unrolled([rows[0], 2, *rows[2:]])  # 32 channels: a loop
    assert not unrolled([*rows, "flat"])


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, config",
    [
        # 13 of 16 channels, 35 pixels in tiles of 4, a split reduction
        ((1, 16, 5, 7), (13, 16, 1, 1), {}, {"tile_vectors": 1, "tile_rows": 4, "split": 2}),
        # 3x3 tiles in rows of 9: 3 tiles of 4 (the last one 1), 20 channels
        ((1, 8, 9, 9), (20, 8, 3, 3), {"pads": [1, 1, 1, 1]},
         {"plan": ["channels", 1, 4, "channels_outer", "none"]}),
        ((2, 8, 6, 6), (12, 4, 1, 1), {"group": 2}, {"tile_vectors": 1}),
    ],
)  # fmt: skip
def test_channel_tiles_with_unrolled_stores_compute_the_conv(x_shape, w_shape, attrs, config, rng):
    """The unrolled transposing store keeps the results: partial channel blocks and pixel
    tiles, a split reduction, groups; interpreted, compiled, with an epilogue, AVX2."""
    check_conv_everywhere(x_shape, w_shape, attrs, {"schedule": "channels", **config}, rng)


def test_default_align_planes_where_every_block_streams_the_input_from_l2():
    """AVX2 6x2 pixels tiles of a Zen 3 (32 KB L1) over pointwise planes as one row: resnet50's
    1x1 256->1024 @14 (channels_outer: 171 channel blocks each read the 200 KB input) reads
    planes padded from 196 to 208 elements, so that each tile reads one line a channel, not
    two. Not pixels_outer, not an input that fits in L1 (48->192 @13: 32 KB), not planes
    on lines already (16 x 16), not with the L1 unknown, not 3x3 or channels tiles; asked for
    (`align_planes`), pixels_outer too."""
    tile = {"schedule": "pixels", "tile_vectors": 2, "tile_rows": 6, "order": "channels_outer"}
    l2, core = (512 << 10) // 4, Core(32 << 10, 16, 2)

    def pad(x_shape, w_shape, config=tile, attrs=None, core=core):
        geo = tiled_geometry(conv_geometry(x_shape, w_shape, attrs or {}), 8, 16)
        return plan(config, geo, 8, 16, l2, core=core).channel_pad

    assert pad((1, 256, 14, 14), (1024, 256, 1, 1)) == 12
    assert pad((1, 512, 13, 13), (1000, 512, 1, 1)) == 7  # 169 -> 176
    assert pad((1, 256, 14, 14), (1024, 256, 1, 1), config={**tile, "order": "pixels_outer"}) == 0
    assert pad((1, 48, 13, 13), (192, 48, 1, 1)) == 0
    assert pad((1, 256, 16, 16), (1024, 256, 1, 1)) == 0
    assert pad((1, 256, 14, 14), (1024, 256, 1, 1), core=Core()) == 0
    assert pad((1, 256, 14, 14), (1024, 256, 3, 3), attrs={"pads": [1, 1, 1, 1]}) == 0
    assert pad((1, 256, 14, 14), (1024, 256, 1, 1), config={**tile, "schedule": "channels"}) == 0
    assert pad((1, 256, 14, 14), (1024, 256, 1, 1), config={**tile, "align_planes": False}) == 0
    asked = {**tile, "order": "pixels_outer", "align_planes": True}
    assert pad((1, 256, 14, 14), (1024, 256, 1, 1), config=asked, core=Core()) == 12


ALIGNED = {"schedule": "pixels", "align_planes": True, "tile_vectors": 1}


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, config",
    [
        ((1, 8, 17, 17), (13, 8, 1, 1), {}, {"order": "channels_outer"}),  # 289 -> 304
        ((2, 8, 11, 13), (7, 8, 1, 1), {}, {"order": "pixels_outer", "prefetch": True}),
        ((1, 16, 17, 17), (12, 16, 1, 1), {}, {"split": 2, "order": "channels_outer"}),
        ((1, 8, 33, 33), (7, 8, 1, 1), {"strides": [2, 2]}, {}),  # a transform already
        ((2, 8, 17, 17), (8, 4, 1, 1), {"group": 2}, {"pack_input": True}),
    ],
)
def test_pixel_tiles_on_planes_that_start_on_lines_compute_the_conv(
    x_shape, w_shape, attrs, config, rng
):  # fmt: skip
    """An input copied into planes padded to whole lines (the pad zeroed, never stored from;
    each case pads on AVX-512 and AVX2): the same results interpreted (every access checked
    against its buffer), compiled, with an epilogue and as AVX2 code."""
    knobs = {**ALIGNED, "tile_vectors": 2, **config}
    for lanes, registers in ((16, 32), (8, 16)):
        geo = tiled_geometry(conv_geometry(x_shape, w_shape, attrs), lanes, registers)
        assert plan(knobs, geo, lanes, registers).channel_pad > 0
    check_conv_everywhere(x_shape, w_shape, attrs, knobs, rng)


def test_planes_on_lines_pad_each_channel_of_the_transformed_input():
    """A 1x1 conv over 17 x 17 planes read as one row of 289 (AVX-512's default tile fills its
    lanes better so): on lines, its transformed input holds 64 channels of 304 elements (the
    pad zeroed by the transform), not of 289."""

    def input_temp(align):
        config = {**ALIGNED, "align_planes": align}
        kernels = pointwise_conv_kernels(64, 80, 17, config, threads=1)
        return kernels[0].params[0].shape[0], kernel_str(kernels[0])

    (padded, text), (plain, _) = input_temp(True), input_temp(False)
    assert padded >= 64 * 304 > plain >= 64 * 289
    assert "nc * 304" in text and "nc * 289" not in text


def test_avx2_pointwise_channel_tiles_default_to_two_vectors():
    """On 16 registers a 4x3 channels tile takes all of them; a pointwise conv's default
    channels tile has two vectors there (resnet50's 1x1 512->2048 @7: 5x2, 4x3 before), while
    a 3x3 conv's and every AVX-512 default keep the wider limit (4 vectors)."""
    pointwise = tiled_geometry(conv_geometry((1, 512, 7, 7), (2048, 512, 1, 1), {}), 8, 16)
    chosen = plan({"schedule": "channels"}, pointwise, 8, 16)
    assert (chosen.tiling.mr, chosen.tiling.nv) == (5, 2)
    assert plan({"schedule": "channels", "tile_vectors": 3, "tile_rows": 4}, pointwise, 8, 16
                ).tiling.nv == 3  # fmt: skip
    assert default_limits("channels", 16, pointwise, 8) == (2, 14)
    assert default_limits("channels", 32, pointwise, 16) == (4, 14)
    three = conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), {"pads": [1, 1, 1, 1]})
    assert default_limits("channels", 16, three, 8) == (4, 14)
    assert default_limits("pixels", 16, pointwise, 8) == (8, 6)


@pytest.mark.parametrize(
    "x_shape,w_shape,attrs,lanes,registers,tile",
    [
        # vgg19's 3x3 3->64 @224 on AVX2: 27 steps, 4 rows of 2 vectors (6 rows before)
        ((1, 3, 224, 224), (64, 3, 3, 3), PADDED, 8, 16, (4, 2)),
        # mobilenet_v2's 3x3/2 3->32: the same
        ((1, 3, 224, 224), (32, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, 8, 16,
         (4, 2)),
        # resnet50's 7x7/2 3->64: 147 steps, the 6-row tile kept
        ((1, 3, 224, 224), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, 8, 16,
         (6, 2)),
        # as many input channels as lanes: not a first conv
        ((1, 8, 56, 56), (64, 8, 3, 3), PADDED, 8, 16, (6, 2)),
        # AVX-512's 32 registers keep their default
        ((1, 3, 224, 224), (64, 3, 3, 3), PADDED, 16, 32, (3, 7)),
    ],
)  # fmt: skip
def test_short_first_convs_take_eight_sums_on_avx2(x_shape, w_shape, attrs, lanes, registers,
                                                   tile):  # fmt: skip
    """A first conv's pixels tiles (fewer input channels than lanes) over a reduction under
    MIN_CHUNK_STEPS steps hold 4 rows x 2 vectors on 16-register targets (Zen 3: vgg19's first
    conv 82% -> 90% of the peak), not the 6x2 tile of longer reductions."""
    geo = tiled_geometry(conv_geometry(x_shape, w_shape, attrs), lanes, registers)
    chosen = plan({"schedule": "pixels"}, geo, lanes, registers)
    assert (chosen.tiling.mr, chosen.tiling.nv) == tile


def test_short_first_convs_keep_the_pixels_schedule():
    """The 8-sum tile does not move a first conv to the channels schedule: squeezenet's
    unpadded 3x3/2 3->64 ran 505 us as pixels tiles, 905 as a flat channels tile."""
    geo = tiled_geometry(conv_geometry((1, 3, 224, 224), (64, 3, 3, 3), {"strides": [2, 2]}),
                         8, 16)  # fmt: skip
    chosen = plan({}, geo, 8, 16)
    assert chosen.schedule == "pixels" and (chosen.tiling.mr, chosen.tiling.nv) == (4, 2)


def test_pixel_tiles_share_their_channels_evenly():
    """A pixels tile holds as many rows of output channels as its blocks need, each block as
    full as the others: 8 channels as two blocks of 4 rows, not of 6 and 2 (whose 6-row tile
    multiplied 4 rows of zeros; unet's 3x3 24->8 @64 on the Zen 3 57% -> 76% of the peak),
    20 as four of 5; the tile's vectors and rows of pixels stay as they were."""

    def tiling(out, k=3, size=64, lanes=8, registers=16):
        geo = conv_geometry((1, 24, size, size), (out, 24, k, k), {"pads": [k // 2] * 4})
        return plan({"schedule": "pixels"}, geo, lanes, registers).tiling

    eight, twenty, many = tiling(8), tiling(20), tiling(64)
    assert (eight.mr, eight.nv) == (4, 2) and (twenty.mr, twenty.nv) == (5, 2)
    assert (many.mr, many.nv) == (6, 2)  # 11 blocks of 6 for 64: 6 already as even as can be


def _fma_loops(assembly: str) -> list[list[str]]:
    """The innermost loops of x86 assembly that multiply-add: each the lines from a label to
    the backward jump to it, holding an FMA and no other such loop."""
    lines, loops = assembly.splitlines(), []
    for i, line in enumerate(lines):
        label = re.match(r"^(\.LBB\S+):", line)
        jump = re.compile(r"\sj\w+\s+" + re.escape(label.group(1)) + "$") if label else None
        end = next((j for j in range(i + 1, len(lines)) if jump and jump.search(lines[j])), None)
        if end is not None and any("vfmadd" in x for x in lines[i:end]):
            loops.append(lines[i : end + 1])
    return [a for a in loops if not any(b is not a and set(b) < set(a) for b in loops)]


STACK_VECTOR = re.compile(r"%[xyz]mm\d+, -?\d*\(%rsp\)|\(%rsp\), %[xyz]mm\d+$")


@pytest.mark.parametrize(
    "mcpu,x_shape,w_shape,attrs,vectors",
    [
        # zfnet512's 5x5/2 96->256 @54: as a flat 14x2 tile with 25 taps a step, 403 zmm
        # values spilled and reloaded a step (now 13x2 within rows)
        ("znver4", (1, 96, 54, 54), (256, 96, 5, 5), {"strides": [2, 2]}, 4),
        # inception_v1's 5x5 16->48 @13: as a flat 9x3 tile, 240 (now 7x3 within rows)
        ("znver4", (1, 16, 13, 13), (48, 16, 5, 5), {"pads": [2, 2, 2, 2]}, 4),
        # 225 pixels in flat 3x3 tiles of two vectors: 9x2 (at most MAX_FLAT_TAP_ROWS pixels)
        ("sapphirerapids", (1, 64, 15, 15), (256, 64, 3, 3), PADDED, 2),
        # AVX2 7x7 flat: a kernel row a step (all 49 taps spilled 18 ymm values)
        ("znver3", (1, 128, 14, 14), (256, 128, 7, 7), {"pads": [3, 3, 3, 3]}, 2),
    ],
)  # fmt: skip
def test_default_conv_tiles_keep_their_values_in_registers(
    mcpu, x_shape, w_shape, attrs, vectors
):  # fmt: skip
    """The multiply-add loops of default direct conv plans neither spill vectors to the stack
    nor reload them (docs/performance.md, "Flat tiles that spill"); cross-compiled, so any host
    checks the AVX-512 code."""
    target = CPUTarget.parse(f"llvm -mcpu={mcpu}")
    full = OPS["Conv"].normalize_attrs(conv_attrs(w_shape, attrs), "Conv")
    node = Node("Conv", ["in0", "in1"], ["out"], full)
    in_types = [TensorType(x_shape, "float32"), TensorType(w_shape, "float32")]
    out_types = OPS["Conv"].infer(full, in_types)
    weights = np.random.default_rng(0).standard_normal(w_shape).astype(np.float32)
    config = {"schedule": "channels", "tile_vectors": vectors}
    ctx = LowerContext(LoweringTarget.of_cpu(target, 1), config)
    kernels, _, _ = lower_node(ctx, node, in_types, out_types, {1: weights})
    loops = _fma_loops(emit_cpu(kernels, target=target).assembly)
    assert loops
    assert [x for loop in loops for x in loop if STACK_VECTOR.search(x)] == []


@pytest.mark.parametrize(
    "steps,per_step,tiles",
    [(64, 1, 10), (7, 3, 8), (5, 1, 33), (12, 2, 3), (24, 1, 7), (128, 1, 33), (100, 1, 40)],
)
def test_paced_lines_cover_the_next_step_spread_over_the_tiles(steps, per_step, tiles):
    """Where a step reads fewer lines than an outer step has tiles, each tile fetches its own
    run of lines, in order: together every line of the next outer step, and no tile much more
    than its share (a burst from the first tile is what pacing avoids). Where a whole number
    of elements a step keeps that pace, the offset moves by it (one add a step)."""
    line = 16
    fetched = Buffer("fetched", (tiles, steps), "int32")
    body = loop("i", tiles, lambda i: loop("s", steps, lambda s: fetched.store(
        (i, s), paced_offset(Ahead("weights", i, tiles), s, steps, per_step, line))))  # fmt: skip
    offsets = np.full((tiles, steps), -1, np.int32)
    interpret(Kernel("paced", (fetched,), body), offsets)
    lines = offsets // line
    total, share = steps * per_step, -(-steps * per_step // tiles)
    assert set(lines.ravel()) == set(range(total))
    each = -(-share * line // steps)
    for row, run in zip(offsets, lines):
        assert (np.diff(row) >= 0).all() and len(set(run)) <= math.ceil(share * PACE_SLACK) + 1
        if each * steps <= share * line * PACE_SLACK:
            assert (np.diff(row) == each).all()


@pytest.mark.parametrize("split", [1, 4])
def test_paced_weight_prefetches_stay_inside_the_weights(split, rng):
    # a 1x1 conv's channels tiles read a line of weights a step, fewer than a block's tiles:
    # the interpreter reads each paced prefetch, the last block's (its own) included
    check_lowered(
        "Conv",
        {"x": randn(rng, 1, 16, 7, 7)},
        {},
        constants={"w": randn(rng, 40, 16, 1, 1), "b": randn(rng, 40)},
        use_interpreter=True,
        config={"in_place": False, "prefetch": True, "schedule": "channels",
                "order": "channels_outer", "split": split, "tile_vectors": 1, "tile_rows": 3},
        **TOL,
    )  # fmt: skip


@pytest.mark.parametrize("size,blocks,parts", [(1, 4, 3), (2, 5, 4), (3, 9, 2), (4, 16, 1)])
def test_a_group_of_blocks_fetches_what_its_loop_runs_next(size, blocks, parts):
    """Chunks inside groups of channel blocks run (group, chunk, block): each block fetches the
    weights of the block and chunk the loop runs next (the group's first block in the next
    chunk after its last; the next group's first after its last chunk), the very last its own:
    with the next block of the same chunk, a group of one block fetched nothing it read."""
    order = [(g * size + k, k, part) for g in range(-(-blocks // size)) for part in range(parts)
             for k in range(size) if g * size + k < blocks]  # fmt: skip
    fetched = Buffer("fetched", (len(order), 2), "int32")
    stores = []
    for i, (b, k, part) in enumerate(order):
        blocks_on, chunks_on = next_outer_step(const(b), const(k), const(part), size, blocks, parts)
        stores += [fetched.store((i, 0), const(b) + blocks_on),
                   fetched.store((i, 1), const(part) + chunks_on)]  # fmt: skip
    out = np.full((len(order), 2), -1, np.int32)
    interpret(Kernel("next_steps", (fetched,), seq(*stores)), out)
    visited = [(b, part) for b, _, part in order]
    assert [tuple(row) for row in out] == visited[1:] + visited[-1:]


@pytest.mark.parametrize("out_channels", [128, 136])  # 16-lane blocks: groups of 1; of 2, short
def test_groups_of_blocks_fetching_ahead_stay_inside_the_weights(out_channels, rng):
    # 8 or 9 channel blocks on 2 threads run their chunks inside groups of blocks, whose
    # prefetches go back to the group's first block and on to the next group's: the
    # interpreter reads each prefetched element
    check_lowered(
        "Conv",
        {"x": randn(rng, 1, 16, 5, 5)},
        {},
        constants={"w": randn(rng, out_channels, 16, 1, 1), "b": randn(rng, out_channels)},
        use_interpreter=True,
        config={"in_place": False, "prefetch": True, "schedule": "channels",
                "order": "channels_outer", "split": 4, "tile_vectors": 1, "tile_rows": 3},
        **TOL,
    )  # fmt: skip


def test_a_plan_without_its_trailing_entries_takes_their_defaults():
    """A plan knob of [schedule, tile_vectors, tile_rows] (and an order) leaves the order and
    the unrolled taps to the defaults, as the same knobs left out of a config do; without
    "flat" a channels tile stays within rows (5x2 over rows of 14, where 6x2 runs through)."""
    geo = conv_geometry((1, 16, 14, 14), (32, 16, 3, 3), {"pads": [1, 1, 1, 1]})
    for schedule in ("channels", "pixels"):
        short = plan({"plan": [schedule, 2, 6]}, geo, 8, 16)
        knobs = {"schedule": schedule, "tile_vectors": 2, "tile_rows": 6, "flat_rows": False}
        assert short == plan(knobs, geo, 8, 16) and short.schedule == schedule
    flat = plan({"plan": ["channels", 2, 6, "channels_outer", "all", "flat"]}, geo, 8, 16)
    assert flat.tiling.flat and not plan({"plan": ["channels", 2, 6]}, geo, 8, 16).tiling.flat
    ordered = plan({"plan": ["channels", 2, 6, "pixels_outer"]}, geo, 8, 16)
    assert ordered.order == "pixels_outer"
    assert ordered.unroll_taps == plan({"plan": ["channels", 2, 6]}, geo, 8, 16).unroll_taps
