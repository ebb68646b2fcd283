"""The imports between the modules of a package, read from their source with `ast` (nothing is
imported): who imports whom, the cycles among them, and imports of the package's root.

Every import counts, at module level or inside a function (a lazy import still ties the two
modules together), except the ones under `if TYPE_CHECKING:`, which only name types. An import
names the module it loads: `from a.b import c` is an edge to `a.b.c` when that is a module, else
to `a.b`; the parent packages Python also initialises are left out (or every module would form a
cycle with the `__init__` of its own package).
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Import:
    """One import statement's edge: `module` imports `target` at `line`."""

    module: str
    target: str
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`
    names_root: bool  # `import pkg` or `from pkg import name` (not a submodule) of the root


def modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module names of the package in directory `root` (named after it), with their files."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(root: pathlib.Path) -> list[Import]:
    """Every import from one module of the package to another."""
    known = modules(root)
    edges = []
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        for node, type_only in _import_nodes(ast.parse(path.read_text(), str(path))):
            for target, names_root in _targets(node, module, is_package, known, root.name):
                if target != module:
                    edges.append(Import(module, target, node.lineno, type_only, names_root))
    return edges


def _import_nodes(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """(import statement, under `if TYPE_CHECKING:`?) anywhere in the tree."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, type_only = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, type_only
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack += [(child, True) for child in node.body]
            stack += [(child, type_only) for child in node.orelse]
            continue
        stack += [(child, type_only) for child in ast.iter_child_nodes(node)]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: dict, root: str
) -> Iterator[tuple[str, bool]]:
    """(the module of the package each name of an import loads, whether it is the bare root)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _nearest(alias.name, known)
            if target:
                yield target, alias.name == root
        return
    base = node.module or ""
    if node.level:  # relative: from the module's package, one level up per extra dot
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    for alias in node.names:
        full = f"{base}.{alias.name}"
        if full in known:
            yield full, False
        else:
            target = _nearest(base, known)
            if target:
                yield target, target == root


def _nearest(name: str, known: dict) -> str:
    """`name`, or the closest enclosing package of the package that is a module ('' if none)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def cycles(edges: list[Import]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan), type-only imports left
    out; each is a set of modules that import one another in a circle."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        if not edge.type_only:
            graph.setdefault(edge.module, set()).add(edge.target)
            graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:  # recursive: module graphs are shallow
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(component: frozenset[str], edges: list[Import]) -> str:
    """A cycle's modules and the imports that tie them, one per line."""
    inside = sorted(
        {
            f"  {e.module} -> {e.target} (line {e.line})"
            for e in edges
            if e.module in component and e.target in component and not e.type_only
        }
    )
    return ", ".join(sorted(component)) + ":\n" + "\n".join(inside)
