"""Identical kernels share one: the layers of a transformer or a ResNet stage lower to kernels
that differ only in their names and their buffers' names, and generating each anew is most of
the compile time of such models (ViT-B/16: 198 kernels for 12 identical layers).

Two kernels are identical when their printed text (signature, attributes, body) is equal once
each is rebuilt with positional names: the kernel's own, its params' in order, its scratch
buffers' in order of appearance. Renaming happens in the IR, not the text, so a buffer can never
be confused with a variable, a function or a type of the same name; and the printer shows every
field codegen reads (types, loop kinds, scopes, typed literals), so equal texts mean equal code.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tvmc.kernel import Buffer, Kernel
from tvmc.kernel.printer import kernel_str
from tvmc.kernel.transform import rewrite

# not an identifier character: no variable, function or type prints like a renamed buffer
_MARK = "$"


def canonical_text(kernel: Kernel) -> str:
    """`kernel`'s text with its own name and its buffers' names replaced by their positions."""
    names = {b.name: f"{_MARK}p{i}" for i, b in enumerate(kernel.params)}

    def renamed(buffer: Buffer) -> Buffer:
        name = names.setdefault(buffer.name, f"{_MARK}s{len(names)}")
        return replace(buffer, name=name)

    def rename(node: Any) -> Any:
        buffer = getattr(node, "buffer", None)
        return replace(node, buffer=renamed(buffer)) if isinstance(buffer, Buffer) else node

    body = rewrite(kernel.body, rename)
    attrs = dict(kernel.attrs)
    if not isinstance(attrs.get("noalias", True), bool):
        attrs["noalias"] = sorted(names.get(n, n) for n in attrs["noalias"])
    params = tuple(renamed(b) for b in kernel.params)
    return kernel_str(Kernel("kernel", params, body, attrs))


def shared_kernels(kernels: list[Kernel]) -> dict[str, Kernel]:
    """Kernel name -> the kernel whose code runs it: the first of the kernels identical to it."""
    first: dict[str, Kernel] = {}
    return {k.name: first.setdefault(canonical_text(k), k) for k in kernels}
