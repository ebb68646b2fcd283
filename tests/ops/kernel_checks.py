"""Checks shared by the compute tests: `check_lowered` that first makes sure the op gets lowered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tests.lowering_helpers import check_lowered, run_node
from tvmc.graph import Node, TensorType
from tvmc.ops import evaluate_node

_MODEL_OPTIONS = ("num_outputs", "opset", "input_order")


def check(
    op: str,
    inputs: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    expect: str | None = None,
    **options: Any,
) -> None:
    """`check_lowered`, asserting the graph still holds `expect` (default: `op`) at lowering.

    Without it a node that the import passes fold or remove would pass without being lowered.
    """
    check_lowered(op, inputs, attrs, constants, expect=expect or op, **options)


def run_direct(op: str, attrs: dict[str, Any], *inputs: np.ndarray, num_outputs: int = 1) -> None:
    """One graph node through its lowering, against tvmc's numpy reference (no ONNX involved)."""
    node = Node(op, [f"x{i}" for i in range(len(inputs))], [f"y{i}" for i in range(num_outputs)],
                attrs)  # fmt: skip
    expected = evaluate_node(node, inputs)
    actual = run_node(node, list(inputs), [TensorType.of(e) for e in expected])
    for got, want in zip(actual, expected):
        np.testing.assert_array_equal(got, want)
