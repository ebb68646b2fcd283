"""Every registered op has a lowering on every target kind: a compute or a template."""

from __future__ import annotations

from tvmc.ops import OPS
from tvmc.ops.lowering import TARGET_KINDS


def missing_lowerings() -> list[tuple[str, str]]:
    """(op, target kind) pairs whose table entry says the op cannot run there."""
    return sorted((name, kind) for name, op in OPS.items() for kind in TARGET_KINDS
                  if op.lowerings.get(kind) is None)  # fmt: skip


def test_every_op_has_a_lowering():
    assert missing_lowerings() == []
