"""Memory planning: intermediate tensors share one workspace when their lifetimes do not overlap."""

from __future__ import annotations

from collections.abc import Sequence

from tvmc.kernel.program import WORKSPACE_ALIGN


def aligned_size(nbytes: int) -> int:
    """The workspace bytes a buffer of `nbytes` takes (at least one aligned block)."""
    n = max(nbytes, 1)
    return (n + WORKSPACE_ALIGN - 1) // WORKSPACE_ALIGN * WORKSPACE_ALIGN


def plan_workspace(
    sizes: dict[str, int], calls: Sequence[Sequence[str]]
) -> tuple[dict[str, int], int]:
    """Byte offsets for the buffers in `sizes` and the workspace size.

    `calls` lists, in run order, the buffers each call touches. A buffer lives from its first to
    its last call; one call's buffers never overlap (kernels assume their params do not alias).
    Best-fit over a free list, so big early tensors leave room for later ones.
    """
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, names in enumerate(calls):
        for name in names:
            if name in sizes:
                first.setdefault(name, i)
                last[name] = i
    offsets: dict[str, int] = {}
    free: list[tuple[int, int]] = []  # (offset, size), sorted by offset
    top = 0
    for i, names in enumerate(calls):
        for name in dict.fromkeys(names):
            if name not in sizes or first[name] != i:
                continue
            size = aligned_size(sizes[name])
            fits = [(s - size, k) for k, (o, s) in enumerate(free) if s >= size]
            if fits:
                _, k = min(fits)
                offset, space = free.pop(k)
                if space > size:
                    free.insert(k, (offset + size, space - size))
            else:
                if free and free[-1][0] + free[-1][1] == top:  # grow the last hole
                    offset, _ = free.pop()
                else:
                    offset = top
                top = max(top, offset + size)
            offsets[name] = offset
        for name in dict.fromkeys(names):
            if name in sizes and last[name] == i:
                _release(free, offsets[name], aligned_size(sizes[name]))
    return offsets, top


def _release(free: list[tuple[int, int]], offset: int, size: int) -> None:
    """Return [offset, offset+size) to the free list, merging neighbours."""
    free.append((offset, size))
    free.sort()
    merged: list[tuple[int, int]] = []
    for o, s in free:
        if merged and merged[-1][0] + merged[-1][1] == o:
            merged[-1] = (merged[-1][0], merged[-1][1] + s)
        else:
            merged.append((o, s))
    free[:] = merged
