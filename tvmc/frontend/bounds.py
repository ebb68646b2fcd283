"""Checks while converting: every tensor a node makes is bounded before it is computed, and
inputs that ONNX defines as lists of values (shapes, axes, pads, scales) are 1-D.

A tensor may not count more elements than int64 can, need more bytes than this process may
allocate (ModelError: the model asks for the impossible), or hold more elements than 32-bit
indices reach (UnsupportedModelError: tvmc's kernels index with int32). `BoundedContext` checks
the types each op's shape rule gives before the op folds; `check_node` checks the sizes the
converters of ConstantOfShape and Range compute from constants themselves, and the scales of a
Resize, before they are used.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.graph import TensorType
from tvmc.memory import human_bytes, memory_limit
from tvmc.ops import get_op

# Inputs ONNX defines as 1-D lists (index: name), by op; converters read them as lists.
# A scalar stands for a one-value list here, as onnxruntime reads it (exporters write these).
SCALAR_LISTS_ACCEPTED = {("Squeeze", 1), ("Unsqueeze", 1), ("TopK", 1)}
VECTOR_INPUTS = {
    "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps"},
    "Reshape": {1: "shape"},
    "Expand": {1: "shape"},
    "Tile": {1: "repeats"},
    "Pad": {1: "pads", 3: "axes"},
    "ConstantOfShape": {0: "shape"},
    "Resize": {1: "roi", 2: "scales", 3: "sizes"},
    "Upsample": {1: "scales"},
    "Squeeze": {1: "axes"},
    "Unsqueeze": {1: "axes"},
    "Split": {1: "split"},
    "TopK": {1: "K"},
    "CenterCropPad": {1: "shape", 2: "axes"},
    **{
        op: {1: "axes"}
        for op in (
            "ReduceSum",
            "ReduceMean",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ReduceSumSquare",
        )
    },  # fmt: skip
}
# Inputs that must hold exactly one value (index: name), by op.
SCALAR_INPUTS = {
    "Clip": {1: "min", 2: "max"},
    "OneHot": {1: "depth"},
    "CumSum": {1: "axis"},
    "TopK": {1: "K"},
    "Range": {0: "start", 1: "limit", 2: "delta"},
}
INT64_MAX = 2**63 - 1
INDEX_LIMIT = 2**31 - 1  # elements a kernel can index with int32


def check_size(where: str, what: str, shape: Sequence[int], dtype: str) -> None:
    """A ModelError (or UnsupportedModelError past 32-bit indexing) for a tensor too large."""
    dims = [int(d) for d in shape]
    shown = f"{what} of shape {dims if len(dims) <= 8 else [*dims[:8], '...']} ({dtype})"
    if any(d < 0 for d in dims):
        raise ModelError(f"{where}: {shown} has a negative dimension")
    count = math.prod(dims)
    if count > INT64_MAX:
        raise ModelError(f"{where}: {shown} has {count:.3g} elements, more than int64 counts")
    size = count * np.dtype(dtype).itemsize
    limit = memory_limit()
    if size > limit:
        raise ModelError(f"{where}: {shown} needs {human_bytes(size)}, more than the "
                         f"{human_bytes(limit)} of memory tvmc may use here")  # fmt: skip
    if count > INDEX_LIMIT:
        raise UnsupportedModelError(
            f"{where}: {shown} has {count:,} elements; tvmc's kernels index tensors with 32-bit "
            f"integers (at most {INDEX_LIMIT:,} elements)"
        )


class BoundedContext(ConvertContext):
    """A ConvertContext that bounds the outputs of every op before adding (or folding) it."""

    def add(
        self,
        op: str,
        inputs: list[str],
        attrs: dict[str, Any] | None = None,
        outputs: list[str] | None = None,
        num_outputs: int = 1,
    ) -> list[str]:
        """ConvertContext.add, after checking the sizes of what the op would make."""
        where = self.current.describe() if self.current else op
        opdef = get_op(op)
        try:
            normalized = opdef.normalize_attrs(dict(attrs or {}), where)
            types = opdef.infer(normalized, [self.type(n) for n in inputs if n])
        except (ValueError, KeyError, IndexError, TypeError):
            types = []  # the base class reports what is wrong with the node
        for i, typ in enumerate(types):
            check_size(where, f"output {i} ({op})", typ.shape, typ.dtype)
        return super().add(op, inputs, attrs, outputs, num_outputs)


def check_inputs(inputs: dict[str, TensorType]) -> None:
    """The graph inputs, with the shapes given on the command line, are bounded too."""
    for name, typ in inputs.items():
        check_size(f"input {name!r}", "the input", typ.shape, typ.dtype)


@functools.cache
def _schema(op_type: str, opset: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, min(opset, onnx.defs.onnx_opset_version()), "")
    except onnx.defs.SchemaError:
        return None


def _onnx_type(dtype: str) -> str:
    code = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return f"tensor({onnx.TensorProto.DataType.Name(code).lower()})"


def check_types(node: OnnxNode, dtypes: list[str | None], opset: int) -> None:
    """The element types of a node's inputs obey its ONNX schema: inputs of one type variable
    share a type, and inputs that only take integers or bools (indices, shapes, conditions)
    get one of those."""
    schema = _schema(node.op_type, opset) if node.domain in ("", "ai.onnx") else None
    if schema is None or not schema.inputs:
        return
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    seen: dict[str, tuple[int, str]] = {}
    for i, dtype in enumerate(dtypes):
        param = schema.inputs[min(i, len(schema.inputs) - 1)]
        if dtype is None or (i >= len(schema.inputs) and not param.is_homogeneous):
            continue
        types = allowed.get(param.type_str, [param.type_str])
        if not any("float" in t or "double" in t for t in types) and _onnx_type(dtype) not in types:
            names = ", ".join(t[len("tensor(") : -1] for t in types)
            raise ModelError(f"{node.describe()}: input {i} ({param.name}) is {dtype}; it must "
                             f"be one of {names}")  # fmt: skip
        if param.type_str in allowed:
            first = seen.setdefault(param.type_str, (i, dtype))
            if first[1] != dtype:
                raise ModelError(
                    f"{node.describe()}: inputs {first[0]} and {i} must have one element type "
                    f"({param.type_str}), got {first[1]} and {dtype}"
                )


def _finite(node: OnnxNode, values: np.ndarray, what: str) -> None:
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise ModelError(f"{node.describe()}: {what} {values.tolist()} is not finite")


def check_node(ctx: ConvertContext, node: OnnxNode) -> None:
    """Before a converter runs: list inputs are 1-D; the sizes it would compute from constants
    itself are bounded."""
    for index, what in VECTOR_INPUTS.get(node.op_type, {}).items():
        rank = ctx.type(node.input(index)).ndim if node.input(index) else 1
        if rank != 1 and not (rank == 0 and (node.op_type, index) in SCALAR_LISTS_ACCEPTED):
            shape = list(ctx.type(node.input(index)).shape)
            raise ModelError(f"{node.describe()}: input {index} ({what}) must be a 1-D list of "
                             f"values, got a tensor of shape {shape}")  # fmt: skip
    for index, what in SCALAR_INPUTS.get(node.op_type, {}).items():
        if node.input(index) and ctx.type(node.input(index)).size != 1:
            shape = list(ctx.type(node.input(index)).shape)
            raise ModelError(f"{node.describe()}: input {index} ({what}) must hold one value, "
                             f"got a tensor of shape {shape}")  # fmt: skip
    check_types(node, [ctx.type(n).dtype if n else None for n in node.inputs], ctx.opset)
    if node.op_type == "ConstantOfShape" and node.input(0):
        shape = ctx.const(node.input(0))
        if shape is not None:
            value = node.attrs.get("value")
            dtype = np.asarray(value).dtype.name if value is not None else "float32"
            check_size(node.describe(), "the output", shape.reshape(-1).tolist(), dtype)
    elif node.op_type == "Range" and len(node.inputs) == 3:
        start, limit, delta = (ctx.const(n) for n in node.inputs)
        if start is None or limit is None or delta is None:
            return
        for value, what in ((start, "start"), (limit, "limit"), (delta, "delta")):
            _finite(node, value, what)
        step = delta.item()
        if step == 0:
            raise ModelError(f"{node.describe()}: delta must not be 0")
        span = (limit.item() - start.item()) / step
        count = max(math.ceil(span), 0) if math.isfinite(span) else INT64_MAX + 1
        check_size(node.describe(), "the output", [count], start.dtype.name)
    elif node.op_type in ("Resize", "Upsample"):
        index = 2 if node.op_type == "Resize" and ctx.opset >= 11 else 1
        scales = ctx.const(node.input(index))
        if "scales" in node.attrs:
            scales = np.asarray(node.attrs["scales"], dtype=np.float32)
        if scales is not None and scales.size:
            _finite(node, scales, "scales")
            if (scales <= 0).any():
                raise ModelError(f"{node.describe()}: scales {scales.tolist()} must be positive")
