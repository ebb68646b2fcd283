"""Decomposed LayerNorm and RMSNorm become one LayerNormalization or RMSNormalization node.

Exporters before opset 17 (and T5's and Llama's own RMSNorm at any opset) write a norm as
elementwise ops around two ReduceMeans:

    LayerNorm: d = x - mean(x); y = d / sqrt(mean(d**2) + eps) [* gamma] [+ beta]
    RMSNorm:   y = x * 1/sqrt(mean(x**2) + eps) [* gamma]        (or x / sqrt(...))

Each reduction is a kernel of its own and the broadcasts in between are stored: five kernels
where the norm's row template makes one pass over each row. The matched forms (x**2 as Pow(t, 2)
or Mul(t, t), the division as Div or as Mul by a Reciprocal, commutative operands either way
round) compute what the op does, the variance of the centred values included; every tensor in
between has no reader outside the pattern, and the statistics reduce over trailing dims.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import Graph, Node, TensorType
from tvmc.ops.common import broadcasts_to

COMMUTATIVE = ("Add", "Mul")


class _Matcher:
    """Queries over one graph: producers, readers, scalar constants."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.producers = graph.producers()
        self.consumers = graph.consumers()
        self.outputs = set(graph.outputs)

    def node(self, tensor: str, op: str) -> Node | None:
        """The producer of `tensor` when it is an `op` node."""
        node = self.producers.get(tensor)
        return node if node is not None and node.op == op else None

    def private(self, tensor: str, readers: int = 1) -> bool:
        """`tensor` is read by exactly `readers` nodes and is no graph output."""
        return tensor not in self.outputs and len(self.consumers.get(tensor, [])) == readers

    def sole_reader(self, tensor: str, op: str) -> Node | None:
        """The only reader of `tensor` when it is an `op` node."""
        if not self.private(tensor):
            return None
        (reader,) = self.consumers[tensor]
        return reader if reader.op == op else None

    def scalar(self, tensor: str) -> float | None:
        value = self.graph.params.get(tensor)
        return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None

    def other(self, node: Node, tensor: str) -> str | None:
        """The operand of the commutative `node` (Add, Mul) beside `tensor`."""
        if node.op not in COMMUTATIVE or tensor not in node.inputs:
            return None
        a, b = node.inputs
        return b if a == tensor else a

    def square_of(self, tensor: str) -> str | None:
        """t when `tensor` is t**2 (Pow by 2 or Mul(t, t)) read once."""
        if (pow_ := self.node(tensor, "Pow")) is not None and self.scalar(pow_.inputs[1]) == 2.0:
            return pow_.inputs[0]
        if (mul := self.node(tensor, "Mul")) is not None and mul.inputs[0] == mul.inputs[1]:
            return mul.inputs[0]
        return None

    def row_mean(self, tensor: str) -> tuple[str, int] | None:
        """(input, first axis) when `tensor` is a keepdims ReduceMean over trailing dims."""
        mean = self.node(tensor, "ReduceMean")
        if mean is None or not mean.attrs.get("keepdims") or len(mean.inputs) != 1:
            return None
        ndim = self.graph.types[mean.inputs[0]].ndim
        axes = sorted(a % ndim for a in mean.attrs.get("axes") or ())
        if not axes or axes != list(range(axes[0], ndim)):
            return None
        return mean.inputs[0], axes[0]


