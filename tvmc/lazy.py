"""A package's public names imported on first use (PEP 562 module `__getattr__`).

`import tvmc` and `tvmc --help` then load no compiler, and `tvmc run` loads no ONNX frontend or
tuner: each name is looked up in the module that defines it only when someone asks for it.
Shared by every layer, like errors and config.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`; `exports` maps each public name to the module
    defining it, as 'module' or 'module:attribute' (when the name there differs)."""

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = target.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        setattr(sys.modules[package], name, value)  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
