"""The measurement backend of each target kind: what measurers route a target through.

A new kind of target adds its module (a `MeasureBackend` named BACKEND, importing only
`tvmc.autotune.measure`) and one line here; the measurers do not change.
"""

from __future__ import annotations

from tvmc.autotune import measure_cpu, measure_cuda
from tvmc.autotune.measure import MeasureBackend
from tvmc.codegen.target import target_kind
from tvmc.errors import UsageError, unknown_choice

BACKENDS: dict[str, MeasureBackend] = {
    "llvm": measure_cpu.BACKEND,
    "cuda": measure_cuda.BACKEND,
}


def measure_backend(target: str) -> MeasureBackend:
    """The backend measuring configs for `target` (a UsageError for an unknown kind)."""
    kind = target_kind(target)
    if kind not in BACKENDS:
        raise UsageError(unknown_choice("target", kind, BACKENDS))
    return BACKENDS[kind]