def _match(m: _Matcher, sqrt: Node) -> tuple[str, list[Node], list[str], dict] | None:
    """(norm op, matched nodes in graph order, its inputs, its attrs) around one Sqrt."""
    add = m.node(sqrt.inputs[0], "Add")
    if add is None or not m.private(add.outputs[0]):
        return None
    for variance in add.inputs:
        eps = m.scalar(m.other(add, variance) or "")
        mean_sq = m.row_mean(variance)
        if eps is not None and mean_sq is not None and m.private(variance):
            break
    else:
        return None
    square, axis = mean_sq
    base = m.square_of(square)
    if base is None or not m.private(square):
        return None
    matched = [m.producers[square], m.producers[variance], add, sqrt]
    # (x - mean(x)) whose only readers are the pattern's: a LayerNorm; any other base: an RMSNorm
    x, op, sub = base, "RMSNormalization", m.node(base, "Sub")
    if sub is not None and m.private(base, readers=2) and m.private(sub.inputs[1]):
        if m.row_mean(sub.inputs[1]) == (sub.inputs[0], axis):
            x, op = sub.inputs[0], "LayerNormalization"
            matched = [m.producers[sub.inputs[1]], sub, *matched]
    typ = m.graph.types[x]
    stats_shape = typ.shape[:axis] + (1,) * (typ.ndim - axis)
    if typ.dtype != "float32" or m.graph.types[sqrt.outputs[0]].shape != stats_shape:
        return None
    if m.graph.types[base] != typ:
        return None
    std = sqrt.outputs[0]
    if (div := m.sole_reader(std, "Div")) is not None and div.inputs == [base, std]:
        matched.append(div)  # x / std
    elif (inv := m.sole_reader(std, "Reciprocal")) is not None:
        mul = m.sole_reader(inv.outputs[0], "Mul")  # x * (1 / std)
        if mul is None or m.other(mul, inv.outputs[0]) != base:
            return None
        matched += [inv, mul]
    else:
        return None
    row = typ.shape[axis:]
    scale = bias = None
    if (found := _affine(m, matched[-1], "Mul", typ, row)) is not None:
        scale, reader = found
        matched.append(reader)
    if op == "LayerNormalization" and (found := _affine(m, matched[-1], "Add", typ, row)):
        bias, reader = found
        matched.append(reader)
    if scale is None:  # no gamma: a scale of ones
        scale = m.graph.fresh_name(f"{matched[-1].outputs[0]}_scale")
        m.graph.params[scale] = np.ones(row, np.float32)
        m.graph.types[scale] = TensorType(row, "float32")
    inputs = [x, scale, *([bias] if bias else [])]
    attrs = {"axis": axis, "epsilon": eps}
    if op == "RMSNormalization":
        attrs["stash_type"] = "float32"
    return op, matched, inputs, attrs


def _affine(
    m: _Matcher, node: Node, op: str, typ: TensorType, row: tuple[int, ...]
) -> tuple[str, Node] | None:
    """(param, reader) when the only reader of `node`'s output is `op` with a constant that
    varies along the normalized row only and keeps the type (gamma, beta); a param with leading
    1s is given the row's rank, as the norm ops take it."""
    tensor = node.outputs[0]
    reader = m.sole_reader(tensor, op)
    param = m.other(reader, tensor) if reader is not None else None
    if param is None or param not in m.graph.params or m.graph.types[reader.outputs[0]] != typ:
        return None
    value = m.graph.params[param]
    lead = max(value.ndim - len(row), 0)
    if any(d != 1 for d in value.shape[:lead]) or not broadcasts_to(value.shape[lead:], row):
        return None
    if lead:
        param = m.graph.fresh_name(param)
        m.graph.params[param] = np.ascontiguousarray(value.reshape(value.shape[lead:]))
        m.graph.types[param] = TensorType.of(m.graph.params[param])
    return param, reader


def match_decomposed_norms(graph: Graph) -> Graph:
    """Each decomposed LayerNorm or RMSNorm becomes the one op (the module docstring's forms)."""
    m = _Matcher(graph)
    replaced: dict[int, Node] = {}  # id of a pattern's last node -> the norm node
    removed: set[int] = set()
    for sqrt in graph.nodes:
        if sqrt.op != "Sqrt" or (found := _match(m, sqrt)) is None:
            continue
        op, matched, inputs, attrs = found
        last = matched[-1]
        replaced[id(last)] = Node(op, inputs, [last.outputs[0]], attrs, name=last.name,
                                  origin=last.origin, origin_op=last.origin_op)  # fmt: skip
        removed.update(id(n) for n in matched[:-1])
    if replaced:
        graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed]
        graph.prune_types()
    return graph
