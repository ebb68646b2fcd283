"""What compiled code exports and how it is called, as plain data: kernel signatures, CUDA
launches and the symbols the loader reads.

Pure data, no LLVM: the runtime reads packages with it without loading libLLVM (llvmlite), and
the code generators write what it describes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tvmc.kernel import Kernel

NUM_THREADS_SYMBOL = "__tvmc_num_threads"  # int32 global: threads parallel loops ask the pool for
SCRATCH_FAILED_SYMBOL = "__tvmc_scratch_failed"  # int32 global: nonzero once heap scratch failed
# int32 global of a per-image entry: the image workspaces its caller's workspace holds (the
# runtime sets it before the first call; its initial value is the plan's `slots`)
IMAGE_SLOTS_SYMBOL = "__tvmc_image_slots"
LAYOUT_SYMBOL = "__tvmc_layout"  # char[64] constant: the layout digest (tvmc.codegen.layout)
LAYOUT_BYTES = 64  # a hex SHA-256


@dataclass(frozen=True)
class KernelSignature:
    """What a caller needs to call a compiled kernel: its name and its params' types."""

    name: str
    params: tuple[tuple[str, tuple[int, ...], str], ...]  # (name, shape, dtype)

    @classmethod
    def of(cls, kernel: Kernel) -> KernelSignature:
        """The signature of `kernel`."""
        return cls(kernel.name, tuple((b.name, b.shape, b.dtype) for b in kernel.params))

    def to_json(self) -> dict:
        """A JSON-shaped dict (for package metadata)."""
        return {"name": self.name, "params": [[n, list(s), d] for n, s, d in self.params]}

    @classmethod
    def from_json(cls, data: dict) -> KernelSignature:
        """Inverse of to_json."""
        return cls(data["name"], tuple((n, tuple(s), d) for n, s, d in data["params"]))


@dataclass(frozen=True)
class Launch:
    """One kernel launch: what, how wide, on which program buffers."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[str, ...]  # program buffer names, one per kernel param
    node: str = ""  # the graph node (or fused group), for profiles
    flops: int = 0

    @property
    def threads(self) -> int:
        """Threads per block."""
        return self.block[0] * self.block[1] * self.block[2]

    def to_json(self) -> dict[str, Any]:
        """A JSON-shaped dict (mod.json's `launches`)."""
        return {"kernel": self.kernel, "grid": list(self.grid), "block": list(self.block),
                "shared": self.shared_bytes, "args": list(self.args), "node": self.node,
                "flops": self.flops}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Launch:
        """Inverse of to_json."""
        grid, block = tuple(int(v) for v in d["grid"]), tuple(int(v) for v in d["block"])
        if len(grid) != 3 or len(block) != 3 or min(grid + block) < 1:
            raise ValueError(f"launch of {d['kernel']!r}: grid/block must be 3 positive extents")
        return cls(d["kernel"], grid, block, int(d["shared"]),  # type: ignore[arg-type]
                   tuple(d["args"]), d.get("node", ""), int(d.get("flops", 0)))  # fmt: skip
