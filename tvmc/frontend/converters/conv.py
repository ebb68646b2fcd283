"""Converters of convolution, pooling and batch-normalization ONNX ops.

Every window op leaves here with explicit kernel_shape, strides, dilations and pads: `auto_pad`
and ConvTranspose's `output_shape` are resolved against the static input shape.
"""

from __future__ import annotations

from typing import Any

from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters import converter, same_name
from tvmc.ops.conv import conv_transpose_output_size, same_pads

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

same_name(["GlobalAveragePool", "GlobalMaxPool", "LRN"])


def _auto_pad(node: OnnxNode) -> str:
    mode = node.attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if mode not in AUTO_PADS:
        raise ModelError(f"{node.describe()}: auto_pad {mode!r} is not one of {list(AUTO_PADS)}")
    return mode


def window_attrs(node: OnnxNode, spatial_shape: tuple[int, ...], kernel: list[int]) -> dict:
    """kernel_shape, strides, dilations and explicit pads (auto_pad resolved) of a window op."""
    spatial = len(spatial_shape)
    strides = list(node.attrs.get("strides") or [1] * spatial)
    dilations = list(node.attrs.get("dilations") or [1] * spatial)
    pads = list(node.attrs.get("pads") or [0] * 2 * spatial)
    mode = _auto_pad(node)
    if mode == "VALID":
        pads = [0] * 2 * spatial
    elif mode.startswith("SAME"):
        if len(strides) != spatial or len(dilations) != spatial or len(kernel) != spatial:
            raise ModelError(f"{node.describe()}: window attributes do not match the input rank")
        both = [
            same_pads(n, k, s, d, mode)
            for n, k, s, d in zip(spatial_shape, kernel, strides, dilations)
        ]
        pads = [b for b, _ in both] + [e for _, e in both]
    return {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads}


def _conv_kernel(ctx: ConvertContext, node: OnnxNode) -> list[int]:
    kernel = list(ctx.type(node.inputs[1]).shape[2:])
    given = node.attrs.get("kernel_shape")
    if given is not None and list(given) != kernel:
        raise ModelError(
            f"{node.describe()}: kernel_shape {list(given)} differs from the weight's spatial "
            f"shape {kernel}"
        )
    return kernel


@converter("Conv")
def Conv(ctx: ConvertContext, node: OnnxNode) -> None:
    spatial_shape = ctx.type(node.inputs[0]).shape[2:]
    attrs = window_attrs(node, spatial_shape, _conv_kernel(ctx, node))
    attrs["group"] = node.attrs.get("group", 1)
    ctx.add("Conv", node.inputs, attrs, outputs=node.outputs)


@converter("ConvTranspose")
def ConvTranspose(ctx: ConvertContext, node: OnnxNode) -> None:
    spatial_shape = ctx.type(node.inputs[0]).shape[2:]
    spatial = len(spatial_shape)
    kernel = _conv_kernel(ctx, node)
    attrs: dict[str, Any] = {
        "kernel_shape": kernel,
        "strides": list(node.attrs.get("strides") or [1] * spatial),
        "dilations": list(node.attrs.get("dilations") or [1] * spatial),
        "pads": list(node.attrs.get("pads") or [0] * 2 * spatial),
        "output_padding": list(node.attrs.get("output_padding") or [0] * spatial),
        "group": node.attrs.get("group", 1),
    }
    mode = _auto_pad(node)
    output_shape = node.attrs.get("output_shape")
    if output_shape is None and mode.startswith("SAME"):
        output_shape = [n * s for n, s in zip(spatial_shape, attrs["strides"])]
    if output_shape is not None:
        wanted = list(output_shape)[-spatial:]  # output_shape may or may not include N and C
        _resolve_output_shape(spatial_shape, wanted, attrs, mode)
    elif mode == "VALID":
        attrs["pads"] = [0] * 2 * spatial
    ctx.add("ConvTranspose", node.inputs, attrs, outputs=node.outputs)


def _resolve_output_shape(
    spatial_shape: tuple[int, ...], output_shape: list[int], attrs: dict, mode: str
) -> None:
    """Set pads (and output_padding) in `attrs` so that a ConvTranspose makes `output_shape`.

    Odd totals split as the ONNX spec (and onnxruntime) do: the extra pad goes at the end for
    SAME_UPPER and at the beginning otherwise. An output larger than the full one grows at the end
    (as in onnxruntime and the ONNX node tests): that is output_padding.
    """
    begin, end = [], []
    for i, n in enumerate(spatial_shape):
        k, s, d = attrs["kernel_shape"][i], attrs["strides"][i], attrs["dilations"][i]
        full = conv_transpose_output_size(n, k, s, d, 0, 0, attrs["output_padding"][i])
        total = full - output_shape[i]
        if total < 0:
            attrs["output_padding"][i] -= total
            total = 0
        small, large = total // 2, total - total // 2
        first, last = (small, large) if mode == "SAME_UPPER" else (large, small)
        begin.append(first)
        end.append(last)
    attrs["pads"] = begin + end


def _pool(ctx: ConvertContext, node: OnnxNode, op: str, extra: dict) -> None:
    kernel = node.attrs.get("kernel_shape")
    if kernel is None:
        raise ModelError(f"{node.describe()} has no kernel_shape attribute")
    spatial_shape = ctx.type(node.inputs[0]).shape[2:]
    attrs = window_attrs(node, spatial_shape, list(kernel))
    # SAME pads already give exactly ceil(size / stride) windows; ceil_mode must not add one more
    ceil_mode = 0 if _auto_pad(node).startswith("SAME") else node.attrs.get("ceil_mode", 0)
    ctx.add(op, node.inputs[:1], {**attrs, "ceil_mode": ceil_mode, **extra}, outputs=node.outputs)


@converter("MaxPool")
def MaxPool(ctx: ConvertContext, node: OnnxNode) -> None:
    if len(node.outputs) > 1 and node.outputs[1]:
        raise UnsupportedModelError(
            f"{node.describe()}: the Indices output of MaxPool is not supported (only the values)"
        )
    _pool(ctx, node, "MaxPool", {})


@converter("AveragePool")
def AveragePool(ctx: ConvertContext, node: OnnxNode) -> None:
    _pool(ctx, node, "AveragePool", {"count_include_pad": node.attrs.get("count_include_pad", 0)})


@converter("BatchNormalization")
def BatchNormalization(ctx: ConvertContext, node: OnnxNode) -> None:
    # momentum, spatial (opset < 9), is_test and consumed_inputs (opset < 7) do not change inference
    if node.attrs.get("training_mode", 0):
        raise UnsupportedModelError(
            f"{node.describe()}: training_mode=1 is not supported; tvmc compiles inference only"
        )
    ctx.add(
        "BatchNormalization",
        node.inputs,
        {"epsilon": node.attrs.get("epsilon", 1e-5)},
        outputs=node.outputs[:1],
    )
    # old opsets may list the running statistics as outputs; in inference they are the inputs
    for index, source in ((1, 3), (2, 4)):
        if len(node.outputs) > index and node.outputs[index]:
            ctx.add("Identity", [node.inputs[source]], outputs=[node.outputs[index]])
    if any(node.outputs[3:]):
        raise UnsupportedModelError(
            f"{node.describe()}: the saved mean/variance outputs exist only in training mode"
        )
