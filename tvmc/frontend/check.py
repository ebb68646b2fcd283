"""The model checker: what conversion relies on, checked before a model converts.

Names (set, unique, printable), element types (known to ONNX, else a ModelError; supported by
tvmc, else UnsupportedModelError), initializers and tensor attributes (dims against their data),
graph inputs (non-negative dims) and outputs (at least one, unique), and each node: onnx's own
node checker (arity, required inputs, attribute kinds) and the ranges of window attributes.
Sizes computed while converting are bounded by `tvmc.frontend.bounds`.
"""

from __future__ import annotations

import copy
import logging
import math
import unicodedata
from collections.abc import Iterable, Iterator

import numpy as np
import onnx
from onnx import TensorProto, checker, helper

from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend.context import onnx_dtype
from tvmc.frontend.converters.subgraph import walk

logger = logging.getLogger("tvmc.frontend")

DEFAULT_DOMAINS = ("", "ai.onnx")
NAME_LIMIT = 4096  # characters in a name: names end up in tables, symbols and file names
INT32_MAX = 2**31 - 1  # kernels index with 32-bit integers: no extent may pass it
_TYPE_NAMES = {number: name for name, number in TensorProto.DataType.items()}
_UNPRINTABLE = ("Cc", "Cs", "Zl", "Zp")  # controls (terminal escapes), surrogates, line breaks
# Window attributes: the bounds of each value (ModelError outside).
WINDOW_OPS = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool",
                        "AveragePool", "LpPool", "MaxUnpool", "DeformConv", "Col2Im"})  # fmt: skip
WINDOW_RANGES = {
    "kernel_shape": (1, INT32_MAX),
    "strides": (1, INT32_MAX),
    "dilations": (1, INT32_MAX),
    "pads": (0, INT32_MAX),
    "output_padding": (0, INT32_MAX),
    "output_shape": (0, INT32_MAX),
    "group": (1, INT32_MAX),
}
# Any op: attributes that are extents or counts, bounded by 32-bit indexing.
EXTENT_RANGES = {"pads": (-INT32_MAX, INT32_MAX), "blocksize": (1, INT32_MAX)}
# Types ONNX packs several to a byte (raw data) or to an int32_data entry: their bits.
PACKED_BITS = {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}
TYPE_ATTRIBUTES = ("to", "dtype", "output_dtype")  # INT attributes holding an element type


def check_name(name: str | bytes, what: str) -> None:
    """A ModelError unless `name` is text the CLI can print on one line (protobuf hands
    invalid UTF-8 over as bytes)."""
    if isinstance(name, bytes):
        raise ModelError(f"{what} {name!r} is not valid UTF-8")
    if len(name) > NAME_LIMIT:
        raise ModelError(f"{what} {name[:32]!r}... is {len(name)} characters long; "
                         f"tvmc takes names of at most {NAME_LIMIT}")  # fmt: skip
    if any(unicodedata.category(c) in _UNPRINTABLE for c in name):
        raise ModelError(f"{what} {name!r} holds control characters or line breaks")


def dtype_name(elem_type: int, what: str) -> str:
    """Our dtype for an ONNX element type: a ModelError when ONNX has no such type, an
    UnsupportedModelError when tvmc does not support it."""
    if elem_type == TensorProto.UNDEFINED:
        raise ModelError(f"{what} has no element type")
    if elem_type not in _TYPE_NAMES:
        raise ModelError(f"{what} has element type {elem_type}, which is not an ONNX element type")
    return onnx_dtype(elem_type, what)


def check_tensor(tensor: TensorProto, what: str) -> None:
    """A tensor's type is supported and its data holds exactly the elements its dims say."""
    dtype = dtype_name(tensor.data_type, what)
    if tensor.data_location == TensorProto.EXTERNAL:
        raise ModelError(f"{what} keeps its data outside the model, where tvmc did not load it")
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"{what} has a negative dimension: dims {dims}")
    expected = math.prod(dims)
    bits = PACKED_BITS.get(dtype)
    if tensor.HasField("raw_data"):
        size = math.ceil(expected * bits / 8) if bits else expected * np.dtype(dtype).itemsize
        if len(tensor.raw_data) != size:
            raise ModelError(f"{what}: dims {dims} hold {expected} {dtype} elements "
                             f"({size} bytes), its raw data {len(tensor.raw_data)} "
                             "bytes")  # fmt: skip
        return
    held = len(getattr(tensor, helper.tensor_dtype_to_field(tensor.data_type)))
    entries = math.ceil(expected * bits / 8) if bits else expected  # packed like the raw bytes
    if held != entries:
        raise ModelError(f"{what}: dims {dims} hold {expected} elements, its data {held}")


def _names(model: onnx.ModelProto) -> Iterator[tuple[str | bytes, str]]:
    graph = model.graph
    yield graph.name, "the graph name"
    for value in [*graph.input, *graph.output, *graph.value_info]:
        yield value.name, "value"
    for tensor in graph.initializer:
        yield tensor.name, "initializer"
    for opset in model.opset_import:
        yield opset.domain, "opset domain"
    for node in graph.node:
        yield node.name, "node name"
        yield node.op_type, "op type"
        yield node.domain, "node domain"
        for name in [*node.input, *node.output]:
            yield name, f"tensor name (in node {node.name!r})"
        for attr in node.attribute:
            yield attr.name, f"attribute name (in node {node.name!r})"


