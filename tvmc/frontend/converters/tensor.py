"""Converters of tensor and shape ONNX ops.

Static parameters (axes, shapes, pads, sizes, ...) become resolved attributes whether an opset
passes them as attributes or constant inputs. Shape, Size, ConstantOfShape, Constant and Range
become constants at once; Flatten, Squeeze, Unsqueeze lower to Reshape.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter, same_name, unique_axes
from tvmc.frontend.einsum import einsum
from tvmc.graph import DTYPES
from tvmc.ops.common import broadcast_shape, normalize_axis
from tvmc.ops.tensor.shape import resolve_reshape
from tvmc.ops.tensor.slicing import equal_split, normalize_slice


# ---- joining and splitting -----------------------------------------------------------------------
@converter("Concat")
def Concat(ctx: ConvertContext, node: OnnxNode) -> None:
    inputs = [n for n in node.inputs if n]
    if "axis" not in node.attrs:
        raise ValueError("Concat needs attribute 'axis'")
    axis = normalize_axis(node.attrs["axis"], ctx.type(inputs[0]).ndim, "Concat")
    ctx.add("Concat", inputs, {"axis": axis}, outputs=node.outputs)


@converter("Split")
def Split(ctx: ConvertContext, node: OnnxNode) -> None:
    x = ctx.type(node.inputs[0])
    axis = normalize_axis(node.attrs.get("axis", 0), x.ndim, "Split")
    sizes = ctx.attr_or_input(node, "split", 1)
    if not sizes:  # equal parts: one per output, or num_outputs (18+, last part may be smaller)
        parts = node.attrs.get("num_outputs", len(node.outputs))
        sizes = equal_split(x.shape[axis], parts, "num_outputs" in node.attrs)
    if len(sizes) != len(node.outputs):
        raise ValueError(f"{len(sizes)} split sizes for {len(node.outputs)} outputs")
    ctx.add("Split", node.inputs[:1], {"axis": axis, "split": sizes}, outputs=node.outputs)


@converter("Slice")
def Slice(ctx: ConvertContext, node: OnnxNode) -> None:
    shape = ctx.type(node.inputs[0]).shape
    starts = ctx.attr_or_input(node, "starts", 1)
    ends = ctx.attr_or_input(node, "ends", 2)
    axes = ctx.attr_or_input(node, "axes", 3, list(range(len(starts))))
    steps = ctx.attr_or_input(node, "steps", 4, [1] * len(starts))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError("starts, ends, axes and steps must have one entry each per sliced axis")
    bounds = [(*normalize_slice(d, 0, d, 1), 1) for d in shape]
    for axis, start, end, step in zip(unique_axes(node, axes, len(shape)), starts, ends, steps):
        bounds[axis] = (*normalize_slice(shape[axis], start, end, step), step)
    begin, stop, stride = zip(*bounds) if bounds else ((), (), ())
    attrs = {"starts": begin, "ends": stop, "steps": stride}
    ctx.add("Slice", node.inputs[:1], attrs, outputs=node.outputs)


# ---- reshaping -----------------------------------------------------------------------------------
def _reshape(ctx: ConvertContext, node: OnnxNode, shape) -> None:
    ctx.add("Reshape", node.inputs[:1], {"shape": tuple(shape)}, outputs=node.outputs)


@converter("Reshape")
def Reshape(ctx: ConvertContext, node: OnnxNode) -> None:
    shape = ctx.attr_or_input(node, "shape", 1)
    in_shape = ctx.type(node.inputs[0]).shape
    _reshape(ctx, node, resolve_reshape(in_shape, shape, bool(node.attrs.get("allowzero", 0))))


@converter("Flatten")
def Flatten(ctx: ConvertContext, node: OnnxNode) -> None:
    shape = ctx.type(node.inputs[0]).shape
    axis = node.attrs.get("axis", 1)
    if not -len(shape) <= axis <= len(shape):
        raise ValueError(f"axis {axis} is out of range for rank {len(shape)}")
    axis += len(shape) if axis < 0 else 0
    _reshape(ctx, node, (math.prod(shape[:axis]), math.prod(shape[axis:])))


@converter("Squeeze")
def Squeeze(ctx: ConvertContext, node: OnnxNode) -> None:
    shape = ctx.type(node.inputs[0]).shape
    axes = ctx.attr_or_input(node, "axes", 1)
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = unique_axes(node, [axes] if isinstance(axes, int) else axes, len(shape))
    wide = [a for a in axes if shape[a] != 1]
    if wide:
        raise ValueError(f"cannot squeeze axes {wide} of shape {list(shape)}: their size is not 1")
    _reshape(ctx, node, [d for i, d in enumerate(shape) if i not in axes])


@converter("Unsqueeze")
def Unsqueeze(ctx: ConvertContext, node: OnnxNode) -> None:
    shape = list(ctx.type(node.inputs[0]).shape)
    axes = ctx.attr_or_input(node, "axes", 1)
    if axes is None:
        raise ValueError("Unsqueeze needs axes")
    axes = [axes] if isinstance(axes, int) else axes  # a 0-d axes tensor
    axes = unique_axes(node, axes, len(shape) + len(axes))  # relative to the output rank
    for axis in sorted(axes):
        shape.insert(axis, 1)
    _reshape(ctx, node, shape)


@converter("Transpose")
def Transpose(ctx: ConvertContext, node: OnnxNode) -> None:
    ndim = ctx.type(node.inputs[0]).ndim
    perm = node.attrs.get("perm", list(range(ndim))[::-1])
    ctx.add("Transpose", node.inputs[:1], {"perm": perm}, outputs=node.outputs)


@converter("DepthToSpace", "SpaceToDepth")
def DepthToSpace(ctx: ConvertContext, node: OnnxNode) -> None:
    """Reshape to 6-D, permute the block axes into place, reshape back."""
    shape = ctx.type(node.inputs[0]).shape
    if len(shape) != 4:
        raise ValueError(f"expects a 4-D NCHW input, got shape {list(shape)}")
    n, c, h, w = shape
    b = node.attrs["blocksize"]
    dcr = node.attrs.get("mode", "DCR") == "DCR"  # SpaceToDepth has a mode since opset 28
    if node.op_type == "SpaceToDepth":
        if h % b or w % b:
            raise ValueError(f"height {h} and width {w} must be multiples of blocksize {b}")
        split, final = (n, c, h // b, b, w // b, b), (n, c * b * b, h // b, w // b)
        perm = (0, 3, 5, 1, 2, 4) if dcr else (0, 1, 3, 5, 2, 4)
    else:
        if c % (b * b):
            raise ValueError(f"channels {c} must be a multiple of blocksize² {b * b}")
        if dcr:
            split, perm = (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)
        else:
            split, perm = (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3)
        final = (n, c // (b * b), h * b, w * b)
    (blocks,) = ctx.add("Reshape", node.inputs[:1], {"shape": split})
    (moved,) = ctx.add("Transpose", [blocks], {"perm": perm})
    ctx.add("Reshape", [moved], {"shape": final}, outputs=node.outputs)


# ---- indexing and broadcasting -------------------------------------------------------------------
@converter("Gather", "GatherElements")
def Gather(ctx: ConvertContext, node: OnnxNode) -> None:
    ndim = ctx.type(node.inputs[0]).ndim
    axis = normalize_axis(node.attrs.get("axis", 0), ndim, node.op_type)
    ctx.add(node.op_type, node.inputs, {"axis": axis}, outputs=node.outputs)


same_name(["GatherND", "ReverseSequence"])


@converter("Expand")
def Expand(ctx: ConvertContext, node: OnnxNode) -> None:
    target = ctx.require_const(node, 1, "shape").tolist()
    shape = broadcast_shape(ctx.type(node.inputs[0]).shape, tuple(target))
    ctx.add("Expand", node.inputs[:1], {"shape": shape}, outputs=node.outputs)


@converter("Tile")
def Tile(ctx: ConvertContext, node: OnnxNode) -> None:
    repeats = ctx.require_const(node, 1, "repeats").tolist()
    ctx.add("Tile", node.inputs[:1], {"repeats": repeats}, outputs=node.outputs)


@converter("Pad")
def Pad(ctx: ConvertContext, node: OnnxNode) -> None:
    ndim = ctx.type(node.inputs[0]).ndim
    pads = ctx.attr_or_input(node, "pads", 1)
    value = node.attrs.get("value", 0)  # opset < 11; an input since, which may be empty
    if node.input(2) and ctx.require_const(node, 2, "constant_value").size:
        value = ctx.require_const(node, 2, "constant_value").reshape(-1)[0].item()
    axes = ctx.attr_or_input(node, "axes", 3, list(range(ndim)))
    axes = unique_axes(node, axes, ndim)
    if len(pads) != 2 * len(axes):
        raise ValueError(f"{len(pads)} pads for {len(axes)} axes; expected {2 * len(axes)}")
    full = [0] * (2 * ndim)
    for i, axis in enumerate(axes):
        full[axis], full[axis + ndim] = pads[i], pads[i + len(axes)]
    attrs = {"pads": full, "mode": node.attrs.get("mode", "constant"), "constant_value": value}
    ctx.add("Pad", node.inputs[:1], attrs, outputs=node.outputs)


# ---- values known at conversion time -------------------------------------------------------------
def _const(ctx: ConvertContext, node: OnnxNode, array: np.ndarray) -> None:
    if np.dtype(array.dtype).name not in DTYPES:
        raise UnsupportedModelError(
            f"{node.describe()}: element type {array.dtype} is not supported by tvmc"
        )
    ctx.add_const(np.asarray(array), node.outputs[0])


@converter("Shape")
def Shape(ctx: ConvertContext, node: OnnxNode) -> None:
    """Shapes are static: a constant. start/end (15+) clamp like Python slicing."""
    shape = np.array(ctx.type(node.inputs[0]).shape, dtype=np.int64)
    _const(ctx, node, shape[node.attrs.get("start", 0) : node.attrs.get("end")])


@converter("Size")
def Size(ctx: ConvertContext, node: OnnxNode) -> None:
    _const(ctx, node, np.array(ctx.type(node.inputs[0]).size, dtype=np.int64))


@converter("ConstantOfShape")
def ConstantOfShape(ctx: ConvertContext, node: OnnxNode) -> None:
    shape = ctx.require_const(node, 0, "shape").tolist()
    value = np.asarray(node.attrs.get("value", np.zeros(1, np.float32)))
    _const(ctx, node, np.full(shape, value.reshape(-1)[0], dtype=value.dtype))


_CONSTANT_KINDS = {"value_float": np.float32, "value_floats": np.float32,
                   "value_int": np.int64, "value_ints": np.int64}  # fmt: skip


@converter("Constant")
def Constant(ctx: ConvertContext, node: OnnxNode) -> None:
    if "value" in node.attrs:
        _const(ctx, node, np.asarray(node.attrs["value"]))
        return
    for key, dtype in _CONSTANT_KINDS.items():
        if key in node.attrs:
            _const(ctx, node, np.array(node.attrs[key], dtype=dtype))
            return
    kinds = sorted(node.attrs) or ["nothing"]
    raise UnsupportedModelError(
        f"{node.describe()}: a Constant holding {', '.join(kinds)} is not supported "
        "(tvmc supports value, value_float(s) and value_int(s))"
    )


@converter("Range")
def Range(ctx: ConvertContext, node: OnnxNode) -> None:
    start, limit, delta = (ctx.require_const(node, i, what) for i, what in
                           enumerate(("start", "limit", "delta")))  # fmt: skip
    if delta == 0:
        raise ValueError("Range delta must not be 0")
    count = max(math.ceil((limit.item() - start.item()) / delta.item()), 0)
    _const(ctx, node, (start + np.arange(count, dtype=start.dtype) * delta).astype(start.dtype))


# ---- masks, scans, selection ---------------------------------------------------------------------
def _one_value(ctx: ConvertContext, node: OnnxNode, index: int, what: str) -> np.generic:
    """Constant input `index` that must hold exactly one value (a scalar or a 1-element tensor)."""
    value = ctx.require_const(node, index, what)
    if value.size != 1:
        raise ModelError(f"{node.describe()}: {what} must hold one value, got shape "
                         f"{list(value.shape)}")  # fmt: skip
    return value.reshape(())[()]


@converter("Trilu")
def Trilu(ctx: ConvertContext, node: OnnxNode) -> None:
    """The diagonal offset `k` (an optional input) becomes an attribute."""
    k = _one_value(ctx, node, 1, "k") if node.input(1) else 0
    attrs = {"upper": int(node.attrs.get("upper", 1)), "k": int(k)}
    ctx.add("Trilu", node.inputs[:1], attrs, outputs=node.outputs)


@converter("EyeLike")
def EyeLike(ctx: ConvertContext, node: OnnxNode) -> None:
    """The output dtype (an ONNX type number, default the input's) becomes a dtype name."""
    dtype = ctx.type(node.inputs[0]).dtype
    if "dtype" in node.attrs:
        dtype = _dtype_name(node, node.attrs["dtype"])
    attrs = {"k": int(node.attrs.get("k", 0)), "dtype": dtype}
    ctx.add("EyeLike", node.inputs[:1], attrs, outputs=node.outputs)


def _dtype_name(node: OnnxNode, onnx_type: int) -> str:
    name = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(onnx_type)).name
    if name not in DTYPES:
        raise UnsupportedModelError(f"{node.describe()}: element type {name} is not supported")
    return name


