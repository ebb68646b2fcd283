"""The state a converter works on: the graph being built, constants, and how to add a node."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from tvmc.errors import ModelError, NonConstantInputError, UnsupportedModelError
from tvmc.graph import DTYPES, Graph, Node, TensorType
from tvmc.ops import get_op
from tvmc.ops.registry import evaluate_node


@dataclass
class OnnxNode:
    """An ONNX node with decoded attributes (tensors as numpy arrays, strings as str)."""

    op_type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""

    def input(self, index: int) -> str:
        """The name of input `index`, or '' when it is absent (optional inputs)."""
        return self.inputs[index] if index < len(self.inputs) else ""

    def describe(self) -> str:
        return f"{self.op_type} node {self.name!r}"


class ConvertContext:
    """Builds a Graph while converting; nodes whose inputs are all constant fold at once."""

    def __init__(self, graph: Graph, opset: int, reserved: set[str] | None = None):
        self.graph = graph
        self.opset = opset
        self.current: OnnxNode | None = None
        # names the model uses verbatim (top-level tensors, maybe not converted yet): fresh names
        # made for intermediates and inlined subgraphs must not take them
        self.reserved: set[str] = set(reserved or ())
        # subgraph name -> graph name, innermost last (If/Loop/Scan bodies being inlined)
        self.scopes: list[dict[str, str]] = []
        self.unrolled = 0  # subgraph nodes converted so far (bounded: see converters.subgraph)

    # ---- reading -------------------------------------------------------------------------------
    def type(self, name: str) -> TensorType:
        return self.graph.types[name]

    def resolve(self, name: str) -> str:
        """The graph name of tensor `name` as the node being converted sees it (outer scopes)."""
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return name

    def fresh_name(self, hint: str) -> str:
        """A tensor name neither in the graph nor reserved, derived from `hint`; reserves it."""
        name, n = hint, 0
        while name in self.graph.types or name in self.reserved:
            n += 1
            name = f"{hint}_{n}"
        self.reserved.add(name)
        return name

    def const(self, name: str) -> np.ndarray | None:
        """The value of a constant tensor, or None for a runtime value (or an absent input).

        An empty tensor is a constant too: it has no values to wait for (reductions over it fold).
        """
        if not name:
            return None
        if name not in self.graph.params and self.graph.types[name].size == 0:
            typ = self.graph.types[name]
            return np.empty(typ.shape, typ.dtype)
        return self.graph.params.get(name)

    def require_const(self, node: OnnxNode, index: int, what: str) -> np.ndarray:
        """Input `index` of `node` as a constant; an error when it is computed at run time."""
        value = self.const(node.input(index))
        if value is None:
            raise NonConstantInputError(
                f"{node.describe()}: input {index} ({what}) must be a constant after folding; "
                "tvmc compiles static shapes only",
                node.input(index),
            )
        return value

    def attr_or_input(self, node: OnnxNode, attr: str, index: int, default: Any = None) -> Any:
        """Opset data: a value that was attribute `attr` in old opsets, input `index` in new."""
        if attr in node.attrs:
            return node.attrs[attr]
        if node.input(index):
            return self.require_const(node, index, attr).tolist()
        return default

    # ---- writing -------------------------------------------------------------------------------
    def add_const(self, array: np.ndarray, name: str | None = None) -> str:
        """A new constant tensor; returns its name."""
        array = np.require(array, requirements="C")  # keeps 0-d arrays 0-d
        name = name or self.fresh_name(f"{self._hint()}_const")
        self.graph.params[name] = array
        self.graph.types[name] = TensorType.of(array)
        return name

    def add(
        self,
        op: str,
        inputs: list[str],
        attrs: dict[str, Any] | None = None,
        outputs: list[str] | None = None,
        num_outputs: int = 1,
    ) -> list[str]:
        """Add node `op` (our op name); returns output names. Constant inputs fold immediately."""
        opdef = get_op(op)
        where = self.current.describe() if self.current else op
        node_inputs = list(inputs)
        given, (least, most) = sum(1 for n in node_inputs if n), opdef.num_inputs
        if not least <= given <= most:
            count = str(least) if least == most else f"{least} to {most}"
            raise ModelError(f"{where}: {op} takes {count} inputs, got {given}")
        try:
            attrs = opdef.normalize_attrs(attrs or {}, where)
            types = opdef.infer(attrs, [self.type(n) for n in node_inputs if n])
        except ValueError as exc:
            raise ModelError(f"{where}: {exc}") from None
        if outputs is None:
            outputs = [self.fresh_name(f"{self._hint()}_{op.lower()}") for _ in types]
        outputs = list(outputs)[: len(types)]
        if len(outputs) < len(types):
            outputs += [
                self.fresh_name(f"{outputs[0]}_{i}") for i in range(len(outputs), len(types))
            ]
        node = Node(op, node_inputs, outputs, attrs, self._node_name(op))
        values = [self.const(n) for n in node_inputs if n]
        if values and all(v is not None for v in values):
            for name, array in zip(outputs, evaluate_node(node, values)):
                self.add_const(array, name)
            return outputs
        for name, typ in zip(outputs, types):
            self.graph.types[name] = typ
        self.graph.nodes.append(node)
        return outputs

    def _hint(self) -> str:
        if self.current is None:
            return "t"
        return self.current.outputs[0] if self.current.outputs else self.current.name or "t"

    def _node_name(self, op: str) -> str:
        base = self.current.name if self.current and self.current.name else op
        taken = {n.name for n in self.graph.nodes[-8:]}
        return base if base not in taken else f"{base}/{op}"


def onnx_dtype(elem_type: int, what: str) -> str:
    """Our dtype name for an ONNX element type."""
    try:
        name = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        name = ""
    if name not in DTYPES:
        try:
            label = onnx.TensorProto.DataType.Name(elem_type)
        except ValueError:
            label = str(elem_type)
        raise UnsupportedModelError(
            f"{what} has element type {label}, which tvmc does not support; supported: "
            f"{', '.join(DTYPES)}"
        )
    return name
