"""Graph -> Program: kernels from the ops' computes and templates, buffers, calls, memory plan."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvmc.graph import Graph, Node, TensorType
from tvmc.kernel import Buffer, Expr, Kernel
from tvmc.kernel.program import WORKSPACE_ALIGN, Call, Program, ProgramBuffer, Source
from tvmc.lower.fuse import FusionPlan, plan_fusion
from tvmc.lower.memory import aligned_size, plan_workspace
from tvmc.lower.share import shared_kernels
from tvmc.ops import OPS, node_flops
from tvmc.ops.lowering import (
    Epilogue,
    Indices,
    LowerContext,
    LoweringTarget,
    Template,
    TensorRef,
    buffer_shape,
    ref_of_buffer,
    unique_identifier,
)
from tvmc.ops.schedule.injective import schedule_injective


@dataclass
class LoweredModel:
    """A Program with the values of its params and what each buffer holds."""

    program: Program
    param_values: dict[str, np.ndarray]
    fusion: FusionPlan
    tensor_of: dict[str, str] = field(default_factory=dict)  # program buffer -> graph tensor


class KernelLowering:
    """One graph lowered to kernels and calls, before memory planning (`lower_kernels`)."""

    def __init__(
        self, graph: Graph, target: LoweringTarget, configs: Mapping[str, Any], plan: FusionPlan
    ):
        self.graph = graph
        self.target = target
        self.configs = configs
        self.plan = plan
        self.names: set[str] = set()
        self.buffers: dict[str, Buffer] = {}  # graph tensor -> buffer holding it
        self.storage_of: dict[Buffer, Buffer] = {}  # alias (reshape view) -> its storage owner
        self.view_offset: dict[Buffer, int] = {}  # alias -> its byte offset in storage_of's
        self.sliced: set[Buffer] = set()  # Concat outputs whose inputs are views into them
        self.refs: dict[str, TensorRef] = {}
        self.producer = graph.producers()
        self.kernels: list[Kernel] = []
        # (kernel, node name, flops, the model nodes it computes)
        self.calls: list[tuple[Kernel, str, int, tuple[Source, ...]]] = []
        self.new_params: dict[Buffer, np.ndarray] = {}
        self.temps: set[Buffer] = set()
        self.output_copies: dict[str, str] = {}  # copy buffer -> the graph output it holds
        self.out_slots: dict[int, Buffer] = {}  # graph output index -> its buffer (copy_outputs)
        self.read_slack = 0  # bytes kernels may read past a workspace buffer (may_read_past_end)

    # ---- buffers and refs ----------------------------------------------------------------------
    def unique(self, hint: str) -> str:
        return unique_identifier(hint, self.names)

    def buffer(self, tensor: str) -> Buffer:
        """The buffer that stores `tensor` (created on first use)."""
        if tensor not in self.buffers:
            typ = self.graph.types[tensor]
            self.buffers[tensor] = Buffer(self.unique(tensor), buffer_shape(typ.shape), typ.dtype)
        return self.buffers[tensor]

    def ref(self, tensor: str) -> TensorRef:
        """How kernels read `tensor`: from memory, or computed on the fly when inlined."""
        if tensor in self.refs:
            return self.refs[tensor]
        typ = self.graph.types[tensor]
        if tensor in self.plan.inlined:
            node = self.producer[tensor]
            compute = OPS[node.op].compute(self.target.kind)
            accessors = compute(node.attrs, self.input_refs(node), self.out_types(node))
            ref = TensorRef(tensor, typ, accessors[node.outputs.index(tensor)])
        else:
            ref = ref_of_buffer(tensor, typ, self.buffer(tensor), self.graph.params.get(tensor))
        self.refs[tensor] = ref
        return ref

    def input_refs(self, node: Node) -> list[TensorRef]:
        return [self.ref(name) for name in node.inputs if name]

    def out_types(self, node: Node) -> list[TensorType]:
        return [self.graph.types[name] for name in node.outputs]

    def context(self, node: Node) -> LowerContext:
        config = self.configs.get(node.name, {})
        return LowerContext(self.target, config, node.name, _names=self.names,
                            may_read_past_end=self.may_read_past_end)  # fmt: skip

    def may_read_past_end(self, buf: Buffer, nbytes: int) -> bool:
        """Whether a kernel may read `nbytes` past `buf`'s end (values it drops): yes for an
        intermediate, whose storage is in the workspace (`plan_memory` pads the workspace by
        the most granted); no for inputs and outputs (the caller allocates them) and params."""
        graph, tensor_of = self.graph, {b: t for t, b in self.buffers.items()}
        for b in (buf, self.storage_owner(buf)):
            tensor = tensor_of.get(b)
            if tensor is None or tensor in graph.params:
                return False
            if tensor in graph.inputs or tensor in graph.outputs:
                return False
        self.read_slack = max(self.read_slack, nbytes)
        return True

    # ---- nodes ---------------------------------------------------------------------------------
    def lower_node(self, node: Node) -> None:
        if node.name in self.plan.absorbed:
            return
        if all(self.graph.types[name].size == 0 for name in node.outputs):
            return  # nothing to compute
        if isinstance(OPS[node.op].lowering(self.target.kind), Template):
            self.lower_template(node)
        else:
            self.lower_compute(node)

    def lower_template(self, node: Node) -> None:
        chain = self.plan.epilogues.get(node.name, [])
        outputs = [self.buffer(self.plan.chain_output(node))]
        outputs += [self.buffer(name) for name in node.outputs[1:]]
        epilogue = self.epilogue(node, chain) if chain else None
        ctx = self.context(node)
        kernels = OPS[node.op].build(ctx, node.attrs, self.input_refs(node), outputs, epilogue)
        self.new_params.update({buf: value for buf, value in ctx.params})
        self.temps.update(ctx.temps)
        self.emit(kernels, node, chain)

    def epilogue(self, node: Node, chain: list[Node]) -> Epilogue:
        """Apply the epilogue's computes (in graph order; each reads the template's value or an
        earlier link's in registers, anything else as usual) at given output indices."""
        graph = self.graph
        in_registers = {node.outputs[0], *(link.outputs[0] for link in chain)}
        shape = graph.types[node.outputs[0]].shape
        outside = {name for link in chain for name in link.inputs
                   if name and name not in in_registers}  # fmt: skip
        reads = [self.ref(name).buffer for name in sorted(outside)
                 if graph.types[name].shape == shape]  # fmt: skip
        # at (n, c, 0, ..., q) too, where no op has an axis (a per-axis quantize on a plane axis)
        flat = not any("axis" in link.attrs for link in chain) and all(
            self.reads_flat_planes(name, shape) for name in outside
        )

        def apply(idx: Indices, value: Expr) -> Expr:
            held = {node.outputs[0]: value}  # tensors of the epilogue: their value at idx
            for link in chain:
                refs = []
                for name in link.inputs:
                    if name in held:
                        v = held[name]
                        refs.append(TensorRef(name, graph.types[name], lambda _, v=v: v))
                    elif name:
                        refs.append(self.ref(name))
                compute = OPS[link.op].compute(self.target.kind)
                held[link.outputs[0]] = compute(link.attrs, refs, self.out_types(link))[0](idx)
            return held[chain[-1].outputs[0]]

        return Epilogue(apply, tuple(b for b in reads if b is not None), flat)

    def reads_flat_planes(self, tensor: str, shape: tuple[int, ...]) -> bool:
        """Whether an epilogue of output `shape` reads `tensor` alike at a flat offset through
        the last axis of the planes (axes 2 on) and at the position's own indices: it is
        constant over the planes (broadcasting reads it at 0), or has the output's planes and
        is read from memory, where that offset is the same address."""
        own = self.graph.types[tensor].shape
        planes = ((1,) * (len(shape) - len(own)) + tuple(own))[2:]
        if all(d == 1 for d in planes):
            return True
        return planes == tuple(shape[2:]) and tensor not in self.plan.inlined

    def lower_compute(self, node: Node) -> None:
        stored = [name for name in node.outputs
                  if name not in self.plan.inlined and self.graph.types[name].size]  # fmt: skip
        if not stored:
            return
        if node.op == "Reshape" and self.alias_reshape(node):
            return
        if node.op == "Concat" and self.concat_in_place(node):
            return
        compute = OPS[node.op].compute(self.target.kind)
        refs = self.input_refs(node)
        accessors = compute(node.attrs, refs, self.out_types(node))
        ctx = self.context(node)
        by_shape: dict[tuple[int, ...], list] = {}
        for name in stored:
            typ = self.graph.types[name]
            acc = accessors[node.outputs.index(name)]
            by_shape.setdefault(typ.shape, []).append((self.buffer(name), typ.ndim, acc))
        cost = OPS[node.op].element_cost(self.target.kind, node.attrs, [r.type for r in refs])
        kernels = [
            schedule_injective(ctx, node.op.lower(), outs, cost) for outs in by_shape.values()
        ]
        self.emit(kernels, node, [])

    def alias_reshape(self, node: Node) -> bool:
        """A Reshape of a stored tensor is a view of the same bytes: no kernel, when allowed."""
        src, dst = node.inputs[0], node.outputs[0]
        if src in self.plan.inlined or src in self.graph.params:
            return False
        owner = self.storage_owner(self.buffer(src))
        boundary = {self.buffers.get(n) for n in (*self.graph.inputs, *self.graph.outputs)}
        if dst in self.graph.outputs and (owner in boundary or owner in self.sliced):
            return False  # two caller-owned buffers, or slices the output cannot hold: copy
        view = self.buffer(dst)
        if dst in self.graph.outputs:
            self.storage_of[owner] = view  # the model output's buffer holds the bytes
            self.storage_of.pop(view, None)
        else:
            self.storage_of[view] = owner
            self.view_offset[view] = self.storage_offset(self.buffer(src))  # src may be a slice
        return True

    def concat_in_place(self, node: Node) -> bool:
        """A Concat whose inputs' producers can write straight into its output's slices: no
        kernel. Each input's storage owner becomes a view at its slice's byte offset, when the
        slices are contiguous (only ones before the axis), aligned, and every input is a stored
        intermediate with storage of its own (not an input, output or param, nor another slice)."""
        out, graph = node.outputs[0], self.graph
        shape = graph.types[out].shape
        axis = node.attrs["axis"] % len(shape)
        if out in graph.outputs or math.prod(shape[:axis]) != 1:
            return False
        boundary = {*graph.inputs, *graph.outputs, *graph.params}
        fixed = {self.buffers.get(n) for n in boundary}
        slices: dict[Buffer, int] = {}
        offset = 0
        for name in node.inputs:
            if graph.types[name].size == 0:
                continue
            if name in boundary or name in self.plan.inlined or offset % WORKSPACE_ALIGN:
                return False
            owner = self.storage_owner(self.buffer(name))
            if owner in fixed or owner in slices or owner.nbytes != self.buffer(name).nbytes:
                return False  # a caller's buffer, twice, or a slice of a bigger tensor
            slices[owner] = offset
            offset += owner.nbytes
        target = self.buffer(out)
        for owner, at in slices.items():
            self.storage_of[owner] = target
            self.view_offset[owner] = at
        self.sliced.add(target)
        return True

    def storage_owner(self, buf: Buffer) -> Buffer:
        while buf in self.storage_of:
            buf = self.storage_of[buf]
        return buf

    def storage_offset(self, buf: Buffer) -> int:
        """Byte offset of `buf` in its storage owner (Concat slices add up; views are 0)."""
        offset = 0
        while buf in self.storage_of:
            offset += self.view_offset.get(buf, 0)
            buf = self.storage_of[buf]
        return offset

    def emit(self, kernels: list[Kernel], node: Node, chain: list[Node]) -> None:
        flops = node_flops(self.graph, node)
        sources = self.sources([node, *chain])
        for i, kernel in enumerate(kernels):
            self.kernels.append(kernel)
            label = node.name + "".join(f"+{c.op}" for c in chain)
            self.calls.append((kernel, label, flops if i == len(kernels) - 1 else 0, sources))

    def sources(self, group: list[Node]) -> tuple[Source, ...]:
        """The model nodes a kernel group computes: `group` (its node, then its epilogue), then
        the producers of the tensors it inlines in graph order; one per ONNX node."""
        members = {id(n): n for n in group}
        pending = [name for n in group for name in n.inputs if name]
        while pending:
            tensor = pending.pop()
            producer = self.producer.get(tensor)
            if tensor in self.plan.inlined and producer and id(producer) not in members:
                members[id(producer)] = producer
                pending += [name for name in producer.inputs if name]
        order = {id(n): i for i, n in enumerate(self.graph.nodes)}
        inlined = [n for n in members.values() if all(n is not g for g in group)]
        by_name: dict[str, Source] = {}
        for n in [*group, *sorted(inlined, key=lambda n: order[id(n)])]:
            name = n.origin or n.name
            if name not in by_name:  # the first graph node of a decomposed ONNX node
                inputs = tuple(self.graph.types[i].shape for i in n.inputs if i)
                output = self.graph.types[n.outputs[0]].shape if n.outputs else ()
                by_name[name] = Source(name, n.origin_op or n.op, inputs, output)
        return tuple(by_name.values())

    # ---- outputs, storage ----------------------------------------------------------------------
    def copy_outputs(self) -> dict[int, Buffer]:
        """Graph outputs that cannot live where they are computed get a copy kernel."""
        slots: dict[int, Buffer] = {}
        claimed: set[Buffer] = set()
        for index, name in enumerate(self.graph.outputs):
            buf = self.buffer(name)
            owner = self.storage_owner(buf)
            fixed = name in self.graph.inputs or name in self.graph.params
            if fixed or owner in claimed or owner in self.sliced or self.owner_is_input(owner):
                typ = self.graph.types[name]
                copy = Buffer(self.unique(f"{name}_out"), buffer_shape(typ.shape), typ.dtype)
                if typ.size:
                    ctx = LowerContext(self.target, {}, "copy", _names=self.names)
                    src = self.ref(name)
                    kernel = schedule_injective(ctx, "copy", [(copy, typ.ndim, src.read)])
                    self.kernels.append(kernel)
                    self.calls.append((kernel, f"copy {name}", 0, ()))
                self.output_copies[copy.name] = name
                slots[index] = copy
            else:
                slots[index] = owner
            claimed.add(slots[index])
        return slots

    def owner_is_input(self, owner: Buffer) -> bool:
        return any(self.buffers.get(n) is owner for n in self.graph.inputs)


