"""The layout digest: what a program's code was compiled for, carried by the code itself.

A package's code bakes in its plan: the entry function's workspace offsets and argument slots,
each kernel's buffer shapes and dtypes, the GPU launches' extents. `mod.json` restates that plan
for the runtime, which allocates and binds by it; if the two disagree the code reads and writes
past the arrays. So the code carries a SHA-256 digest of its plan, and the runtime compares it
with the digest of what `mod.json` says before calling anything:

- CPU: an exported constant `char __tvmc_layout[64]` (the hex digest) in the object and the
  shared library (`program.add_layout_symbol`), read through ctypes or the JIT's global
  address after loading.
- CUDA: a comment line `// __tvmc_layout <hex>` at the end of the PTX.

The digest covers what the code depends on and nothing informative: the entry, the input,
output and param order, every buffer (name, shape, dtype, storage, index, offset), the workspace
size, the images and their workspace slots, every call (kernel, buffers), every kernel signature
and every launch (kernel, grid, block, shared bytes, buffers). Profiling labels, FLOP counts
and `naive_bytes` are left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tvmc.codegen.abi import LAYOUT_BYTES, LAYOUT_SYMBOL, KernelSignature

if TYPE_CHECKING:
    from tvmc.kernel.program import Program

__all__ = ["LAYOUT_BYTES", "LAYOUT_SYMBOL", "layout_digest", "program_plan", "ptx_layout",
           "ptx_with_layout"]  # fmt: skip
PTX_LAYOUT_PREFIX = f"// {LAYOUT_SYMBOL} "


def program_plan(
    program: Program, kernels: Iterable[KernelSignature], launches: Iterable[Any] = ()
) -> dict[str, Any]:
    """`program`'s plan as mod.json states it (`launches`: the CUDA Launch list)."""
    return {
        "entry": program.entry,
        "inputs": list(program.inputs),
        "outputs": list(program.outputs),
        "params": list(program.params),
        "buffers": [b.to_json() for b in program.buffers.values()],
        "calls": [{"kernel": c.kernel, "args": list(c.args)} for c in program.calls],
        "workspace_bytes": program.workspace_bytes,
        "images": program.images,
        "slots": program.slots,
        "kernels": [k.to_json() for k in kernels],
        "launches": [launch.to_json() for launch in launches],
    }


def layout_digest(plan: Mapping[str, Any]) -> str:
    """The hex SHA-256 of the parts of a mod.json-shaped `plan` that the code depends on."""
    buffers = sorted(
        [b["name"], list(b["shape"]), b["dtype"], b["storage"], b["index"], b["offset"]]
        for b in plan["buffers"]
    )
    document = {
        "entry": plan["entry"],
        "inputs": list(plan["inputs"]),
        "outputs": list(plan["outputs"]),
        "params": list(plan["params"]),
        "buffers": buffers,
        "calls": [[c["kernel"], list(c["args"])] for c in plan["calls"]],
        "workspace_bytes": plan["workspace_bytes"],
        "kernels": sorted(
            [k["name"], [[n, list(s), d] for n, s, d in k["params"]]] for k in plan["kernels"]
        ),
        "launches": [
            [x["kernel"], list(x["grid"]), list(x["block"]), x["shared"], list(x["args"])]
            for x in plan.get("launches", ())
        ],
    }
    if plan.get("images", 1) != 1:  # the entry runs that many images (a one-image plan: absent)
        document["images"] = plan["images"]
        if plan.get("slots", plan["images"]) != plan["images"]:  # before slots: one an image
            document["slots"] = plan["slots"]
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def ptx_with_layout(ptx: str, digest: str) -> str:
    """The PTX text with its layout line appended."""
    ending = "" if ptx.endswith("\n") else "\n"
    return f"{ptx}{ending}{PTX_LAYOUT_PREFIX}{digest}\n"


def ptx_layout(ptx: str) -> str | None:
    """The digest of the PTX's layout line; None unless there is exactly one."""
    found = [line[len(PTX_LAYOUT_PREFIX) :].strip() for line in ptx.splitlines()
             if line.startswith(PTX_LAYOUT_PREFIX)]  # fmt: skip
    return found[0] if len(found) == 1 else None
