"""The op registry: one `OpDef` per op holds everything tvmc knows about it.

Its definition (attributes, shape/dtype rule, numpy reference, FLOPs, which inputs are weights)
and its lowerings per target kind in one table, linked by Python objects rather than string tags.
A family (tvmc.ops.<family>) builds its OpDefs and calls `register` once per op; the order in
which families register does not matter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvmc.dtypes import NARROW_FLOATS
from tvmc.errors import UnsupportedModelError
from tvmc.graph import Graph, Node, TensorType
from tvmc.kernel import Buffer, Kernel
from tvmc.ops.lowering import (
    TARGET_KINDS,
    Attrs,
    Compute,
    ComputeFn,
    Epilogue,
    LowerContext,
    Lowering,
    LoweringTarget,
    Template,
    TensorRef,
)
from tvmc.ops.space import ConfigSpace


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Marks an attribute without a default: the frontend must set it."""

InferRule = Callable[[Attrs, list[TensorType]], list[TensorType]]
Reference = Callable[..., Any]  # reference(attrs, *arrays) -> array or tuple of arrays
# flops(attrs, input types, output types): floating-point operations, multiply-adds count two
FlopsRule = Callable[[Attrs, list[TensorType], list[TensorType]], int]
# summary(attrs, input types): a workload in a few words, for tables ("3x3/2 64->128 @56x56")
SummaryRule = Callable[[Attrs, list[TensorType]], str]

# How an op combines with its neighbours; fusion and scheduling read it.
ELEMENTWISE = "elementwise"  # out[i] depends on in[i] of same-shaped (or broadcast) inputs
BROADCAST = "broadcast"  # elementwise with numpy broadcasting between inputs
INJECTIVE = "injective"  # every output element reads one input element (reshape, transpose, ...)
REDUCTION = "reduction"
COMPLEX = "complex"  # conv, dense, matmul: heavy ops with a fusable epilogue
OPAQUE = "opaque"