def lower_graph(
    graph: Graph,
    target: LoweringTarget | None = None,
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    fuse: bool = True,
) -> LoweredModel:
    """Lower every node of `graph` to kernels and plan where every buffer lives."""
    return plan_memory(lower_kernels(graph, target, configs, plan_fusion(graph, fuse)))


def lower_kernels(
    graph: Graph,
    target: LoweringTarget | None = None,
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    plan: FusionPlan | None = None,
) -> KernelLowering:
    """Every node of `graph` (fused by `plan`, default: fused by the rules) to kernels and calls."""
    plan = plan if plan is not None else plan_fusion(graph)
    state = KernelLowering(graph, target or LoweringTarget(), configs or {}, plan)
    # A template runs where its epilogue ends: the chain may read tensors computed after it.
    by_name = {node.name: node for node in graph.nodes}
    run_at = {chain[-1].name: by_name[name] for name, chain in state.plan.epilogues.items()}
    for node in graph.nodes:
        if node.name in state.plan.epilogues:
            continue
        state.lower_node(run_at.get(node.name, node))
    state.out_slots = state.copy_outputs()
    return state


def plan_memory(state: KernelLowering, images: int = 1, slots: int = 1) -> LoweredModel:
    """The Program: where every buffer lives (inputs, outputs, params, one shared workspace);
    `images` > 1: the graph is one image's, run for that many (`Program.images`), at most
    `slots` at once, each with its own workspace (`Program.slots`)."""
    graph, out_slots = state.graph, state.out_slots
    fixed: dict[Buffer, tuple[str, int]] = {}
    for index, name in enumerate(graph.inputs):
        fixed[state.buffer(name)] = ("input", index)
    for index, buf in out_slots.items():
        fixed[buf] = ("output", index)
    used = [b for k in state.kernels for b in k.params]
    param_values: dict[str, np.ndarray] = {}
    params: list[str] = []
    tensor_of = {buf.name: tensor for tensor, buf in state.buffers.items()}
    tensor_of.update(state.output_copies)
    for buf in dict.fromkeys(used):
        tensor = tensor_of.get(buf.name)
        value = graph.params.get(tensor) if tensor is not None else state.new_params.get(buf)
        if value is not None and state.storage_owner(buf) not in fixed:
            fixed[buf] = ("param", len(params))
            params.append(buf.name)
            value = np.ascontiguousarray(value)
            param_values[buf.name] = value.reshape(buf.shape) if value.size else value

    owners = {buf: state.storage_owner(buf) for buf in dict.fromkeys(used + list(fixed))}
    workspace = {o.name: o.nbytes for o in set(owners.values()) if o not in fixed}
    call_args = [[owners[b].name for b in k.params] for k, *_ in state.calls]
    offsets, total = plan_workspace(workspace, call_args)
    total += state.read_slack  # what may_read_past_end promised

    buffers: dict[str, ProgramBuffer] = {}
    for buf, owner in owners.items():
        kind, index = fixed.get(owner, ("workspace", 0))
        offset = offsets.get(owner.name, 0) + state.storage_offset(buf)
        assert kind == "workspace" or not state.storage_offset(buf), "slices live in the workspace"
        tensor = tensor_of.get(buf.name)
        shape = graph.types[tensor].shape if tensor is not None else buf.shape  # () and empty too
        buffers[buf.name] = ProgramBuffer(buf.name, shape, buf.dtype, kind, index, offset)
    runs = shared_kernels(state.kernels)  # identical layers' calls run one kernel's code
    program = Program(
        kernels=[k for k in state.kernels if runs[k.name] is k],
        buffers=buffers,
        calls=[
            Call(runs[k.name].name, tuple(b.name for b in k.params), label, flops, sources)
            for k, label, flops, sources in state.calls
        ],  # fmt: skip
        inputs=[state.buffer(n).name for n in graph.inputs],
        outputs=[out_slots[i].name for i in range(len(graph.outputs))],
        params=params,
        workspace_bytes=aligned_size(total) if images > 1 else total,  # images' starts aligned
        naive_bytes=sum(aligned_size(size) for size in workspace.values()),
        images=images,
        slots=max(1, min(slots, images)),
    )
    program.validate()
    return LoweredModel(program, param_values, state.plan, tensor_of)
