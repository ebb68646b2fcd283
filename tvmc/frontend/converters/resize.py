"""Converters of Resize and Upsample: scales, sizes and roi resolved to static attributes."""

from __future__ import annotations

import numpy as np

from tvmc.errors import UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter, unique_axes


def _resize(ctx: ConvertContext, node: OnnxNode, scales, sizes, roi, attrs: dict) -> None:
    """Our Resize from ONNX's scales or sizes (given for `axes` only, 18+), all resolved."""
    in_shape = ctx.type(node.inputs[0]).shape
    ndim = len(in_shape)
    axes = unique_axes(node, node.attrs.get("axes", range(ndim)), ndim)
    given = sizes if sizes is not None else scales
    if given is None or len(given) != len(axes):
        raise ValueError(f"Resize needs {len(axes)} scales or sizes, got {given}")
    f32 = np.float32
    out, scale = list(in_shape), [1.0] * ndim
    if sizes is not None:
        if any(in_shape[a] == 0 for a in axes):
            raise ValueError(f"cannot resize an empty tensor of shape {list(in_shape)} to sizes")
        ratios = [f32(s) / f32(in_shape[a]) for a, s in zip(axes, sizes)]
        policy = node.attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise ValueError(f"unknown keep_aspect_ratio_policy {policy!r}")
        if policy != "stretch":  # one scale for all axes; sizes follow it, rounded half up
            common = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [common] * len(axes)
            sizes = [int(np.floor(common * f32(in_shape[a]) + f32(0.5))) for a in axes]
        for a, s, r in zip(axes, sizes, ratios):
            out[a], scale[a] = int(s), float(r)
    else:
        for a, s in zip(axes, scales):
            out[a], scale[a] = int(f32(s) * f32(in_shape[a])), float(f32(s))
    if attrs["mode"] != "nearest" and node.attrs.get("antialias", 0) and min(scale) < 1:
        raise UnsupportedModelError(
            f"{node.describe()}: antialiased {attrs['mode']} downsampling is not supported"
        )
    if attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        if roi is None or len(roi) != 2 * len(axes):
            raise ValueError(f"tf_crop_and_resize needs an roi of {2 * len(axes)} values")
        full = [0.0] * ndim + [1.0] * ndim
        for i, a in enumerate(axes):
            full[a], full[a + ndim] = roi[i], roi[i + len(axes)]
        attrs["roi"] = full
    attrs.update(sizes=out, scales=scale)
    ctx.add("Resize", node.inputs[:1], attrs, outputs=node.outputs)


def _optional_const(ctx: ConvertContext, node: OnnxNode, index: int, what: str) -> list | None:
    """A constant input that may be absent or empty (Resize's roi, scales, sizes)."""
    if not node.input(index):
        return None
    value = ctx.require_const(node, index, what)
    return value.tolist() if value.size else None


_RESIZE_ATTRS = ("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                 "exclude_outside", "extrapolation_value")  # fmt: skip


@converter("Resize")
def Resize(ctx: ConvertContext, node: OnnxNode) -> None:
    attrs = {k: node.attrs[k] for k in _RESIZE_ATTRS if k in node.attrs}
    attrs.setdefault("mode", "nearest")
    if ctx.opset < 11:  # Resize-10: (X, scales); onnxruntime's fixed coordinate rules
        attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="simple")
        scales = ctx.require_const(node, 1, "scales").tolist()
        _resize(ctx, node, scales, None, None, attrs)
        return
    roi = _optional_const(ctx, node, 1, "roi")
    scales = _optional_const(ctx, node, 2, "scales")
    sizes = _optional_const(ctx, node, 3, "sizes")
    _resize(ctx, node, None if sizes is not None else scales, sizes, roi, attrs)


@converter("Upsample")
def Upsample(ctx: ConvertContext, node: OnnxNode) -> None:
    """Upsample (7: scales attribute, 9: input) is Resize-10 under another name."""
    mode = node.attrs.get("mode", "nearest")
    attrs = {"mode": "linear" if mode == "bilinear" else mode,
             "coordinate_transformation_mode": "asymmetric", "nearest_mode": "simple"}  # fmt: skip
    scales = ctx.attr_or_input(node, "scales", 1)
    _resize(ctx, node, scales, None, None, attrs)