@dataclass(frozen=True)
class OpDef:
    """Everything tvmc knows about one op."""

    name: str
    infer: InferRule
    reference: Reference
    lowerings: Mapping[str, Lowering | None]  # target kind -> lowering; None: not there
    attrs: Attrs = field(default_factory=dict)
    kind: str = OPAQUE
    num_inputs: tuple[int, int] = (1, 1)  # (min, max) number of inputs
    flops: FlopsRule | None = None  # None: no arithmetic worth counting (data movement)
    weights: tuple[int, ...] = ()  # inputs that are constants (weights, bias) in real models
    summary: SummaryRule | None = None  # None: the input shapes
    doc: str = ""

    def __post_init__(self) -> None:
        missing = [k for k in TARGET_KINDS if k not in self.lowerings]
        unknown = [k for k in self.lowerings if k not in TARGET_KINDS]
        if missing or unknown:
            raise AssertionError(f"op {self.name}: lowering table needs exactly {TARGET_KINDS}")
        forms = {(type(v), getattr(v, "epilogue", False)) for v in self.lowerings.values() if v}
        if len(forms) > 1:  # fusion decides before it knows the target
            raise AssertionError(f"op {self.name}: every target lowers it the same way")

    # ---- the lowering table ----------------------------------------------------------------
    def lowering(self, kind: str) -> Lowering:
        """The lowering on target kind `kind`; UnsupportedModelError when there is none."""
        lowering = self.lowerings.get(kind)
        if lowering is None:
            raise UnsupportedModelError(f"op {self.name} has no lowering for target kind {kind}")
        return lowering

    @property
    def _any(self) -> Lowering | None:
        return next((v for v in self.lowerings.values() if v is not None), None)

    @property
    def is_compute(self) -> bool:
        """Lowered by a fusable compute (not a template)."""
        return isinstance(self._any, Compute)

    @property
    def is_template(self) -> bool:
        """Lowered by templates that build whole kernels."""
        return isinstance(self._any, Template)

    @property
    def epilogue(self) -> bool:
        """Its templates apply a fused elementwise epilogue."""
        return isinstance(self._any, Template) and self._any.epilogue

    def _compute(self, kind: str) -> Compute:
        lowering = self.lowering(kind)
        assert isinstance(lowering, Compute), f"{self.name} is lowered by a template"
        return lowering

    def compute(self, kind: str) -> ComputeFn:
        """The compute function on target kind `kind`."""
        return self._compute(kind).fn

    def element_cost(self, kind: str, attrs: Attrs, input_types: list[TensorType]) -> int:
        """What one output element of its compute costs, in elements of a copy (Compute)."""
        cost = self._compute(kind).element_cost
        return cost(attrs, input_types) if cost else 1

    def build(
        self,
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        """Kernels of this op by the template of `ctx.target`'s kind."""
        lowering = self.lowering(ctx.target.kind)
        assert isinstance(lowering, Template), f"{self.name} is lowered by a compute"
        return lowering.build(ctx, attrs, inputs, outputs, epilogue)

    def space(
        self, attrs: Attrs, input_types: list[TensorType], target: LoweringTarget
    ) -> ConfigSpace | None:
        """The knob space on `target` (None: not tunable there, so no tuning task)."""
        lowering = self.lowerings.get(target.kind)
        if not isinstance(lowering, Template) or lowering.space is None:
            return None
        return lowering.space(attrs, input_types, target)

    def tunable(self, kind: str) -> bool:
        """Whether the op has a knob space on target kind `kind`."""
        lowering = self.lowerings.get(kind)
        return isinstance(lowering, Template) and lowering.space is not None

    def describe(self, attrs: Attrs, inputs: list[TensorType]) -> str:
        """The op and its workload in a few words: what tuning tables name a task by."""
        if self.summary is not None:
            return f"{self.name} {self.summary(attrs, inputs)}"
        return f"{self.name} " + " ".join("x".join(map(str, t.shape)) or "scalar" for t in inputs)

    def count_flops(self, attrs: Attrs, inputs: list[TensorType], outputs: list[TensorType]) -> int:
        """FLOPs of one node (0 for ops without a rule)."""
        return self.flops(attrs, inputs, outputs) if self.flops is not None else 0

    # ---- attributes --------------------------------------------------------------------------
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


def register(opdef: OpDef) -> OpDef:
    """Add `opdef` to the registry (an op is registered once)."""
    if opdef.name in OPS:
        raise AssertionError(f"op {opdef.name} registered twice")
    if not opdef.doc:
        opdef = dataclasses.replace(opdef, doc=(opdef.reference.__doc__ or "").strip())
    OPS[opdef.name] = opdef
    return opdef


def _widened(array: np.ndarray) -> np.ndarray:
    return array.astype(np.float32) if np.dtype(array.dtype).name in NARROW_FLOATS else array


def get_op(name: str) -> OpDef:
    """The definition of op `name` (KeyError when unknown)."""
    return OPS[name]


def infer_node(node: Node, input_types: list[TensorType]) -> list[TensorType]:
    """Output types of `node` by its op's rule."""
    return OPS[node.op].infer(node.attrs, input_types)


def node_flops(graph: Graph, node: Node) -> int:
    """Floating-point operations of `node` of `graph` by its op's FLOPs rule (0 for ops without
    one)."""
    inputs = [graph.types[name] for name in node.inputs if name]
    outputs = [graph.types[name] for name in node.outputs]
    return OPS[node.op].count_flops(node.attrs, inputs, outputs)


def evaluate_node(node: Node, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run the numpy reference of `node`; outputs are cast to the types its rule gives.

    An op that computes sees narrow float inputs (bfloat16, float8...) as float32 and its
    outputs are rounded once, to the types its rule gives: a float32 computation rounded, as
    the compiled code computes them. Ops that only move elements, and Cast, see them as they are.
    """
    opdef = OPS[node.op]
    computes = opdef.kind != INJECTIVE and node.op != "Cast"
    wide = [_widened(a) if computes else a for a in arrays]
    result = opdef.reference(node.attrs, *wide)
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
