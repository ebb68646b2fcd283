"""The model mutator: a seed ONNX model with one to three structured changes (dims, element
types, attributes, names, node inputs and outputs, initializers, graph inputs and outputs,
opsets) and now and then byte-level damage, then `tvmc load` or `tvmc compile` on it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import AttributeProto, helper, numpy_helper

from tests.fuzz import values
from tests.fuzz.harness import Case
from tests.fuzz.seeds import SEEDS
from tvmc.frontend.converters import CONVERTERS

Mutation = Callable[[st.DrawFn, onnx.ModelProto], str]
ATTRIBUTE_NAMES = ["pads", "strides", "kernel_shape", "dilations", "group", "axis", "axes", "to",
                   "perm", "keepdims", "value", "mode", "auto_pad", "output_padding",
                   "output_shape", "epsilon", "alpha", "transB", "split", "blocksize"]  # fmt: skip


def _pick(draw: st.DrawFn, items):
    return draw(st.sampled_from(list(items))) if len(items) else None


def input_dim(draw: st.DrawFn, model: onnx.ModelProto) -> str:
    if not model.graph.input:
        return "no input"
    value = _pick(draw, model.graph.input)
    dims = value.type.tensor_type.shape.dim
    if not dims or draw(st.booleans()) and draw(st.booleans()):
        how = draw(st.sampled_from(["clear", "param", "add"]))
        if how == "clear":
            value.type.tensor_type.ClearField("shape")
        elif how == "param" and dims:
            dims[draw(st.integers(0, len(dims) - 1))].dim_param = draw(values.names)
        else:
            dims.add().dim_value = draw(values.ints.filter(lambda v: v >= -(2**63)))
        return f"input {value.name!r}: shape {how}"
    i = draw(st.integers(0, len(dims) - 1))
    dims[i].dim_value = draw(values.ints)
    return f"input {value.name!r}: dim {i} = {dims[i].dim_value}"


def elem_type(draw: st.DrawFn, model: onnx.ModelProto) -> str:
    graph = model.graph
    kind = draw(st.sampled_from(["input", "output", "initializer"]))
    new = draw(values.elem_types)
    if kind == "initializer" and graph.initializer:
        tensor = _pick(draw, graph.initializer)
        tensor.data_type = new
        return f"initializer {tensor.name!r}: data_type {new}"
    value = _pick(draw, graph.input if kind == "input" else graph.output)
    if value is None:
        return f"no {kind}"
    value.type.tensor_type.elem_type = new
    return f"{kind} {value.name!r}: elem_type {new}"


def initializer(draw: st.DrawFn, model: onnx.ModelProto) -> str:
    if not model.graph.initializer:
        return "no initializer"
    tensor = _pick(draw, model.graph.initializer)
    how = draw(st.sampled_from(["dims", "data", "values", "remove", "damage"]))
    if how == "dims":
        dims = draw(st.lists(values.ints, max_size=5))
        tensor.ClearField("dims")
        tensor.dims.extend(dims)
        return f"initializer {tensor.name!r}: dims {dims}"
    if how == "remove":
        model.graph.initializer.remove(tensor)
        return f"initializer {tensor.name!r} removed"
    if how == "damage" and tensor.HasField("raw_data"):
        tensor.raw_data, what = draw(values.damaged(tensor.raw_data))
        return f"initializer {tensor.name!r}: raw data {what}"
    try:
        array = numpy_helper.to_array(tensor)
    except Exception:  # damaged by an earlier change
        return f"initializer {tensor.name!r}: unreadable, left as is"
    kind = array.dtype.kind
    if kind not in "iuf":
        return f"initializer {tensor.name!r}: {array.dtype}, left as is"
    if kind in "iu":
        picked = draw(st.lists(values.ints, min_size=max(array.size, 1), max_size=array.size + 2))
        info = np.iinfo(array.dtype)
        new = np.array([min(max(v, info.min), info.max) for v in picked], array.dtype)
    else:
        picked = draw(st.lists(values.floats, min_size=max(array.size, 1), max_size=array.size + 2))
        with np.errstate(all="ignore"):
            new = np.array(picked, np.float64).astype(array.dtype)
    if draw(st.booleans()) and new.size >= array.size:
        new = new[: array.size].reshape(array.shape)
    tensor.CopyFrom(numpy_helper.from_array(new, tensor.name))
    return f"initializer {tensor.name!r}: values {new.reshape(-1)[:6].tolist()} shape {new.shape}"


def _attribute_value(draw: st.DrawFn, name: str) -> AttributeProto:
    kind = draw(st.sampled_from(["int", "ints", "float", "string", "tensor", "floats"]))
    if kind == "int":
        return helper.make_attribute(name, draw(values.ints))
    if kind == "ints":
        return helper.make_attribute(name, draw(values.int_lists), attr_type=AttributeProto.INTS)
    if kind == "float":
        return helper.make_attribute(name, draw(values.floats))
    if kind == "floats":
        items = draw(st.lists(values.floats, max_size=4))
        return helper.make_attribute(name, items, attr_type=AttributeProto.FLOATS)
    if kind == "string":
        return helper.make_attribute(name, draw(values.names))
    array = np.array(draw(values.int_lists), np.int64)
    return helper.make_attribute(name, numpy_helper.from_array(array))


def attribute(draw: st.DrawFn, model: onnx.ModelProto) -> str:
    if not model.graph.node:
        return "no node"
    node = _pick(draw, model.graph.node)
    how = draw(st.sampled_from(["value", "value", "kind", "add", "remove", "undefined"]))
    if how == "add" or not node.attribute:
        attr = _attribute_value(draw, draw(st.sampled_from(ATTRIBUTE_NAMES)))
        node.attribute.append(attr)
        return f"node {node.name!r}: add attribute {attr.name}={helper.get_attribute_value(attr)}"
    attr = _pick(draw, node.attribute)
    if how == "remove":
        node.attribute.remove(attr)
        return f"node {node.name!r}: remove attribute {attr.name}"
    if how == "undefined":
        attr.type = AttributeProto.UNDEFINED
        return f"node {node.name!r}: attribute {attr.name} of type UNDEFINED"
    if how == "value" and attr.type == AttributeProto.INT:
        attr.i = draw(values.ints)
        return f"node {node.name!r}: {attr.name}={attr.i}"
    if how == "value" and attr.type == AttributeProto.INTS:
        attr.ClearField("ints")
        attr.ints.extend(draw(values.int_lists))
        return f"node {node.name!r}: {attr.name}={list(attr.ints)}"
    if how == "value" and attr.type == AttributeProto.FLOAT:
        attr.f = draw(values.floats)
        return f"node {node.name!r}: {attr.name}={attr.f}"
    new = _attribute_value(draw, attr.name)
    node.attribute.remove(attr)
    node.attribute.append(new)
    return f"node {node.name!r}: {attr.name} -> {AttributeProto.AttributeType.Name(new.type)}"


def rename(draw: st.DrawFn, model: onnx.ModelProto) -> str:
    graph = model.graph
    name = draw(values.names)
    kind = draw(st.sampled_from(["node", "tensor", "input", "output", "graph", "op"]))
    if not graph.node or not graph.input or not graph.output:
        kind = "graph"
    if kind == "graph":
        graph.name = name
    elif kind == "op":
        node = _pick(draw, graph.node)
        node.op_type = draw(st.one_of(st.sampled_from(sorted(CONVERTERS)), values.names))
        return f"node {node.name!r}: op_type {node.op_type!r}"
    elif kind == "node":
        _pick(draw, graph.node).name = name
    elif kind in ("input", "output"):
        value = _pick(draw, graph.input if kind == "input" else graph.output)
        value.name = name
    else:  # a tensor, everywhere it appears
        tensors = sorted({t for n in graph.node for t in [*n.input, *n.output] if t})
        old = _pick(draw, tensors) or ""
        for node in graph.node:
            node.input[:] = [name if t == old else t for t in node.input]
            node.output[:] = [name if t == old else t for t in node.output]
        for value in [*graph.input, *graph.output, *graph.initializer]:
            if value.name == old:
                value.name = name
        return f"tensor {old!r} renamed {name[:40]!r}"
    return f"{kind} renamed {name[:40]!r}"


def node_edges(draw: st.DrawFn, model: onnx.ModelProto) -> str:
    graph = model.graph
    if not graph.node:
        return "no node"
    node = _pick(draw, graph.node)
    tensors = sorted({t for n in graph.node for t in [*n.input, *n.output]} | {"", "nowhere"})
    how = draw(st.sampled_from(["drop_input", "add_input", "swap", "drop_output", "add_output",
                                "reorder", "duplicate", "remove"]))  # fmt: skip
    if how == "drop_input" and node.input:
        del node.input[draw(st.integers(0, len(node.input) - 1))]
    elif how == "add_input":
        node.input.append(draw(st.sampled_from(tensors)))
    elif how == "swap" and node.input:
        node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(tensors))
    elif how == "drop_output" and node.output:
        del node.output[-1]
    elif how == "add_output":
        node.output.append(draw(st.sampled_from([*tensors, "extra"])))
    elif how == "reorder":
        nodes = list(graph.node)
        order = draw(st.permutations(range(len(nodes))))
        graph.ClearField("node")
        graph.node.extend(nodes[i] for i in order)
    elif how == "duplicate":
        graph.node.append(node)
    elif how == "remove":
        graph.node.remove(node)
    return f"node {node.name!r}: {how}"


def graph_io(draw: st.DrawFn, model: onnx.ModelProto) -> str:
    graph = model.graph
    how = draw(st.sampled_from(["no_outputs", "dup_input", "dup_output", "extra_output",
                                "drop_input", "opset", "ir_version", "domain"]))  # fmt: skip
    if how == "no_outputs":
        graph.ClearField("output")
    elif how == "dup_input" and graph.input:
        graph.input.append(graph.input[0])
    elif how == "dup_output" and graph.output:
        graph.output.append(graph.output[0])
    elif how == "extra_output":
        graph.output.append(helper.make_empty_tensor_value_info(draw(values.names)))
    elif how == "drop_input" and graph.input:
        del graph.input[0]
    elif how == "opset":
        version = draw(st.one_of(st.sampled_from([0, 1, 6, 7, 9, 11, 13, 18, 21, 22, 23, 1000]),
                                 values.ints))  # fmt: skip
        model.opset_import[0].version = version
        return f"opset {version}"
    elif how == "ir_version":
        model.ir_version = draw(st.integers(-1, 2**40))
        return f"ir_version {model.ir_version}"
    elif how == "domain" and graph.node:
        node = _pick(draw, graph.node)
        node.domain = draw(st.sampled_from(["ai.onnx", "com.microsoft", "ai.onnx.ml", "x"]))
        return f"node {node.name!r}: domain {node.domain}"
    return how


MUTATIONS: list[Mutation] = [input_dim, elem_type, initializer, attribute, attribute, rename,
                             node_edges, graph_io]  # fmt: skip


@st.composite
def model_cases(draw: st.DrawFn, compile_share: float = 0.15) -> Case:
    """A mutated seed model and the command to run on it."""
    seed = draw(st.sampled_from(sorted(SEEDS)))
    model = SEEDS[seed]()
    changes = [f"seed {seed}"]
    for _ in range(draw(st.integers(1, 3))):
        mutate = draw(st.sampled_from(MUTATIONS))
        changes.append(f"{mutate.__name__}: {mutate(draw, model)}")
    data = model.SerializeToString()
    data = data.replace(values.BAD_UTF8_TOKEN.encode(), values.BAD_UTF8_BYTES)
    if draw(st.integers(0, 19)) == 0:
        data, what = draw(values.damaged(data))
        changes.append(f"bytes: {what}")
    if draw(st.floats(0, 1)) < compile_share:
        args = ["compile", "model.onnx", "-o", "out.tar"]
    else:
        args = ["load", "model.onnx"]
    return Case("model", args, {"model.onnx": data}, changes)
