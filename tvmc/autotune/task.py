"""Tuning tasks: the tunable kernels of a model, deduplicated by workload and weighted."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tvmc.graph import Graph, Node, TensorType
from tvmc.ops import OPS
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.space import ConfigSpace


@dataclass
class Task:
    """One tunable workload: an op with fixed input types and attributes, and its knob space."""

    name: str  # e.g. "conv2d.llvm"
    op: str
    args: list[Any]  # ["TENSOR", shape, dtype] per input, then ["ATTRS", {...}]
    target: str
    space: ConfigSpace
    nodes: list[str] = field(default_factory=list)  # graph nodes sharing this workload
    flops: int = 0

    @property
    def weight(self) -> int:
        """How many times the model runs this workload."""
        return len(self.nodes)

    @property
    def workload(self) -> tuple[str, str]:
        return self.name, json.dumps(self.args, separators=(",", ":"))


def task_args(node: Node, input_types: list[TensorType]) -> list[Any]:
    """A workload's serialised args: its tensors, then its attributes."""
    tensors = [["TENSOR", list(t.shape), t.dtype] for t in input_types]
    attrs = {k: _plain(v) for k, v in sorted(node.attrs.items())}
    return [*tensors, ["ATTRS", attrs]]


def task_name(op: str, target_kind: str) -> str:
    return f"{op.lower()}.{target_kind}"


def extract_tasks(
    graph: Graph, target: str, lowering_target: LoweringTarget, flops_of=None
) -> list[Task]:
    """Tasks of every node whose template declares a knob space, heaviest first."""
    kind = target.split()[0] if target.split() else "llvm"
    tasks: dict[tuple[str, str], Task] = {}
    for node in graph.nodes:
        opdef = OPS[node.op]
        if opdef.template is None or opdef.space is None:
            continue
        types = [graph.types[n] for n in node.inputs if n]
        args = task_args(node, types)
        name = task_name(node.op, kind)
        key = (name, json.dumps(args, separators=(",", ":")))
        if key not in tasks:
            space = opdef.space(node.attrs, types, lowering_target)
            flops = flops_of(graph, node) if flops_of else 0
            tasks[key] = Task(name, node.op, args, target, space, [], flops)
        tasks[key].nodes.append(node.name)
    return sorted(tasks.values(), key=lambda t: -t.flops * t.weight)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
