"""Einsum equations parsed into labels (tvmc/frontend/einsum.py); the ops it builds are tested
against onnxruntime in tests/ops/test_einsum_kernels.py."""

from __future__ import annotations

import pytest

from tvmc.frontend.einsum import label_sizes, parse


@pytest.mark.parametrize(
    "equation,ranks,inputs,output",
    [
        ("ij,jk", [2, 2], [["i", "j"], ["j", "k"]], ["i", "k"]),
        ("ba,ca", [2, 2], [["b", "a"], ["c", "a"]], ["b", "c"]),  # implicit: sorted, used once
        ("Ab,ba", [2, 2], [["A", "b"], ["b", "a"]], ["A", "a"]),  # uppercase sorts first
        ("ii", [2], [["i", "i"]], []),  # a repeated label is summed: the trace
        (" ...ii -> ...i", [3], [[".0", "i", "i"]], [".0", "i"]),
        ("a...,...b", [3, 2], [["a", ".0", ".1"], [".1", "b"]], [".0", ".1", "a", "b"]),
        ("...->", [2], [[".0", ".1"]], []),
        ("->", [0], [[]], []),
    ],
)
def test_parse(equation, ranks, inputs, output):
    assert parse(equation, ranks) == (inputs, output)


@pytest.mark.parametrize(
    "equation,ranks,message",
    [
        ("ij,jk", [2], "2 operands for 1 inputs"),
        ("ij", [3], "term ij for an input of rank 3"),
        ("ij...k", [2], "for an input of rank 2"),
        ("i.j", [2], "not letters"),
        ("i......", [2], "not letters"),
        ("ij->k", [2], "output labels"),
    ],
)
def test_parse_errors(equation, ranks, message):
    with pytest.raises(ValueError, match=message):
        parse(equation, ranks)


def test_label_sizes_broadcast_only_from_one():
    assert label_sizes([["i", "j"], ["j"]], [(2, 1), (5,)]) == {"i": 2, "j": 5}
    with pytest.raises(ValueError, match="label j has sizes 3 and 5"):
        label_sizes([["i", "j"], ["j"]], [(2, 3), (5,)])
