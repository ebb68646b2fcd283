"""Converters of the recurrent ops RNN, GRU and LSTM, unrolled over their static sequence.

With static shapes the sequence length is known, so a recurrent node becomes its steps built from
existing ops; no recurrent op exists below the frontend. The input projection of every step and
direction does not depend on the state: it is one Gemm, hoisted out of the steps. Each step then
adds its hidden projection (a Gemm on the previous state whose C is the step's slice of the
projection), splits the gates and applies the activations. Constant weights fold at once.
A constant `sequence_lens` below the sequence length masks the steps past a batch entry's end
(its state holds, its Y is 0), as onnxruntime does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter
from tvmc.frontend.converters.subgraph import check_unrolled_size

DIRECTIONS = {"forward": ("forward",), "reverse": ("reverse",),
              "bidirectional": ("forward", "reverse")}  # fmt: skip
GEMM_T = {"transA": False, "transB": True, "alpha": 1.0, "beta": 1.0}  # a @ b^T + c


# ---- activations ---------------------------------------------------------------------------------
# ONNX name -> (alpha default, beta default); None: the function takes no such parameter. The
# defaults are those of the ONNX operators of the same name (Affine's and ScaledTanh's are 1, 0
# and 1, 1; onnxruntime takes 0 for those, so models had better give them). Names are matched
# ignoring case, as onnxruntime does.
ACTIVATIONS: dict[str, tuple[float | None, float | None]] = {
    "Relu": (None, None), "Tanh": (None, None), "Sigmoid": (None, None),
    "Softsign": (None, None), "Softplus": (None, None), "Affine": (1.0, 0.0),
    "LeakyRelu": (0.01, None), "ThresholdedRelu": (1.0, None), "ScaledTanh": (1.0, 1.0),
    "HardSigmoid": (0.2, 0.5), "Elu": (1.0, None),
}  # fmt: skip
_BY_LOWER = {name.lower(): name for name in ACTIVATIONS}


@dataclass(frozen=True)
class Activation:
    """One activation function with its parameters."""

    name: str
    alpha: float | None = None
    beta: float | None = None


def read_activations(
    node: OnnxNode, defaults: tuple[str, ...], count: int
) -> list[list[Activation]]:
    """The activations of each direction; alpha/beta are consumed in order by the functions that
    take them (onnxruntime's reading), defaults when the lists run out."""
    names = list(node.attrs.get("activations", defaults * count))
    if len(names) != len(defaults) * count:
        raise ModelError(
            f"{node.describe()}: {len(names)} activations; {node.op_type} needs {len(defaults)} "
            f"per direction ({count})"
        )
    alphas = iter(node.attrs.get("activation_alpha", []))
    betas = iter(node.attrs.get("activation_beta", []))
    functions = []
    for name in names:
        canonical = _BY_LOWER.get(str(name).lower())
        if canonical is None:
            raise UnsupportedModelError(
                f"{node.describe()}: activation {name!r} is not supported; supported: "
                f"{', '.join(ACTIVATIONS)}"
            )
        alpha, beta = ACTIVATIONS[canonical]
        alpha = None if alpha is None else float(next(alphas, alpha))
        beta = None if beta is None else float(next(betas, beta))
        functions.append(Activation(canonical, alpha, beta))
    per = len(defaults)
    return [functions[i * per : (i + 1) * per] for i in range(count)]


def activate(ctx: ConvertContext, fn: Activation, x: str) -> str:
    """fn(x) built from existing elementwise ops."""
    dtype = ctx.type(x).dtype

    def const(value: float) -> str:
        return ctx.add_const(np.array(value, dtype))

    def op(name: str, *inputs: str, **attrs) -> str:
        return ctx.add(name, list(inputs), attrs)[0]  # one output

    if fn.name in ("Relu", "Tanh", "Sigmoid", "Softplus"):
        return op(fn.name, x)
    if fn.name in ("LeakyRelu", "Elu"):
        return op(fn.name, x, alpha=fn.alpha)
    if fn.name == "HardSigmoid":
        return op(fn.name, x, alpha=fn.alpha, beta=fn.beta)
    if fn.name == "Affine":
        return op("Add", op("Mul", x, const(fn.alpha)), const(fn.beta))
    if fn.name == "ScaledTanh":
        return op("Mul", op("Tanh", op("Mul", x, const(fn.beta))), const(fn.alpha))
    if fn.name == "ThresholdedRelu":
        return op("Where", op("Greater", x, const(fn.alpha)), x, const(0.0))
    return op("Div", x, op("Add", op("Abs", x), const(1.0)))  # Softsign


# ---- one direction's step ------------------------------------------------------------------------
@dataclass
class Direction:
    """What the steps of one direction read and carry."""

    ctx: ConvertContext
    node: OnnxNode
    hidden: int
    batch: int
    recurrence: str  # R of this direction, [gates * hidden, hidden]
    bias: str  # B of this direction ([2 * gates * hidden]) or ''
    peepholes: str  # LSTM's P of this direction ([3 * hidden]) or ''
    activations: list[Activation]
    states: list[str | None] = field(default_factory=list)  # None: zero (no initial state)
    # slices of R, B and P, made once for all steps (constant weights fold: one copy each)
    parts: dict[tuple[str, int, int], str] = field(default_factory=dict)

    def op(self, name: str, *inputs: str, **attrs) -> str:
        """The output of one new node of our op `name`."""
        return self.ctx.add(name, list(inputs), attrs)[0]

    def split(self, x: str, parts: int) -> list[str]:
        """x [batch, parts * hidden] as `parts` gates of [batch, hidden]."""
        return self.ctx.add("Split", [x], {"axis": 1, "split": [self.hidden] * parts})

    def rows(self, x: str, start: int, stop: int) -> str:
        """Gates start..stop of a [gates * hidden, ...] or [gates * hidden] tensor."""
        key = (x, start, stop)
        if key not in self.parts:
            bounds = {0: (start * self.hidden, stop * self.hidden)}
            self.parts[key] = slice_axes(self.ctx, x, bounds)
        return self.parts[key]

    def linear(self, h: str | None, weights: str, c: str | None, gates: int) -> str:
        """h @ weights^T + c as [batch, gates * hidden]; no Gemm when h is 0."""
        if h is not None:
            return self.ctx.add("Gemm", [h, weights] + ([c] if c else []), GEMM_T)[0]
        shape = (self.batch, gates * self.hidden)
        if c is None:
            return self.ctx.add_const(np.zeros(shape, self.ctx.type(weights).dtype))
        return c if self.ctx.type(c).shape == shape else self.op("Expand", c, shape=shape)

    def gate(self, x: str, index: int) -> str:
        """Activation `index` of x, clipped first when the node has `clip`."""
        clip = self.node.attrs.get("clip")
        if clip is not None:
            x = self.op("Clip", x, min=-float(clip), max=float(clip))
        return activate(self.ctx, self.activations[index], x)

    def mul(self, a: str, b: str | None) -> str | None:
        """a * b, where b None is 0 (a missing initial state): None."""
        return None if b is None else self.op("Mul", a, b)


def rnn_step(d: Direction, x: str) -> list[str]:
    """H = f(x W^T + H R^T + b)."""
    (h,) = d.states
    return [d.gate(d.linear(h, d.recurrence, x, 1), 0)]


def gru_step(d: Direction, x: str) -> list[str]:
    """z, r = f(...); n = g(x Wn^T + (r H) Rn^T + b) or, linear_before_reset, g(x Wn^T +
    r (H Rn^T + Rbn) + Wbn); H = (1 - z) n + z H. Gates in ONNX order z, r, h."""
    (h,) = d.states
    x_zr, x_n = (slice_axes(d.ctx, x, {1: bounds}) for bounds in
                 ((0, 2 * d.hidden), (2 * d.hidden, 3 * d.hidden)))  # fmt: skip
    if d.node.attrs.get("linear_before_reset", 0):
        recurrent_bias = d.rows(d.bias, 3, 6) if d.bias else None
        h_z, h_r, h_n = d.split(d.linear(h, d.recurrence, recurrent_bias, 3), 3)
        x_z, x_r = d.split(x_zr, 2)
        z = d.gate(d.op("Add", x_z, h_z), 0)
        r = d.gate(d.op("Add", x_r, h_r), 0)
        n = d.gate(d.op("Add", x_n, d.op("Mul", r, h_n)), 1)
    else:
        z, r = (d.gate(g, 0) for g in d.split(d.linear(h, d.rows(d.recurrence, 0, 2), x_zr, 2), 2))
        n = d.gate(d.linear(d.mul(r, h), d.rows(d.recurrence, 2, 3), x_n, 1), 1)
    one = d.ctx.add_const(np.array(1, d.ctx.type(z).dtype))
    kept = d.op("Mul", d.op("Sub", one, z), n)
    return [kept if h is None else d.op("Add", kept, d.op("Mul", z, h))]


def lstm_step(d: Direction, x: str) -> list[str]:
    """i, o, f gates (f = 1 - i with input_forget) with optional peepholes on C; C = f C + i g(c);
    H = o h(C). Gates in ONNX order i, o, f, c; peepholes i, o, f."""
    h, c = d.states
    i, o, f, cell = d.split(d.linear(h, d.recurrence, x, 4), 4)
    peep = [d.rows(d.peepholes, k, k + 1) if d.peepholes else None for k in range(3)]
    if c is not None and peep[0]:
        i, f = d.op("Add", i, d.op("Mul", peep[0], c)), d.op("Add", f, d.op("Mul", peep[2], c))
    i = d.gate(i, 0)
    if d.node.attrs.get("input_forget", 0):
        f = d.op("Sub", d.ctx.add_const(np.array(1, d.ctx.type(i).dtype)), i)
    else:
        f = d.gate(f, 0)
    new_c = d.op("Mul", i, d.gate(cell, 1))
    if c is not None:
        new_c = d.op("Add", d.op("Mul", f, c), new_c)
    if peep[1]:
        o = d.op("Add", o, d.op("Mul", peep[1], new_c))
    new_h = d.op("Mul", d.gate(o, 0), activate(d.ctx, d.activations[2], new_c))
    return [new_h, new_c]


@dataclass(frozen=True)
class Cell:
    """What distinguishes RNN, GRU and LSTM for the unrolling."""

    gates: int
    activations: tuple[str, ...]  # defaults, one direction
    state_inputs: tuple[int, ...]  # input indices of the initial states (h, c)
    step: Callable[[Direction, str], list[str]]
    nodes_per_step: int  # about: the unrolled-size limit counts them


CELLS = {
    "RNN": Cell(1, ("Tanh",), (5,), rnn_step, 5),
    "GRU": Cell(3, ("Sigmoid", "Tanh"), (5,), gru_step, 19),
    "LSTM": Cell(4, ("Sigmoid", "Tanh", "Tanh"), (5, 6), lstm_step, 20),
}


# ---- the whole node ------------------------------------------------------------------------------
def slice_axes(ctx: ConvertContext, x: str, bounds: dict[int, tuple[int, int]]) -> str:
    """x[start:stop] on the axes in `bounds`, whole on the others."""
    shape = ctx.type(x).shape
    ranges = [bounds.get(axis, (0, dim)) for axis, dim in enumerate(shape)]
    attrs = {"starts": [a for a, _ in ranges], "ends": [b for _, b in ranges],
             "steps": [1] * len(shape)}  # fmt: skip
    return ctx.add("Slice", [x], attrs)[0]


def reshape(ctx: ConvertContext, x: str, shape: tuple[int, ...], out: str | None = None) -> str:
    """x reshaped (a view when stored); written to `out` when given."""
    return ctx.add("Reshape", [x], {"shape": tuple(shape)}, outputs=[out] if out else None)[0]


@dataclass
class Recurrence:
    """One recurrent node read once: sizes, time-major inputs, options."""

    node: OnnxNode
    cell: Cell
    hidden: int
    steps: int
    batch: int
    directions: tuple[str, ...]
    lengths: np.ndarray | None  # per batch entry; None when every entry runs every step
    layout: int

    def time_major(self, ctx: ConvertContext, name: str) -> str:
        """A batch-major (layout=1) X or initial state as the time-major one the steps read."""
        if not (self.layout and name):
            return name
        return ctx.add("Transpose", [name], {"perm": (1, 0, 2)})[0]


def read_recurrence(ctx: ConvertContext, node: OnnxNode, cell: Cell) -> Recurrence:
    """Attributes and shapes checked against each other; ModelError naming the node if not."""
    direction = node.attrs.get("direction", "forward")
    if direction not in DIRECTIONS:
        raise ModelError(f"{node.describe()}: direction {direction!r} is not one of "
                         f"{list(DIRECTIONS)}")  # fmt: skip
    layout = int(node.attrs.get("layout", 0))
    if layout not in (0, 1):
        raise ModelError(f"{node.describe()}: layout must be 0 or 1, got {layout}")
    x, w, r = (ctx.type(node.inputs[i]) for i in range(3))
    if x.ndim != 3:
        raise ModelError(f"{node.describe()}: X must be 3-D, got {x}")
    steps, batch = (x.shape[1], x.shape[0]) if layout else x.shape[:2]
    hidden = int(node.attrs.get("hidden_size", r.shape[-1] if r.ndim else 0))
    count, gates = len(DIRECTIONS[direction]), cell.gates * hidden
    want = {"W": (count, gates, x.shape[2]), "R": (count, gates, hidden),
            "B": (count, 2 * gates), "P": (count, 3 * hidden)}  # fmt: skip
    for name, index in (("W", 1), ("R", 2), ("B", 3), ("P", 7)):
        if node.input(index) and ctx.type(node.input(index)).shape != want[name]:
            raise ModelError(
                f"{node.describe()}: {name} has shape {list(ctx.type(node.input(index)).shape)}; "
                f"hidden_size {hidden}, direction {direction!r} and X {list(x.shape)} need "
                f"{list(want[name])}"
            )
    lengths = None
    if node.input(4):
        lengths = ctx.require_const(node, 4, "sequence_lens").astype(np.int64).reshape(-1)
        if lengths.shape != (batch,) or lengths.min(initial=0) < 0 or lengths.max() > steps:
            raise ModelError(f"{node.describe()}: sequence_lens {lengths.tolist()} must hold one "
                             f"length in [0, {steps}] per batch entry ({batch})")  # fmt: skip
        lengths = None if (lengths == steps).all() else lengths
    check_unrolled_size(node, steps * count * cell.nodes_per_step, "its sequence")
    return Recurrence(node, cell, hidden, steps, batch, DIRECTIONS[direction], lengths, layout)


def project(ctx: ConvertContext, rec: Recurrence) -> str:
    """X @ W^T (+ input bias) of every step and direction: [steps, batch, directions*gates*H]."""
    node, gates = rec.node, rec.cell.gates * rec.hidden
    width = len(rec.directions) * gates
    x = rec.time_major(ctx, node.inputs[0])
    features = ctx.type(x).shape[2]
    operands = [reshape(ctx, x, (rec.steps * rec.batch, features)),
                reshape(ctx, node.inputs[1], (width, features))]  # fmt: skip
    if node.input(3):
        bias = slice_axes(ctx, node.inputs[3], {1: (0, gates)})
        if not (node.op_type == "GRU" and node.attrs.get("linear_before_reset", 0)):
            # R's bias is outside the reset gate's product: it joins W's
            recurrent_bias = slice_axes(ctx, node.inputs[3], {1: (gates, 2 * gates)})
            bias = ctx.add("Add", [bias, recurrent_bias])[0]
        operands.append(reshape(ctx, bias, (width,)))
    (projected,) = ctx.add("Gemm", operands, GEMM_T)
    return reshape(ctx, projected, (rec.steps, rec.batch, width))


def run_direction(
    ctx: ConvertContext, rec: Recurrence, projected: str, index: int, states: list[str]
) -> tuple[list[str], list[str]]:
    """(the H of every step in time order, the final states) of direction `index`."""
    count, gates = len(rec.directions), rec.cell.gates * rec.hidden

    def mine(name: str) -> str:
        """This direction's part of an input with a leading direction axis."""
        if not name:
            return ""
        part = slice_axes(ctx, name, {0: (index, index + 1)}) if count > 1 else name
        return reshape(ctx, part, ctx.type(part).shape[1:])

    node = rec.node
    acts = read_activations(node, rec.cell.activations, count)[index]
    d = Direction(ctx, node, rec.hidden, rec.batch, mine(node.inputs[2]), mine(node.input(3)),
                  mine(node.input(7)), acts, [mine(s) or None for s in states])  # fmt: skip
    zeros = ctx.add_const(np.zeros((rec.batch, rec.hidden), ctx.type(projected).dtype))
    ys = [zeros] * rec.steps  # steps past every entry's end give 0
    live = rec.steps if rec.lengths is None else int(rec.lengths.max(initial=0))
    times = range(live) if rec.directions[index] == "forward" else range(live - 1, -1, -1)
    for t in times:
        x = slice_axes(ctx, projected, {0: (t, t + 1), 2: (index * gates, (index + 1) * gates)})
        new = rec.cell.step(d, reshape(ctx, x, (rec.batch, gates)))
        if rec.lengths is None:
            d.states, ys[t] = list(new), new[0]
            continue
        running = ctx.add_const((t < rec.lengths).reshape(rec.batch, 1))
        held = [s or zeros for s in d.states]
        d.states = [ctx.add("Where", [running, n, s])[0] for n, s in zip(new, held)]
        ys[t] = ctx.add("Where", [running, new[0], zeros])[0]
    return ys, [s or zeros for s in d.states]


def emit(ctx: ConvertContext, rec: Recurrence, index: int, parts: list[str], shape, perm) -> None:
    """Output `index`, when asked for: `parts` stacked on a new axis 0, in the node's layout."""
    node = rec.node
    if index >= len(node.outputs) or not node.outputs[index]:
        return
    rows = [reshape(ctx, p, (1, *ctx.type(p).shape)) for p in parts]
    joined = ctx.add("Concat", rows, {"axis": 0})[0] if len(rows) > 1 else rows[0]
    if rec.layout:
        ctx.add("Transpose", [reshape(ctx, joined, shape)], {"perm": perm},
                outputs=[node.outputs[index]])  # fmt: skip
    else:
        reshape(ctx, joined, shape, node.outputs[index])


def convert_recurrent(ctx: ConvertContext, node: OnnxNode) -> None:
    """Unroll one RNN, GRU or LSTM node; outputs Y, Y_h (and LSTM's Y_c) when asked for."""
    cell = CELLS[node.op_type]
    if any(node.outputs[1 + len(cell.state_inputs) :]):
        raise ModelError(f"{node.describe()}: {node.op_type} has at most "
                         f"{1 + len(cell.state_inputs)} outputs")  # fmt: skip
    rec = read_recurrence(ctx, node, cell)
    projected = project(ctx, rec)
    initial = [rec.time_major(ctx, node.input(i)) for i in cell.state_inputs]
    ys, finals = [], []
    for index in range(len(rec.directions)):
        y, final = run_direction(ctx, rec, projected, index, initial)
        ys.append(y)
        finals.append(final)
    count, batch, hidden = len(rec.directions), rec.batch, rec.hidden
    by_time = [ys[d][t] for t in range(rec.steps) for d in range(count)]
    emit(ctx, rec, 0, by_time, (rec.steps, count, batch, hidden), (2, 0, 1, 3))
    for k in range(len(cell.state_inputs)):
        emit(ctx, rec, 1 + k, [f[k] for f in finals], (count, batch, hidden), (1, 0, 2))


@converter("RNN", "GRU", "LSTM")
def RNN(ctx: ConvertContext, node: OnnxNode) -> None:
    """RNN, GRU and LSTM, unrolled over their static sequence into Gemm and elementwise steps."""
    convert_recurrent(ctx, node)
