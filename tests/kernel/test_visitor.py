"""The shared visitor: dispatch by class name, declared children, and passes linear on DAGs."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import numpy as np
import pytest

import tvmc.kernel.expr as expr_module
import tvmc.kernel.stmt as stmt_module
from tests.kernel.examples import relu_chain
from tests.kernel.visits import count_visits
from tvmc.kernel import (
    Add,
    Buffer,
    Expr,
    IntImm,
    Kernel,
    Stmt,
    Var,
    call,
    interpret,
    kernel_str,
    loop,
    python_source,
    ramp,
    select,
    validate,
)
from tvmc.kernel.transform import distinct_nodes, free_vars, rewrite, walk
from tvmc.kernel.visitor import (
    EXPAND_LIMIT,
    Visitor,
    children,
    post_order,
    shared_subexpressions,
    tree_size,
)


class _Names(Visitor):
    def visit_Add(self, e: Add) -> str:
        return "add"

    def visit_BinaryOp(self, e: Expr) -> str:
        return "binary"


class _MoreNames(_Names):
    def visit_Add(self, e: Add) -> str:
        return "add, overridden"


def test_dispatch_by_class_name_falls_back_along_the_bases():
    i = Var("i")
    assert _Names().visit(i + 1) == "add"
    assert _Names().visit(i - 1) == "binary"  # Sub has no method: BinaryOp's serves it
    assert _MoreNames().visit(i + 1) == "add, overridden"
    assert _Names().visit(i - 1) == "binary"
    with pytest.raises(TypeError, match="_Names: unknown node Var"):
        _Names().visit(i)


def _node_classes(base: type) -> list[type]:
    found, stack = [], [base]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if dataclasses.is_dataclass(cls) and cls.__module__ in (
            expr_module.__name__,
            stmt_module.__name__,
        ):
            found.append(cls)
    return found


@pytest.mark.parametrize("cls", _node_classes(Expr) + _node_classes(Stmt), ids=lambda c: c.__name__)
def test_child_fields_name_exactly_the_fields_that_hold_nodes(cls):
    node_valued = [f.name for f in dataclasses.fields(cls)
                   if re.search(r"\b(Expr|Stmt|Var)\b", str(f.type))]  # fmt: skip
    assert list(cls.child_fields) == node_valued
    assert set(cls.binding_fields) <= set(cls.child_fields)


def test_dtype_and_lanes_are_computed_when_a_node_is_built():
    x = Buffer("X", (64,))[ramp(0, 8)]
    deep = x
    for _ in range(20_000):  # read recursively, this would pass Python's recursion limit
        deep = deep + 1.0
    assert (deep.dtype, deep.lanes) == ("float32", 8)
    assert select(x < 0.0, 0.0, x).lanes == 8
    assert call("reduce_add", x).lanes == 1
    assert (x < 0.0).dtype == "bool"


def _diamonds(depth: int) -> Expr:
    x: Expr = Var("x", "float32")
    for _ in range(depth):
        x = x * x + x  # each level uses the one below three times
    return x


def test_tree_size_counts_occurrences_post_order_distinct_nodes():
    assert tree_size(_diamonds(8)) == sum(1 for _ in walk(_diamonds(8))) == 2 * 3**8 - 1
    e = _diamonds(30)
    assert len(post_order(e)) == 2 * 30 + 1  # one Mul and one Add per level, and x
    assert len(list(distinct_nodes(e))) == 2 * 30 + 1
    order = post_order(e)
    position = {id(n): k for k, n in enumerate(order)}
    assert all(position[id(c)] < position[id(n)] for n in order for c in children(n))
    assert len(shared_subexpressions(e)) == 30 - 1  # each level's Add but the top one


def test_rewrite_calls_fn_once_per_distinct_node_and_keeps_sharing():
    e = _diamonds(40)
    seen: Counter[int] = Counter()

    def double_x(n: Expr) -> Expr:
        seen[id(n)] += 1
        return IntImm(2) if isinstance(n, Var) else n

    out = rewrite(e, double_x)
    assert max(seen.values()) == 1 and len(seen) == 2 * 40 + 1
    assert out.a.a is out.a.b is out.b  # the shared operand is still one object


def test_free_vars_keeps_first_use_order_on_a_dag():
    i, j = Var("i"), Var("j")
    b = Buffer("B", (8,))
    shared = b[i] * b[j]
    body = loop("k", 4, lambda k: b.store(k, shared + shared * b[k]))
    assert free_vars(body) == [i, j]


def _fan_out(width: int, depth: int = 12) -> Kernel:
    """One deep shared value read by `width` terms of a sum."""
    x, y = Buffer("X", (64,)), Buffer("Y", (64,))

    def point(i: Var):
        v = x[i]
        for _ in range(depth):
            v = select(v < 0.0, 0.0, v) - 0.01
        total = v
        for k in range(width):
            total = total + v * float(k)
        return y.store(i, total)

    return Kernel("fan_out", (x, y), loop("i", 64, point))


def _kernel_passes(kernel: Kernel) -> None:
    validate(kernel)
    kernel_str(kernel)
    python_source(kernel)
    free_vars(kernel.body)


@pytest.mark.parametrize(
    "build, small, big",
    [(lambda d: relu_chain(d).kernel, 10, 100), (_fan_out, 10, 100)],
    ids=["relu_chain_depth", "fan_out_width"],
)
def test_kernel_passes_visit_each_node_once(build, small, big):
    few = count_visits(lambda: _kernel_passes(build(small)))
    many = count_visits(lambda: _kernel_passes(build(big)))
    assert many <= 12 * few  # linear; as trees, the 100-deep chain would be 2**90 times the work


def test_big_dags_print_and_interpret_through_named_shared_nodes():
    ex = relu_chain(100)
    assert tree_size(ex.kernel.body) > EXPAND_LIMIT
    text = kernel_str(ex.kernel)
    assert "%0 = X[jo * 16 + ji] - -0.02" in text and len(text) < 20_000
    assert "_e0 = " in python_source(ex.kernel)
    arrays = ex.inputs(np.random.default_rng(0))
    interpret(ex.kernel, *arrays)
    (want,) = ex.reference(*arrays)
    assert (arrays[-1] == want).all()


def test_small_expressions_print_as_trees_as_always():
    a = Buffer("A", (8,))

    def body(i: Var) -> Stmt:
        x = a[i] + 1.0
        return a.store(i, x * x)

    assert "A[i] = (A[i] + 1.0) * (A[i] + 1.0)" in kernel_str(Kernel("k", (a,), loop("i", 8, body)))