@converter("OneHot")
def OneHot(ctx: ConvertContext, node: OnnxNode) -> None:
    """`depth` (a constant input; a float truncates) becomes an attribute."""
    depth = int(_one_value(ctx, node, 1, "depth"))
    rank = ctx.type(node.inputs[0]).ndim + 1  # of the output
    axis = normalize_axis(node.attrs.get("axis", -1), rank, "OneHot")
    ctx.add("OneHot", [node.inputs[0], node.inputs[2]], {"depth": depth, "axis": axis},
            outputs=node.outputs)  # fmt: skip


@converter("CumSum", "CumProd")
def CumSum(ctx: ConvertContext, node: OnnxNode) -> None:
    """The axis (a constant input) becomes an attribute."""
    ndim = ctx.type(node.inputs[0]).ndim
    (axis,) = unique_axes(node, [int(_one_value(ctx, node, 1, "axis"))], ndim)
    attrs = {"axis": axis, "exclusive": bool(node.attrs.get("exclusive", 0)),
             "reverse": bool(node.attrs.get("reverse", 0))}  # fmt: skip
    ctx.add(node.op_type, node.inputs[:1], attrs, outputs=node.outputs)


# ---- rewritten into other ops -------------------------------------------------------------------
@converter("CenterCropPad")
def CenterCropPad(ctx: ConvertContext, node: OnnxNode) -> None:
    """One Pad: per listed axis a negative pad crops, a positive one pads with zeros, split
    evenly around the centre (the odd element at the end)."""
    shape = ctx.type(node.inputs[0]).shape
    target = ctx.require_const(node, 1, "shape").reshape(-1).tolist()
    axes = unique_axes(node, node.attrs.get("axes", range(len(shape))), len(shape))
    if len(target) != len(axes):
        raise ValueError(f"{len(target)} sizes in shape for {len(axes)} axes")
    pads = [0] * (2 * len(shape))
    for axis, size in zip(axes, target):
        if size < 0:
            raise ValueError(f"target size {size} of axis {axis} is negative")
        grow = size - shape[axis]
        begin = grow // 2 if grow >= 0 else -(-grow // 2)
        pads[axis], pads[axis + len(shape)] = begin, grow - begin
    attrs = {"pads": pads, "mode": "constant", "constant_value": 0}
    ctx.add("Pad", node.inputs[:1], attrs, outputs=node.outputs)


