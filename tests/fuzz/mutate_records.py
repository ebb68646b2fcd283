"""The records mutator: tuning records measured on the seed model, with lines changed as JSON
(values swapped for boundary numbers, wrong types, deep nesting, missing keys) or as text (cut,
damaged, huge, not UTF-8); then `tvmc records show|best` or `tvmc compile --tuning-records`."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.fuzz import values
from tests.fuzz.harness import Case
from tests.fuzz.seeds import Resources

# JSON text json.dumps cannot write: numbers out of float range, non-standard literals.
RAW_NUMBERS = ["1e999", "-1e999", "1e400", "NaN", "Infinity", "-Infinity", "1" * 5000,
               "-0", "0.0", "1e-400", "9" * 400, "123456789012345678901234567890"]  # fmt: skip
MARKER = "__FUZZ_RAW__"


def json_values(depth: int = 2) -> st.SearchStrategy[Any]:
    """Any JSON value, with the boundary ints and floats and hostile strings."""
    scalars = st.one_of(st.none(), st.booleans(), values.ints, values.floats, values.strings,
                        st.sampled_from(RAW_NUMBERS).map(lambda n: MARKER + n))  # fmt: skip
    if depth == 0:
        return scalars
    inner = json_values(depth - 1)
    return st.one_of(scalars, st.lists(inner, max_size=4),
                     st.dictionaries(values.strings, inner, max_size=3))  # fmt: skip


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indices) into a JSON document."""
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += _paths(value, (*prefix, i))
    return found


def _replace(doc: Any, path: tuple, value: Any, delete: bool) -> Any:
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


def encode(doc: Any) -> str:
    """JSON text, with marked strings written as the raw numbers they stand for."""
    text = json.dumps(doc, separators=(",", ":"), allow_nan=True)
    for raw in RAW_NUMBERS:
        text = text.replace(json.dumps(MARKER + raw), raw)
    return text


@st.composite
def mutated_line(draw: st.DrawFn, line: str) -> tuple[bytes, str]:
    """One valid records line changed as JSON or as text."""
    how = draw(st.sampled_from(["value", "value", "value", "delete", "nest", "text", "long",
                                "utf8", "number"]))  # fmt: skip
    if how in ("value", "delete", "number"):
        doc = json.loads(line)
        path = draw(st.sampled_from(_paths(doc)[1:]))
        if how == "number":
            value: Any = MARKER + draw(st.sampled_from(RAW_NUMBERS))
        else:
            value = draw(json_values())
        doc = _replace(doc, path, value, how == "delete")
        return encode(doc).encode(), f"{how} at {list(path)}: {str(value)[:40]}"
    if how == "nest":
        depth = draw(st.sampled_from([50, 1000, 5000, 100_000]))
        return ("[" * depth + "]" * depth).encode(), f"nested {depth} deep"
    if how == "long":
        size = draw(st.sampled_from([10_000, 2_000_000]))
        doc = json.loads(line)
        doc["config"]["code_hash"] = "x" * size
        return encode(doc).encode(), f"a {size}-character field"
    if how == "utf8":
        return line.encode()[:40] + b"\xff\xfe\xed\xa0\x80" + line.encode()[40:], "invalid UTF-8"
    data, what = draw(values.damaged(line.encode()))
    return data, f"text: {what}"


@st.composite
def records_cases(draw: st.DrawFn, resources: Resources) -> Case:
    """A records file of the seed's lines, one to three of them changed, and a command on it."""
    lines = [line.encode() for line in resources.record_lines]
    changes = []
    indices = st.integers(0, len(lines) - 1)
    for i in draw(st.lists(indices, min_size=1, max_size=3, unique=True)):  # each line once
        lines[i], what = draw(mutated_line(lines[i].decode("utf-8", errors="replace")))
        changes.append(f"line {i + 1}: {what}")
    command = draw(st.sampled_from(["show", "show", "best", "compile"]))
    if command == "show":
        args = ["records", "show", "log.json"]
    elif command == "best":
        args = ["records", "best", "log.json", "-o", "best.json"]
    else:
        args = ["compile", str(resources.model), "--tuning-records", "log.json", "-o", "out.tar"]
    return Case("records", args, {"log.json": b"\n".join(lines) + b"\n"}, changes)