def _unique(names: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if not name:
            raise ModelError(f"the graph has {what} with an empty name")
        if name in seen:
            raise ModelError(f"the graph names {what} {name!r} twice")
        seen.add(name)


def check_model(model: onnx.ModelProto) -> None:
    """The graph's structure: names, inputs, outputs, initializers, tensors made once."""
    for name, what in _names(model):
        check_name(name, what)
    graph = model.graph
    if graph.sparse_initializer:
        raise UnsupportedModelError("the model has sparse initializers; tvmc does not support them")
    if not graph.output:
        raise ModelError("the graph has no outputs")
    _unique((o.name for o in graph.output), "an output")
    _unique((i.name for i in graph.input), "an input")
    _unique((t.name for t in graph.initializer), "an initializer")
    initializers = {t.name for t in graph.initializer}
    for value in graph.input:
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim if d.HasField("dim_value")]
        if value.name not in initializers and any(d < 0 for d in dims):
            raise ModelError(f"input {value.name!r} has a negative dimension: {dims}")
    for tensor in graph.initializer:
        check_tensor(tensor, f"initializer {tensor.name!r}")
    made = {i.name: "a graph input" for i in graph.input}
    made.update(dict.fromkeys(initializers, "an initializer"))
    for node in graph.node:
        for output in filter(None, node.output):
            if output in made:
                raise ModelError(f"{node.op_type} node {node.name!r} writes {output!r}, which "
                                 f"{made[output]} already defines")  # fmt: skip
            made[output] = f"{node.op_type} node {node.name!r}"


# onnx checker findings the converters decide on, as onnxruntime does: an op tvmc knows but
# onnx does not at this opset, an op deprecated at its opset (GroupNormalization 18 still
# runs), an omitted leading output (TopK's values when only the indices are used)
TOLERATED_CHECKS = ("No Op registered", "is deprecated in domain_version",
                    "is marked single but has an empty string")  # fmt: skip


def check_nodes(model: onnx.ModelProto, opset: int) -> None:
    """Each node of the default domain, those of subgraphs included: onnx's node checker, then
    attribute values."""
    context = checker.C.CheckerContext()
    context.ir_version = min(max(model.ir_version, 3), onnx.IR_VERSION)  # the checker's range
    context.opset_imports = {"": opset}  # only default-domain nodes are checked
    for node, inside in walk(model.graph.node):
        if node.domain not in DEFAULT_DOMAINS:
            continue
        where = f"{node.op_type} node {node.name!r}" + (f" in {inside}" if inside else "")
        try:
            checker.check_node(_without_bodies(node), context, checker.C.LexicalScopeContext())
        except checker.ValidationError as exc:
            message = str(exc).strip().splitlines()[0]
            if not any(tolerated in message for tolerated in TOLERATED_CHECKS):
                raise ModelError(f"{where}: {message}") from None
        for attr in node.attribute:
            check_attribute(node.op_type, attr, where)


def _without_bodies(node: onnx.NodeProto) -> onnx.NodeProto:
    """`node` with its subgraphs emptied of nodes and outputs: the walk checks those nodes one by
    one, while onnx's checker would take the outer-scope names a body reads for undefined ones."""
    if not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in node.attribute):  # fmt: skip
        return node
    node = copy.deepcopy(node)
    for attr in node.attribute:
        for graph in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
            del graph.node[:], graph.output[:]  # outputs the nodes made: the converter checks
    return node


def check_attribute(op_type: str, attr: onnx.AttributeProto, where: str) -> None:
    """Tensors in attributes hold their data; extents, counts and element types in range."""
    what = f"{where}: attribute {attr.name!r}"
    if attr.type == onnx.AttributeProto.TENSOR:
        check_tensor(attr.t, what)
    elif attr.type == onnx.AttributeProto.TENSORS:
        for tensor in attr.tensors:
            check_tensor(tensor, what)
    elif attr.type == onnx.AttributeProto.INT and attr.name in TYPE_ATTRIBUTES:
        if attr.i not in _TYPE_NAMES or attr.i == TensorProto.UNDEFINED:
            raise ModelError(f"{what} is {attr.i}, which is not an ONNX element type")
    ranges = WINDOW_RANGES if op_type in WINDOW_OPS else EXTENT_RANGES
    if attr.name not in ranges or attr.type not in (
        onnx.AttributeProto.INT,
        onnx.AttributeProto.INTS,
    ):
        return
    low, high = ranges[attr.name]
    values = [attr.i] if attr.type == onnx.AttributeProto.INT else list(attr.ints)
    bad = [v for v in values if not low <= v <= high]
    if bad:
        raise ModelError(f"{what} holds {bad[0]}; each value must lie in [{low}, {high}]")
