"""Einsum as ops tvmc already has: Transpose, Reshape, Gather (diagonals), ReduceSum, MatMul.

The equation gives every dim of every operand a label; an ellipsis stands for labels of its own,
right-aligned across operands as numpy broadcasts them. Each operand first loses its repeated
labels (a diagonal: both axes moved last, merged, gathered at stride n + 1) and the labels no
other operand or the output names (summed). The operands then fold left to right, two at a time,
into one batched MatMul each, [batch, left, contracted] x [batch, contracted, right], Reshapes
merging the label groups; products without a summed label (outer, elementwise) and element
types MatMul lacks are a broadcasting Mul (then a ReduceSum).
Labels the output does not name are summed, and a Transpose puts the rest in the output's order.
"""

from __future__ import annotations

import math
import string
from collections import Counter
from collections.abc import Sequence

import numpy as np

from tvmc.frontend.context import ConvertContext

ELLIPSIS = "..."
MATMUL_DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint32", "uint64")
Labels = list[str]  # one per dim: a letter, or ".k" for the k-th dim an ellipsis stands for


def parse(equation: str, ranks: Sequence[int]) -> tuple[list[Labels], Labels]:
    """Labels of each operand and of the output (implicit: the ellipsis dims, then the letters
    used once, sorted); ValueError for a malformed equation or one that does not fit the ranks."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"equation {equation!r} has {len(terms)} operands for {len(ranks)} inputs")
    split = [_split_term(t, equation) for t in terms]
    widths = []
    for (before, after, dotted), rank in zip(split, ranks):
        named = len(before) + len(after)
        if rank < named or (rank > named and not dotted):
            raise ValueError(f"equation {equation!r}: term {before}{after} for an input of rank "
                             f"{rank}")  # fmt: skip
        widths.append(rank - named)
    dots = [f".{k}" for k in range(max(widths, default=0))]
    inputs = [[*before, *dots[len(dots) - w :], *after] for (before, after, _), w in
              zip(split, widths)]  # fmt: skip
    if not arrow:
        once = sorted(c for c, n in Counter(c for t in terms for c in t if c != ".").items()
                      if n == 1)  # fmt: skip
        return inputs, [*dots, *once]
    before, after, dotted = _split_term(rhs, equation)
    output = [*before, *(dots if dotted else []), *after]  # no ellipsis: its dims are summed
    known = {label for labels in inputs for label in labels}
    if len(set(output)) != len(output) or not set(output) <= known:
        raise ValueError(f"equation {equation!r}: output labels must be distinct input labels")
    return inputs, output


def _split_term(term: str, equation: str) -> tuple[str, str, bool]:
    """(letters before an ellipsis, letters after it, whether there is one)."""
    before, dotted, after = term.partition(ELLIPSIS)
    letters = before + after
    if "." in letters or not set(letters) <= set(string.ascii_letters):
        raise ValueError(f"equation {equation!r}: term {term!r} is not letters and one '...'")
    return before, after, bool(dotted)


def label_sizes(inputs: list[Labels], shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    """The size of every label; a label of size 1 broadcasts against any other size."""
    sizes: dict[str, int] = {}
    for labels, shape in zip(inputs, shapes):
        for label, size in zip(labels, shape):
            seen = sizes.setdefault(label, size)
            if size != seen and 1 not in (size, seen):
                raise ValueError(f"label {label.replace('.', '...')} has sizes {seen} and {size}")
            sizes[label] = max(seen, size) if 1 in (size, seen) else size
    return sizes


class _Builder:
    """Adds the nodes of one Einsum, tracking each intermediate's labels."""

    def __init__(self, ctx: ConvertContext):
        self.ctx = ctx

    def shape(self, tensor: str) -> tuple[int, ...]:
        return self.ctx.type(tensor).shape

    def transpose(self, tensor: str, labels: Labels, order: Labels) -> str:
        perm = [labels.index(label) for label in order]
        if perm == sorted(perm):
            return tensor
        return self.ctx.add("Transpose", [tensor], {"perm": perm})[0]

    def reshape(self, tensor: str, shape: Sequence[int]) -> str:
        if tuple(shape) == self.shape(tensor):
            return tensor
        return self.ctx.add("Reshape", [tensor], {"shape": tuple(shape)})[0]

    def sum(self, tensor: str, labels: Labels, drop: set[str]) -> tuple[str, Labels]:
        axes = tuple(i for i, label in enumerate(labels) if label in drop)
        if not axes:
            return tensor, labels
        (out,) = self.ctx.add("ReduceSum", [tensor], {"axes": axes, "keepdims": False})
        return out, [label for label in labels if label not in drop]

    def squeeze(self, tensor: str, labels: Labels, label: str) -> tuple[str, Labels]:
        """`label` (of size 1) dropped."""
        kept = [x for x in labels if x != label]
        shape = [d for x, d in zip(labels, self.shape(tensor)) if x != label]
        return self.reshape(tensor, shape), kept

    def diagonal(self, tensor: str, labels: Labels, label: str) -> tuple[str, Labels]:
        """The diagonal of the first two axes labelled `label`, as one axis at the end."""
        first = labels.index(label)
        second = labels.index(label, first + 1)
        rest = [x for i, x in enumerate(labels) if i not in (first, second)]
        n = self.shape(tensor)[first]
        if self.shape(tensor)[second] != n:
            raise ValueError(f"a diagonal of label {label} over sizes {n} and "
                             f"{self.shape(tensor)[second]}")  # fmt: skip
        others = [i for i in range(len(labels)) if i not in (first, second)]
        (moved,) = self.ctx.add("Transpose", [tensor], {"perm": [*others, first, second]})
        flat = self.reshape(moved, [*self.shape(moved)[:-2], n * n])
        stride = self.ctx.add_const(np.arange(n, dtype=np.int64) * (n + 1))
        (out,) = self.ctx.add("Gather", [flat, stride], {"axis": len(rest)})
        return out, [*rest, label]

    def product(self, a: str, la: Labels, b: str, lb: Labels, keep: set[str]) -> tuple[str, Labels]:
        """a x b over their shared labels: those in `keep` are batch dims, the others summed."""
        for label in [x for x in la if x in lb and x not in keep]:  # a broadcast contraction
            if self.shape(a)[la.index(label)] == 1 != self.shape(b)[lb.index(label)]:
                a, la = self.squeeze(a, la, label)
            elif self.shape(b)[lb.index(label)] == 1 != self.shape(a)[la.index(label)]:
                b, lb = self.squeeze(b, lb, label)
        a, la = self.sum(a, la, {x for x in la if x not in lb and x not in keep})
        b, lb = self.sum(b, lb, {x for x in lb if x not in la and x not in keep})
        batch = [x for x in la if x in lb and x in keep]
        summed = [x for x in la if x in lb and x not in keep]
        left = [x for x in la if x not in lb]
        right = [x for x in lb if x not in la]
        size_a = dict(zip(la, self.shape(a)))
        size_b = dict(zip(lb, self.shape(b)))
        if not summed or self.ctx.type(a).dtype not in MATMUL_DTYPES:  # no K: a plain Mul
            return self._multiply(a, la, b, lb, batch, left, right, summed)
        a = self.transpose(a, la, batch + left + summed)
        b = self.transpose(b, lb, batch + summed + right)
        m = math.prod(size_a[x] for x in left)
        k = math.prod(size_a[x] for x in summed)
        n = math.prod(size_b[x] for x in right)
        a = self.reshape(a, [*(size_a[x] for x in batch), m, k])
        b = self.reshape(b, [*(size_b[x] for x in batch), k, n])
        (c,) = self.ctx.add("MatMul", [a, b])
        batch_shape = self.shape(c)[: len(batch)]  # broadcast by MatMul
        shape = [*batch_shape, *(size_a[x] for x in left), *(size_b[x] for x in right)]
        return self.reshape(c, shape), batch + left + right

    def _multiply(self, a, la, b, lb, batch, left, right, summed) -> tuple[str, Labels]:
        """a x b by broadcasting Mul and ReduceSum: [batch, left, right, summed] in full."""
        order = batch + left + right + summed
        size_a, size_b = dict(zip(la, self.shape(a))), dict(zip(lb, self.shape(b)))
        a = self.transpose(a, la, [x for x in order if x in la])
        b = self.transpose(b, lb, [x for x in order if x in lb])
        a = self.reshape(a, [size_a.get(x, 1) for x in order])
        b = self.reshape(b, [size_b.get(x, 1) for x in order])
        (c,) = self.ctx.add("Mul", [a, b])
        return self.sum(c, order, set(summed))


