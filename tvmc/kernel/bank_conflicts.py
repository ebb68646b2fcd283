"""Shared-memory bank conflicts of a GPU kernel, counted by running it in the interpreter.

A GPU's shared memory has 32 banks of 4-byte words; a warp's access is served in as many
wavefronts as the most distinct words any one bank holds among the addresses it asks for. An
access of 8 or 16 bytes per thread is served a half or a quarter warp at a time, so its ideal is 2
or 4 wavefronts; a vector index that is not contiguous is that many separate 4-byte accesses (as
codegen emits it). `bank_conflicts` runs a kernel and reports, per shared access in its source,
the wavefronts taken against the ideal: a factor of 1 is conflict-free, 32 the worst.
Broadcasts (threads reading one word) cost nothing extra, as on the hardware.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvmc.kernel.stmt import Kernel

# the module (tvmc.kernel re-exports its `interpret` function under the module's name)
interpret_module = importlib.import_module("tvmc.kernel.interpret")

BANKS = 32
WARP = 32


@dataclass(frozen=True)
class SiteConflicts:
    """One shared access of the source: warp requests, wavefronts served, and the ideal."""

    site: str  # e.g. "a_tile store 1": the second store into a_tile in the kernel's source
    requests: int
    wavefronts: int
    ideal: int

    @property
    def factor(self) -> float:
        """Wavefronts over the ideal: 1.0 is conflict-free."""
        return self.wavefronts / self.ideal if self.ideal else 1.0


def bank_conflicts(kernel: Kernel, *arrays: np.ndarray) -> list[SiteConflicts]:
    """Runs `kernel` on `arrays` (in place) and counts each shared access's bank conflicts."""
    seen: dict[tuple[int, int, int], int] = defaultdict(int)  # (buffer, site, thread) -> count
    # (buffer, site, part, warp, nth execution) -> the warp's lanes and the words each asks for
    groups: dict[tuple[int, int, int, int, int], list[tuple[int, list[int]]]] = defaultdict(list)
    sizes: dict[int, int] = {}

    def record(buf: Any, idx: tuple[Any, ...], site: int) -> None:
        thread = interpret_module._NOW[1]
        nth = seen[(id(buf), site, thread)]
        seen[(id(buf), site, thread)] = nth + 1
        flat = np.atleast_1d(np.ravel_multi_index(tuple(np.asarray(i) for i in idx), buf.shape))
        item = buf.dtype.itemsize
        contiguous = flat.size == 1 or bool(np.all(np.diff(flat) == 1))
        parts = [flat] if contiguous else [flat[k : k + 1] for k in range(flat.size)]
        sizes[site] = max(sizes.get(site, 0), item * (flat.size if contiguous else 1))
        for k, part in enumerate(parts):
            words = sorted({int(b) // 4 for e in part for b in range(e * item, (e + 1) * item, 4)})
            groups[(id(buf), site, k, thread // WARP, nth)].append((thread % WARP, words))

    hook = interpret_module.ACCESS_HOOK
    previous, hook[0] = hook[0], record
    try:
        interpret_module.interpret(kernel, *arrays)
    finally:
        hook[0] = previous
    names = interpret_module.SHARED_SITES.get(kernel, [])
    totals: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for (_, site, _, _, _), accesses in groups.items():
        width = max(4, min(16, sizes[site]))
        per_phase = WARP * 4 // width  # threads served together
        total = totals[site]
        total[0] += 1
        for start in range(0, WARP, per_phase):
            phase = [words for lane, words in accesses if start <= lane < start + per_phase]
            if not phase:
                continue
            banks: dict[int, set[int]] = defaultdict(set)
            for words in phase:
                for w in words:
                    banks[w % BANKS].add(w)
            total[1] += max(len(v) for v in banks.values())
            total[2] += 1
    return [SiteConflicts(names[s] if s < len(names) else f"site {s}", *totals[s])
            for s in sorted(totals)]  # fmt: skip


def worst(sites: Sequence[SiteConflicts]) -> float:
    """The largest conflict factor among `sites` (1.0 when there are none)."""
    return max((s.factor for s in sites), default=1.0)
