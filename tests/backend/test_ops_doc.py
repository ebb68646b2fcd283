"""docs/ops.md's generated op list and family table match the registry."""

from __future__ import annotations

import pathlib

import pytest

from tests.backend import ops_doc

DOC = pathlib.Path(__file__).parents[2] / "docs" / "ops.md"


def test_ops_doc_is_up_to_date():
    text = DOC.read_text()
    assert ops_doc.generate(text) == text, "run python -m tests.backend.ops_doc docs/ops.md"


def test_a_block_without_markers_is_an_error():
    with pytest.raises(ValueError, match="markers of block 'ops'"):
        ops_doc.replace_block("no markers here", "ops", "x")
    assert ops_doc.replace_block("<!-- begin: a -->\nold\n<!-- end: a -->", "a", "new") == (
        "<!-- begin: a -->\nnew\n<!-- end: a -->"
    )
