"""One dispatch mechanism for the passes over kernel IR, and walks that see a DAG as a DAG.

A node class declares its children once (`child_fields`; `binding_fields` for the var a For or
Let binds), so generic walks and rewrites need no per-class code. A pass subclasses `Visitor`
and writes `visit_<ClassName>` methods for the nodes it treats specially; a node without one
gets its nearest base class's (`visit_BinaryOp` serves Add, Sub...), then `generic_visit`.
Adding a node type is one edit per pass that cares about it.

Templates build expression DAGs: a fused chain reads its producer's value as one Python object
referenced many times (Relu is `select(x < 0, 0, x)`, so n chained Relus are 2**n tree nodes).
Passes visit each distinct node once per run (memoized by identity). Passes whose output is
text or code write an expression out as a tree, as they always did, unless its tree exceeds
EXPAND_LIMIT nodes (`Expr.tree_nodes`, known when it is built): then they walk it children first
(`post_order`, no recursion however deep) and name shared nodes (printer, interpreter) or lower
them once (codegen).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from tvmc.kernel.expr import Expr, FloatImm, IntImm, Var
from tvmc.kernel.stmt import Stmt

Node = Expr | Stmt

# Below this many tree nodes an expression is printed and lowered as the tree it always was (the
# light models' largest is about 1,100, so their code is unchanged); above it, shared nodes are
# named once (printer, interpreter) or lowered once (codegen), so the work is the DAG's size.
EXPAND_LIMIT = 4096


class _MethodTable(dict):  # type: ignore[type-arg]
    """Node class -> a visitor class's method for it, found once on first use."""

    def __init__(self, visitor_class: type) -> None:
        super().__init__()
        self.visitor_class = visitor_class

    def __missing__(self, node_class: type) -> Callable[..., Any]:
        for base in node_class.__mro__:
            method = getattr(self.visitor_class, f"visit_{base.__name__}", None)
            if method is not None:
                break
        else:
            method = self.visitor_class.generic_visit
        self[node_class] = method
        return method


class Visitor:
    """Base of passes: `visit(node, *args)` runs the `visit_<ClassName>` method for the node.

    `methods[type(node)]` is that method, unbound; a pass's hot recursive entry may call it
    directly, one Python frame fewer per expression level than `visit` (deep expressions meet
    the interpreter's recursion limit).
    """

    methods: ClassVar[_MethodTable]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.methods = _MethodTable(cls)  # per visitor class, so overrides are found

    def visit(self, node: Any, *args: Any) -> Any:
        """This pass's result for `node`."""
        return self.methods[type(node)](self, node, *args)

    def generic_visit(self, node: Any, *args: Any) -> Any:
        """What a node without a method of its own gets: an error naming the pass and the node."""
        raise TypeError(f"{type(self).__name__}: unknown node {type(node).__name__}")


Visitor.methods = _MethodTable(Visitor)


def children(node: Node) -> Iterable[Node]:
    """The direct Expr/Stmt children of `node`, in field order (binding vars included)."""
    out: list[Node] = []
    for name in getattr(node, "child_fields", ()):  # a stray non-node is a leaf, for validate
        value = getattr(node, name)
        if isinstance(value, tuple):
            out.extend(value)
        elif value is not None:
            out.append(value)
    return out


def uses(node: Node) -> Iterable[Node]:
    """`children` without the vars `node` binds (they name, they do not use)."""
    if not node.binding_fields:
        return children(node)
    return [c for name in node.child_fields if name not in node.binding_fields
            for c in _field_nodes(getattr(node, name))]  # fmt: skip


def _field_nodes(value: Any) -> tuple[Node, ...]:
    return value if isinstance(value, tuple) else () if value is None else (value,)


def post_order(
    node: Node,
    skip: Callable[[Node], bool] | None = None,
    edges: Callable[[Node], Iterable[Node]] = children,
) -> list[Node]:
    """Each distinct node under `node` once, children before parents, without recursion.

    `skip(n)` true leaves `n` and everything under it out (a pass's nodes done already);
    `edges` gives a node's children (`uses` leaves binding vars out)."""
    seen: set[int] = set()
    out: list[Node] = []
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            out.append(n)
        elif id(n) not in seen and not (skip is not None and skip(n)):
            seen.add(id(n))
            stack.append((n, True))
            stack.extend((c, False) for c in reversed(list(edges(n))) if id(c) not in seen)
    return out


def tree_size(node: Node) -> int:
    """Nodes under `node` counted per occurrence (what a tree walk visits), in linear time."""
    if isinstance(node, Expr):
        return node.tree_nodes  # computed when the expression was built
    sizes: dict[int, int] = {}
    for n in post_order(node, edges=_statements):
        sizes[id(n)] = 1 + sum(c.tree_nodes if isinstance(c, Expr) else sizes[id(c)]
                               for c in children(n))  # fmt: skip
    return sizes[id(node)]


def _statements(node: Node) -> list[Node]:
    return [c for c in children(node) if isinstance(c, Stmt)]


def shared_subexpressions(e: Expr) -> list[Expr]:
    """Non-leaf nodes referenced more than once under `e`, children before parents."""
    order = post_order(e)
    parents: Counter[int] = Counter(id(c) for n in order for c in children(n))
    leaves = (Var, IntImm, FloatImm)
    return [n for n in order if parents[id(n)] > 1 and not isinstance(n, leaves)]  # type: ignore[misc]