@converter("Compress")
def Compress(ctx: ConvertContext, node: OnnxNode) -> None:
    """A Gather of the positions the condition keeps (without an axis: of the flattened input).

    The condition must be a constant: the number of its true entries is the output's length,
    which would otherwise depend on run-time data.
    """
    what = "condition, whose true entries set the output length"
    condition = ctx.require_const(node, 1, what).astype(bool).reshape(-1)
    data, shape = node.inputs[0], ctx.type(node.inputs[0]).shape
    if "axis" in node.attrs:
        axis = normalize_axis(node.attrs["axis"], len(shape), "Compress")
    else:
        axis, (data,) = 0, ctx.add("Reshape", [data], {"shape": (math.prod(shape),)})
    dim = ctx.type(data).shape[axis]
    # entries past the axis select nothing (onnxruntime ignores them too)
    kept = ctx.add_const(np.flatnonzero(condition[:dim]).astype(np.int64))
    ctx.add("Gather", [data, kept], {"axis": axis}, outputs=node.outputs)


@converter("Einsum")
def Einsum(ctx: ConvertContext, node: OnnxNode) -> None:
    """Decomposed into Transpose, Reshape, Gather, ReduceSum and MatMul (tvmc.frontend.einsum)."""
    result = einsum(ctx, node.attrs["equation"], [n for n in node.inputs if n])
    ctx.add("Identity", [result], outputs=node.outputs)


