"""A compiled program's plan as plain data: where each buffer lives and the calls in order.

Lowering (tvmc.lower) writes it into a `tvmc.kernel.program.Program`, code generation bakes it
into the entry function, a package's mod.json restates it, and the runtime allocates and binds
by it. Shared by every layer (like errors and dtypes) and importing nothing of tvmc but dtypes,
so that running a package does not import the kernel IR.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tvmc.dtypes import numpy_dtype

STORAGE_KINDS = ("input", "output", "param", "workspace")
WORKSPACE_ALIGN = 64


@dataclass(frozen=True)
class ProgramBuffer:
    """Where one buffer lives: the `index`-th input/output/param, or `offset` bytes into the
    workspace. Several buffers may share storage (a Reshape is a new view of the same bytes)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    storage: str
    index: int = 0  # input/output/param: position in its list
    offset: int = 0  # workspace: byte offset

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor (one image's where the program runs several side by side)."""
        return math.prod(self.shape) * numpy_dtype(self.dtype).itemsize

    def __post_init__(self) -> None:
        if self.storage not in STORAGE_KINDS:
            raise ValueError(f"buffer {self.name}: unknown storage {self.storage!r}")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "storage": self.storage, "index": self.index, "offset": self.offset}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProgramBuffer:
        return cls(d["name"], tuple(d["shape"]), d["dtype"], d["storage"], d["index"], d["offset"])


@dataclass(frozen=True)
class Source:
    """One model node a call computes (for profiles): its ONNX name and op type, the shapes of
    its inputs and of its first output."""

    name: str
    op: str
    inputs: tuple[tuple[int, ...], ...] = ()
    output: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "inputs": [list(s) for s in self.inputs],
                "output": list(self.output)}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Source:
        return cls(d["name"], d["op"], tuple(tuple(s) for s in d["inputs"]), tuple(d["output"]))


@dataclass(frozen=True)
class Call:
    """Kernel `kernel` on program buffers `args` (one per kernel param, same order)."""

    kernel: str
    args: tuple[str, ...]
    node: str = ""  # the graph node (or fused group) this call implements, for profiles
    flops: int = 0  # floating-point operations of one call, for GFLOP/s in profiles
    sources: tuple[Source, ...] = ()  # the model nodes it computes, the group's own node first
