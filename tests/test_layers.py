"""Imports point downward only: each layer may import just the layers listed for it; no module
imports itself through others (tests/layers.py reads the imports); none imports the root package."""

from __future__ import annotations

import ast
import pathlib

import tvmc
from tests.layers import cycles, describe, imports

ROOT = pathlib.Path(tvmc.__file__).parent
BASE = {"errors", "config", "dtypes", "lazy", "memory", "plan"}
ALLOWED = {
    "graph": BASE,
    "kernel": BASE,
    "ops": BASE | {"graph", "kernel"},
    "frontend": BASE | {"graph", "ops"},
    "passes": BASE | {"graph", "ops"},
    "lower": BASE | {"graph", "kernel", "ops", "passes"},
    "codegen": BASE | {"kernel"},
    "runtime": BASE | {"graph", "kernel", "codegen"},
    "autotune": BASE
    | {"graph", "kernel", "ops", "passes", "lower", "codegen", "runtime", "version"},
    "driver": BASE
    | {
        "graph",
        "kernel",
        "ops",
        "frontend",
        "passes",
        "lower",
        "codegen",
        "runtime",
        "autotune",
        "version",
    },  # fmt: skip
    "cli": BASE | {"driver", "version"},
}


def imported_layers(path: pathlib.Path) -> set[str]:
    layers = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module + "." + alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "tvmc" and len(parts) > 1:
                layers.add(parts[1])
    return layers


def test_layers_import_downward_only():
    problems = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((ROOT / layer).rglob("*.py")):
            bad = imported_layers(path) - allowed - {layer}
            if bad:
                problems.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not problems, "upward imports:\n" + "\n".join(problems)


# ---- no import cycles ----------------------------------------------------------------------------
# A cycle kept on purpose is listed with its reason; each must match exactly (a cycle that grows
# fails) and still exist (a fixed one must leave this list).
KNOWN_CYCLES: dict[frozenset[str], str] = {}  # none: a cycle added on purpose must be listed
# Modules that may import the root package: its own __init__, and the entry points nothing
# imports (`python -m tvmc`, and `python -m tvmc.demo`, a walkthrough of the public API as a
# user writes it).
ROOT_IMPORTERS = {"tvmc", "tvmc.__main__", "tvmc.demo"}


def test_no_import_cycles():
    """No module imports itself through others, at module level or inside a function."""
    edges = imports(ROOT)
    found = cycles(edges)
    new = [describe(c, edges) for c in found if c not in KNOWN_CYCLES]
    assert not new, "import cycles:\n" + "\n".join(new)
    fixed = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert not fixed, f"no longer cycles: remove them from KNOWN_CYCLES: {fixed}"


def test_no_module_imports_the_root_package():
    """`tvmc/__init__.py` imports the driver: a module it loads cannot import it back."""
    bad = [f"{e.module} (line {e.line})" for e in imports(ROOT)
           if e.names_root and e.module not in ROOT_IMPORTERS]  # fmt: skip
    assert not bad, "import the module itself (tvmc.version, ...), not tvmc: " + ", ".join(bad)


def write_package(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    """A package `pkg` in `root` with the given modules (relative path -> source)."""
    for name, text in {"__init__.py": "", **files}.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_the_checker_finds_cycles_and_only_cycles(tmp_path):
    cyclic = write_package(tmp_path / "a", {
        "x.py": "from pkg.y import f\n",
        "y.py": "def f():\n    from pkg import z  # lazy, still an edge\n",
        "z.py": "from . import x\n",  # relative
        "sub/__init__.py": "from ..x import f\n",
    })  # fmt: skip
    edges = imports(cyclic)
    assert cycles(edges) == [frozenset({"pkg.x", "pkg.y", "pkg.z"})]
    assert "pkg.y -> pkg.z (line 2)" in describe(cycles(edges)[0], edges)

    acyclic = write_package(tmp_path / "b", {
        "x.py": "import pkg.y\nfrom pkg.sub import g\n",
        "y.py": "import os\n",
        "sub/__init__.py": "def g(): ...\n",
        "sub/w.py": "from pkg.sub import g\n",  # a module and its own package: no cycle
    })  # fmt: skip
    assert cycles(imports(acyclic)) == []

    type_only = write_package(tmp_path / "c", {
        "x.py": "from typing import TYPE_CHECKING\nfrom pkg.y import f\n"
                "if TYPE_CHECKING:\n    from pkg.z import T\n",
        "y.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg import x\n"
                "else:\n    import os\nf = 1\n",
        "z.py": "from pkg.y import f\n",
    })  # fmt: skip
    edges = imports(type_only)
    assert cycles(edges) == [] and sum(e.type_only for e in edges) == 2

    rooted = write_package(tmp_path / "d", {
        "x.py": "import pkg\n", "y.py": "from pkg import VERSION\n", "z.py": "from pkg import x\n",
    })  # fmt: skip
    assert sorted(e.module for e in imports(rooted) if e.names_root) == ["pkg.x", "pkg.y"]
