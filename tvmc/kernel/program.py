"""A whole model in kernel IR terms: kernels, the buffers they run on, and the call order.

Lowering (tvmc.lower) produces a Program from a graph; codegen turns it into one native entry
function `void <entry>(void **args, void *workspace)` that makes every call in order, so running a
model is a single foreign call. `args` holds the data pointers of the inputs, then the outputs,
then the params, in the Program's order; `workspace` is `workspace_bytes` of scratch memory
(64-byte aligned) where every intermediate tensor lives at its planned offset.

A Program of `images` > 1 (`tvmc.passes.per_image`) is one image's: its buffers and calls are one
image's, and the entry runs the calls once per image, images side by side on the thread pool.
Image n of an input or output starts n times its buffer's bytes into the caller's array (which
holds `images` of them); params are shared. The workspace holds image workspaces of
`workspace_bytes` each, as many as images run at once: each run of images side by side takes a
free slot for as long as it runs, so no two images running at once share one. The runtime
allocates one for each thread of the machine that runs it and tells the code how many
(`__tvmc_image_slots`); `slots`, the compiling machine's thread count (at most `images`), is
the count until then and what the compile report counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tvmc.kernel.expr import KernelIRError
from tvmc.kernel.stmt import Kernel
from tvmc.plan import (  # noqa: F401  (re-exported: the plan's data types live there)
    STORAGE_KINDS,
    WORKSPACE_ALIGN,
    Call,
    ProgramBuffer,
    Source,
)


@dataclass
class Program:
    """Kernels plus the plan to run them; `inputs`/`outputs`/`params` name buffers in order."""

    kernels: list[Kernel]
    buffers: dict[str, ProgramBuffer]
    calls: list[Call]
    inputs: list[str]
    outputs: list[str]
    params: list[str]
    workspace_bytes: int = 0  # one image's, where images > 1
    naive_bytes: int = 0  # what the intermediates would take without memory reuse
    entry: str = "tvmc_main"
    images: int = 1  # the batch the entry runs image by image (1: the calls run once)
    slots: int = 1  # image workspaces on the compiling machine's threads (at most `images`)
    metadata: dict[str, Any] = field(default_factory=dict)

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KernelIRError(f"program has no kernel {name!r}")

    def validate(self) -> None:
        """Calls match their kernels' params in count, shape and dtype; storage is in range."""
        kernels = {k.name: k for k in self.kernels}
        for call in self.calls:
            kernel = kernels.get(call.kernel)
            if kernel is None:
                raise KernelIRError(f"call of unknown kernel {call.kernel!r}")
            if len(call.args) != len(kernel.params):
                raise KernelIRError(
                    f"{call.kernel} takes {len(kernel.params)} buffers, "
                    f"a call passes {len(call.args)}"
                )
            for param, arg in zip(kernel.params, call.args):
                buf = self.buffers[arg]
                size = 1
                for d in buf.shape:
                    size *= d
                if buf.dtype != param.dtype or (size and size != param.size):
                    raise KernelIRError(
                        f"{call.kernel}: param {param.name} is {param.dtype}{list(param.shape)}, "
                        f"buffer {arg} is {buf.dtype}{list(buf.shape)}"
                    )
        counts = {"input": len(self.inputs), "output": len(self.outputs), "param": len(self.params)}
        for buf in self.buffers.values():
            if buf.storage in counts and not 0 <= buf.index < counts[buf.storage]:
                raise KernelIRError(
                    f"buffer {buf.name}: {buf.storage} index {buf.index} out of range"
                )
            if buf.storage == "workspace" and buf.offset % WORKSPACE_ALIGN:
                raise KernelIRError(f"buffer {buf.name}: workspace offset {buf.offset} unaligned")
