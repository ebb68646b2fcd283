"""Converters of Conv and ConvTranspose, and the window attributes pools share.

Every window op leaves here with explicit kernel_shape, strides, dilations and pads: `auto_pad`
and ConvTranspose's `output_shape` are resolved against the static input shape.
"""

from __future__ import annotations

from typing import Any

from tvmc.errors import ModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter
from tvmc.ops.conv.definition import conv_transpose_output_size
from tvmc.ops.window import same_pads

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def auto_pad(node: OnnxNode) -> str:
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
    mode = auto_pad(node)
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
    mode = auto_pad(node)
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
