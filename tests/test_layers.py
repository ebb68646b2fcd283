"""Imports point downward only: each layer may import just the layers listed for it."""

from __future__ import annotations

import ast
import pathlib

import tvmc
from tvmc.ops import OPS

ROOT = pathlib.Path(tvmc.__file__).parent
BASE = {"errors", "config"}
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
                layers.add("version" if parts[1] == "__version__" else parts[1])
    return layers


def test_layers_import_downward_only():
    problems = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((ROOT / layer).rglob("*.py")):
            bad = imported_layers(path) - allowed - {layer}
            if bad:
                problems.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_every_op_is_complete():
    """Each registered op has a shape rule, a reference and a docstring-worthy name."""
    for name, opdef in OPS.items():
        assert opdef.name == name
        assert callable(opdef.infer) and callable(opdef.reference), name
        low, high = opdef.num_inputs
        assert 0 <= low <= high, name