# ---- scatters and TopK ---------------------------------------------------------------------------
@converter("ScatterElements", "Scatter")
def ScatterElements(ctx: ConvertContext, node: OnnxNode) -> None:
    """Scatter (opsets 9 and 10) is ScatterElements without a reduction."""
    axis = normalize_axis(node.attrs.get("axis", 0), ctx.type(node.inputs[0]).ndim, node.op_type)
    attrs = {"axis": axis, "reduction": node.attrs.get("reduction", "none")}
    ctx.add("ScatterElements", node.inputs[:3], attrs, outputs=node.outputs)


same_name(["ScatterND"])  # reduction: opset 16 (add, mul), 18 (max, min)


@converter("TopK")
def TopK(ctx: ConvertContext, node: OnnxNode) -> None:
    """k (an attribute before opset 10, an input since) must be a constant: it sets the output
    shape. Both outputs always exist: an unused one gets a fresh name."""
    k = node.attrs["k"] if "k" in node.attrs else _one_value(ctx, node, 1, "k")
    axis = normalize_axis(node.attrs.get("axis", -1), ctx.type(node.inputs[0]).ndim, "TopK")
    attrs = {"k": int(k), "axis": axis, "largest": int(node.attrs.get("largest", 1)),
             "sorted": int(node.attrs.get("sorted", 1))}  # fmt: skip
    names = [node.outputs[i] if i < len(node.outputs) else "" for i in range(2)]
    names = [n or ctx.graph.fresh_name(f"{node.name or 'topk'}_{i}") for i, n in enumerate(names)]
    ctx.add("TopK", node.inputs[:1], attrs, outputs=names)
