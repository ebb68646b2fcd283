"""The op registry: one `OpDef` per op holds its attributes, shape/dtype rule, numpy reference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvmc.graph import Node, TensorType


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Marks an attribute without a default: the frontend must set it."""

Attrs = dict[str, Any]
InferRule = Callable[[Attrs, list[TensorType]], list[TensorType]]
Reference = Callable[..., Any]  # reference(attrs, *arrays) -> array or tuple of arrays

# How an op combines with its neighbours; fusion and scheduling read it.
ELEMENTWISE = "elementwise"  # out[i] depends on in[i] of same-shaped (or broadcast) inputs
BROADCAST = "broadcast"  # elementwise with numpy broadcasting between inputs
INJECTIVE = "injective"  # every output element reads one input element (reshape, transpose, ...)
REDUCTION = "reduction"
COMPLEX = "complex"  # conv, dense, matmul: heavy ops with a fusable epilogue
OPAQUE = "opaque"


@dataclass(frozen=True)
class OpDef:
    """Everything tvmc knows about one op, linked by Python objects rather than string tags."""

    name: str
    infer: InferRule
    reference: Reference
    attrs: Attrs = field(default_factory=dict)
    kind: str = OPAQUE
    num_inputs: tuple[int, int] = (1, 1)  # (min, max) number of inputs
    doc: str = ""
    # How the op becomes kernel IR (tvmc.ops.lowering): exactly one of them is set.
    compute: Any = None  # fusable: output indices -> expression over its inputs
    template: Any = None  # whole kernels, with an optional fused elementwise epilogue
    epilogue: bool = False  # the template accepts an epilogue
    space: Any = None  # the template's knob space: fn(attrs, input_types, target) -> ConfigSpace

    def normalize_attrs(self, attrs: Attrs, where: str) -> Attrs:
        """`attrs` completed with defaults; unknown or missing required ones raise ValueError."""
        unknown = sorted(set(attrs) - set(self.attrs))
        if unknown:
            raise ValueError(f"{where}: unknown attribute(s) {unknown} for {self.name}")
        result = {}
        for key, default in self.attrs.items():
            if key in attrs:
                result[key] = attrs[key]
            elif default is REQUIRED:
                raise ValueError(f"{where}: {self.name} needs attribute {key!r}")
            else:
                result[key] = default
        return result


OPS: dict[str, OpDef] = {}


def register(
    name: str,
    infer: InferRule,
    *,
    attrs: Attrs | None = None,
    kind: str = OPAQUE,
    num_inputs: int | tuple[int, int] = 1,
) -> Callable[[Reference], Reference]:
    """Decorator on a numpy reference `fn(attrs, *arrays)`: registers the op under `name`."""
    arity = (num_inputs, num_inputs) if isinstance(num_inputs, int) else num_inputs

    def wrap(fn: Reference) -> Reference:
        if name in OPS:
            raise AssertionError(f"op {name} registered twice")
        OPS[name] = OpDef(
            name, infer, fn, dict(attrs or {}), kind, arity, (fn.__doc__ or "").strip()
        )
        return fn

    return wrap


def get_op(name: str) -> OpDef:
    """The definition of op `name` (KeyError when unknown)."""
    return OPS[name]


def infer_node(node: Node, input_types: list[TensorType]) -> list[TensorType]:
    """Output types of `node` by its op's rule."""
    return OPS[node.op].infer(node.attrs, input_types)


def evaluate_node(node: Node, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run the numpy reference of `node`; outputs are cast to the types its rule gives."""
    opdef = OPS[node.op]
    result = opdef.reference(node.attrs, *arrays)
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    types = opdef.infer(node.attrs, [TensorType.of(np.asarray(a)) for a in arrays])
    if len(outputs) != len(types):
        raise AssertionError(f"{node.op} reference gave {len(outputs)} outputs, rule {len(types)}")
    fixed = []
    for out, typ in zip(outputs, types):
        out = np.asarray(out, dtype=typ.dtype)
        if out.shape != typ.shape:
            raise AssertionError(
                f"{node.op} ({node.name}): reference shape {out.shape} != rule shape {typ.shape}"
            )
        fixed.append(np.require(out, requirements="C"))  # keeps 0-d arrays 0-d
    return fixed