def einsum(ctx: ConvertContext, equation: str, operands: Sequence[str]) -> str:
    """The tensor holding einsum(`equation`, operands), built from existing ops."""
    shapes = [ctx.type(t).shape for t in operands]
    dtypes = {ctx.type(t).dtype for t in operands}
    if len(dtypes) != 1:
        raise ValueError(f"Einsum operands must share one dtype, got {sorted(dtypes)}")
    inputs, output = parse(equation, [len(s) for s in shapes])
    label_sizes(inputs, shapes)
    build = _Builder(ctx)
    terms: list[tuple[str, Labels]] = []
    for i, (tensor, labels) in enumerate(zip(operands, inputs)):
        while len(set(labels)) != len(labels):
            repeated = next(x for x in labels if labels.count(x) > 1)
            tensor, labels = build.diagonal(tensor, labels, repeated)
        elsewhere = set(output).union(*(inputs[j] for j in range(len(inputs)) if j != i))
        terms.append(build.sum(tensor, labels, {x for x in labels if x not in elsewhere}))
    tensor, labels = terms[0]
    for j, (other, other_labels) in enumerate(terms[1:], start=1):
        keep = set(output).union(*(later for _, later in terms[j + 1 :]))
        tensor, labels = build.product(tensor, labels, other, other_labels, keep)
    tensor, labels = build.sum(tensor, labels, {x for x in labels if x not in output})
    return build.transpose(tensor, labels, output)
