"""The graph IR: tensors are named values with a static `TensorType`; nodes read and write them."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvmc.dtypes import DTYPES, numpy_dtype
from tvmc.errors import ModelError


@dataclass(frozen=True)
class TensorType:
    """A static shape and an element type (a numpy dtype name from DTYPES)."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        shape = tuple(int(d) for d in self.shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"negative dimension in shape {list(shape)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r}")
        object.__setattr__(self, "shape", shape)

    @classmethod
    def of(cls, array: np.ndarray) -> TensorType:
        """The type of a numpy array."""
        return cls(tuple(array.shape), np.dtype(array.dtype).name)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * numpy_dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


def canonical_attr(value: Any) -> Any:
    """Attributes are JSON-shaped: lists become tuples, numpy scalars plain Python values."""
    if isinstance(value, (list, tuple)):
        return tuple(canonical_attr(v) for v in value)
    if isinstance(value, np.ndarray):
        return canonical_attr(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    raise TypeError(f"attribute value {value!r} of type {type(value).__name__} is not JSON-shaped")


@dataclass
class Node:
    """One op application: reads `inputs`, writes `outputs` (tensor names)."""

    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    # the ONNX node this node was converted from, for profiles ("": made by a pass, or unnamed)
    origin: str = ""
    origin_op: str = ""

    def __post_init__(self) -> None:
        self.inputs = list(self.inputs)
        self.outputs = list(self.outputs)
        self.attrs = {k: canonical_attr(v) for k, v in self.attrs.items()}
        if not self.name:
            self.name = self.outputs[0] if self.outputs else self.op


InferFn = Callable[[Node, list[TensorType]], list[TensorType]]


@dataclass
class Graph:
    """A dataflow graph: runtime `inputs`, constant `params`, `nodes` in topological order."""

    inputs: list[str]
    outputs: list[str]
    nodes: list[Node]
    types: dict[str, TensorType]
    params: dict[str, np.ndarray] = field(default_factory=dict)
    name: str = "main"

    # ---- queries -------------------------------------------------------------------------------
    def producers(self) -> dict[str, Node]:
        """Tensor name -> the node that writes it."""
        return {out: node for node in self.nodes for out in node.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        """Tensor name -> the nodes that read it (graph outputs are not nodes)."""
        result: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in dict.fromkeys(node.inputs):
                if name:
                    result.setdefault(name, []).append(node)
        return result

    def op_counts(self) -> dict[str, int]:
        """How many nodes of each op, most frequent first."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def param_bytes(self) -> int:
        return sum(array.nbytes for array in self.params.values())

    def fresh_name(self, hint: str) -> str:
        """A tensor name not used in this graph yet, derived from `hint`."""
        if hint not in self.types:
            return hint
        for i in itertools.count(1):
            candidate = f"{hint}_{i}"
            if candidate not in self.types:
                return candidate
        raise AssertionError("unreachable")

    # ---- structure -----------------------------------------------------------------------------
    def toposort(self) -> None:
        """Order `nodes` so that every tensor is written before it is read (stable)."""
        available = set(self.inputs) | set(self.params)
        pending = list(self.nodes)
        ordered: list[Node] = []
        while pending:
            still: list[Node] = []
            for node in pending:
                if all(not name or name in available for name in node.inputs):
                    ordered.append(node)
                    available.update(node.outputs)
                else:
                    still.append(node)
            if len(still) == len(pending):
                names = ", ".join(n.name for n in still[:5])
                raise ModelError(f"the graph has a cycle or a dangling input near: {names}")
            pending = still
        self.nodes = ordered

    def verify(self, infer: InferFn | None = None) -> None:
        """Check structure (each tensor defined once, before use, typed); with `infer`, types."""
        problems: list[str] = []
        defined: set[str] = set()

        def define(name: str, what: str) -> None:
            if name in defined:
                problems.append(f"tensor {name!r} is defined twice ({what})")
            defined.add(name)
            if name not in self.types:
                problems.append(f"tensor {name!r} ({what}) has no type")

        for name in self.inputs:
            define(name, "input")
        for name, array in self.params.items():
            define(name, "param")
            if name in self.types and TensorType.of(array) != self.types[name]:
                problems.append(
                    f"param {name!r} is {TensorType.of(array)}, typed {self.types[name]}"
                )
        for node in self.nodes:
            for name in node.inputs:
                if name and name not in defined:
                    problems.append(f"node {node.name!r} ({node.op}) reads undefined {name!r}")
            for name in node.outputs:
                define(name, f"output of {node.name!r}")
            if infer is not None and not problems:
                expected = infer(node, [self.types[n] for n in node.inputs if n])
                actual = [self.types[n] for n in node.outputs]
                if expected != actual:
                    got = ", ".join(map(str, actual))
                    want = ", ".join(map(str, expected))
                    problems.append(
                        f"node {node.name!r} ({node.op}) outputs {got}, rule says {want}"
                    )
        for name in self.outputs:
            if name not in defined:
                problems.append(f"graph output {name!r} is never defined")
        if problems:
            raise ModelError("invalid graph: " + "; ".join(problems[:10]))

    def prune_types(self) -> None:
        """Drop types of tensors nothing defines any more."""
        live = set(self.inputs) | set(self.params)
        live.update(out for node in self.nodes for out in node.outputs)
        self.types = {k: v for k, v in self.types.items() if k in live}

    # ---- printing ------------------------------------------------------------------------------
    def dump(self, max_nodes: int | None = None) -> str:
        """A readable listing: signature, params, one line per node."""

        def ref(name: str) -> str:
            return ("$" if name in self.params else "%") + name if name else "_"

        sig = ", ".join(f"%{n}: {self.types[n]}" for n in self.inputs)
        outs = ", ".join(f"{ref(n)}: {self.types[n]}" for n in self.outputs)
        lines = [f"graph {self.name}({sig}) -> ({outs}) {{"]
        lines.append(
            f"  # {len(self.nodes)} nodes, {len(self.params)} params "
            f"({self.param_bytes() / 1e6:.2f} MB)"
        )
        shown: Iterable[Node] = self.nodes if max_nodes is None else self.nodes[:max_nodes]
        for node in shown:
            outs_s = ", ".join(ref(n) for n in node.outputs)
            args = ", ".join(ref(n) for n in node.inputs)
            attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in sorted(node.attrs.items()))
            types = ", ".join(str(self.types[n]) for n in node.outputs)
            attr_s = f" {{{attrs}}}" if attrs else ""
            lines.append(f"  {outs_s} = {node.op}({args}){attr_s} : {types}")
        if max_nodes is not None and len(self.nodes) > max_nodes:
            lines.append(f"  ... {len(self.nodes) - max_nodes} more nodes")
        lines.append(f"  return {', '.join(ref(n) for n in self.outputs)}")
        lines.append("}")
        return "\n".join(lines)


def _fmt_attr(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ",".join(_fmt_attr(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value) if isinstance(value, str) else str(value)
