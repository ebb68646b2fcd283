"""Every registered op has a lowering: a compute (fusable) or a template (whole kernels)."""

from __future__ import annotations

from tvmc.ops import OPS


def missing_lowerings() -> list[str]:
    """Ops with neither a compute nor a template."""
    return sorted(name for name, op in OPS.items() if op.compute is None and op.template is None)


def test_every_op_has_a_lowering():
    assert missing_lowerings() == []
