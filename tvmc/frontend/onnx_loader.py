"""Read an ONNX file into a Graph: inputs with static shapes, constants folded, ops converted."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Mapping

import onnx
from onnx import numpy_helper

from tvmc.errors import InputError, ModelError, UnsupportedModelError, did_you_mean
from tvmc.frontend import bounds
from tvmc.frontend.check import check_model, check_nodes, dtype_name
from tvmc.frontend.converters import CONVERTERS
from tvmc.frontend.converters.subgraph import convert_nodes, walk
from tvmc.graph import Graph, TensorType

logger = logging.getLogger("tvmc.frontend")

MIN_OPSET, MAX_OPSET = 7, 22
_DEFAULT_DOMAINS = ("", "ai.onnx")


def read_onnx(path: str) -> onnx.ModelProto:
    """Parse an ONNX file with its external data; ModelError on anything unreadable."""
    if not os.path.exists(path):
        raise ModelError(f"model file {path!r} does not exist")
    if os.path.isdir(path):
        raise ModelError(f"{path!r} is a directory, not a model file")
    if os.path.getsize(path) == 0:
        raise ModelError(f"model file {path!r} is empty")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise ModelError(
            f"{path!r} is not a valid ONNX model (truncated or not ONNX?): {exc}"
        ) from None
    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{path!r} holds no ONNX graph (is it really an ONNX model?)")
    try:
        onnx.external_data_helper.load_external_data_for_model(
            model, os.path.dirname(os.path.abspath(path))
        )
    except (OSError, ValueError, onnx.checker.ValidationError) as exc:
        raise ModelError(f"cannot read the external data of {path!r}: {exc}") from None
    return model


def model_opset(model: onnx.ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in _DEFAULT_DOMAINS:
            return entry.version
    return MAX_OPSET


# Ops refused by design, not yet to be written: tvmc compiles static shapes, and these ops'
# output shapes depend on the values of their inputs (detectors' box selection).
DATA_DEPENDENT = ("NonZero", "Unique", "NonMaxSuppression")


def check_supported(model: onnx.ModelProto) -> None:
    """One error listing every unsupported op type, its count and its first node, those inside
    subgraphs (If branches, Loop and Scan bodies) included, and why for ops refused by design."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for node, where in walk(model.graph.node):
        key = node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
        if node.domain in _DEFAULT_DOMAINS and node.op_type in CONVERTERS:
            continue
        counts[key] += 1
        name = repr(node.name or (node.output[0] if node.output else "?"))
        first.setdefault(key, f"{name} in {where}" if where else name)
    if counts:
        why = " [its output shape depends on the data, and tvmc compiles static shapes]"
        listing = ", ".join(
            f"{op} ({n} node{'s' * (n > 1)}, first {first[op]})" + why * (op in DATA_DEPENDENT)
            for op, n in counts.most_common()
        )
        raise UnsupportedModelError(f"the model uses ops tvmc does not support: {listing}")


def graph_inputs(
    model: onnx.ModelProto,
    shape_dict: Mapping[str, tuple[int, ...]] | None,
    dtype_dict: Mapping[str, str] | None,
) -> dict[str, TensorType]:
    """The runtime inputs (not initializers) with their static types."""
    initializers = {init.name for init in model.graph.initializer}
    declared = [i for i in model.graph.input if i.name not in initializers]
    names = [i.name for i in declared]
    for what, given in (("--input-shapes", shape_dict), ("--input-dtypes", dtype_dict)):
        unknown = sorted(set(given or {}) - set(names))
        if unknown:
            raise InputError(
                f"{what} names {unknown}, not inputs of the model; its inputs: {names}."
                + did_you_mean(unknown[0], names)
            )
    types: dict[str, TensorType] = {}
    for value in declared:
        tensor_type = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise UnsupportedModelError(f"input {value.name!r} is not a tensor")
        dtype = (dtype_dict or {}).get(value.name) or dtype_name(
            tensor_type.elem_type, f"input {value.name!r}"
        )
        if shape_dict and value.name in shape_dict:
            shape = tuple(shape_dict[value.name])
            declared_rank = len(tensor_type.shape.dim)
            if tensor_type.HasField("shape") and len(shape) != declared_rank:
                dims = [d.dim_value or d.dim_param or "?" for d in tensor_type.shape.dim]
                raise InputError(
                    f"--input-shapes gives {value.name!r} {len(shape)} dimension(s) "
                    f"{list(shape)}; the model declares {declared_rank}: {dims}"
                )
        else:
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
            if any(d is None for d in dims):
                shown = [d.dim_param or "?" if d.dim_value == 0 else d.dim_value
                         for d in tensor_type.shape.dim]  # fmt: skip
                example = ",".join("1" if isinstance(d, str) else str(d) for d in shown)
                raise UnsupportedModelError(
                    f"input {value.name!r} has a dynamic shape {shown}; give a static one, "
                    f'e.g. --input-shapes "{value.name}:[{example}]"'
                )
            shape = tuple(dims)  # type: ignore[arg-type]
        types[value.name] = TensorType(shape, dtype)
    return types


def convert_model(
    model: onnx.ModelProto,
    shape_dict: Mapping[str, tuple[int, ...]] | None = None,
    dtype_dict: Mapping[str, str] | None = None,
) -> Graph:
    """Convert an in-memory ONNX model into a Graph with every shape known."""
    opset = model_opset(model)
    if opset < MIN_OPSET:
        raise UnsupportedModelError(
            f"the model uses opset {opset}; tvmc supports opsets {MIN_OPSET} to {MAX_OPSET} "
            "(upgrade it with onnx.version_converter)"
        )
    if opset > MAX_OPSET:
        logger.warning(
            "opset %d is newer than %d; converting with the newest rules", opset, MAX_OPSET
        )
    check_model(model)
    check_supported(model)
    # onnx's checker and schemas know opsets up to onnx's own (and take int32: 2**62 overflows)
    check_nodes(model, min(opset, onnx.defs.onnx_opset_version()))
    inputs = graph_inputs(model, shape_dict, dtype_dict)
    bounds.check_inputs(inputs)
    graph = Graph(list(inputs), [o.name for o in model.graph.output], [], dict(inputs), {},
                  model.graph.name or "main")  # fmt: skip
    ctx = bounds.BoundedContext(graph, opset, top_level_names(model.graph))
    for init in model.graph.initializer:
        ctx.add_const(numpy_helper.to_array(init), init.name)
    convert_nodes(ctx, model.graph.node)
    undefined = [o for o in graph.outputs if o not in graph.types]
    if undefined:
        raise ModelError(f"graph outputs {undefined} are never produced")
    unique_node_names(graph)
    return graph


def top_level_names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor name of the main graph: names made while converting must avoid them."""
    names = {v.name for v in (*graph.input, *graph.output)} | {i.name for i in graph.initializer}
    return names | {name for node in graph.node for name in node.output}


def unique_node_names(graph: Graph) -> None:
    """Node names identify nodes in later stages (fusion, profiles, tuning): make them unique."""
    seen: set[str] = set()
    for node in graph.nodes:
        name, n = node.name or node.op, 1
        while name in seen:
            n += 1
            name = f"{node.name or node.op}_{n}"
        node.name = name
        seen.add(name)


def load_onnx(
    path: str,
    shape_dict: Mapping[str, tuple[int, ...]] | None = None,
    dtype_dict: Mapping[str, str] | None = None,
) -> Graph:
    """Read and convert an ONNX file (external data included)."""
    return convert_model(read_onnx(path), shape_dict, dtype_dict)
