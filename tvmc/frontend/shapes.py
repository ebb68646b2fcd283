"""Parsing of `--input-shapes` (TVMC's grammar) and `--input-dtypes`."""

from __future__ import annotations

import re

from tvmc.errors import UsageError, did_you_mean
from tvmc.graph import DTYPES

# name:[d1,d2,...]; a name may hold ':', '.', '/' (e.g. "input:0", "gpu_0/data_0").
_SHAPE_ITEM = re.compile(r"\s*([^\s,\[\]]+?)\s*:\s*\[([^\[\]]*)\]\s*,?")
_DTYPE_ITEM = re.compile(r"\s*([^\s,\[\]]+?)\s*:\s*([A-Za-z0-9_]+)\s*,?")


def parse_input_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """`"data:[1,3,224,224] mask:[1,128]"` (spaces or commas between items) -> {name: shape}."""
    shapes: dict[str, tuple[int, ...]] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _SHAPE_ITEM.match(text, pos)
        if not match:
            raise UsageError(
                f"malformed --input-shapes near {text[pos : pos + 30]!r}: "
                "expected items like 'data:[1,3,224,224]' separated by spaces or commas"
            )
        name, dims_text = match.group(1), match.group(2).strip()
        try:
            dims = tuple(int(d) for d in dims_text.split(",")) if dims_text else ()
        except ValueError:
            raise UsageError(
                f"--input-shapes: dimensions of {name!r} must be integers, got [{dims_text}]"
            ) from None
        if any(d < 0 for d in dims):
            raise UsageError(
                f"--input-shapes: {name!r} has a negative dimension {list(dims)}; "
                "tvmc compiles static shapes, give every dimension"
            )
        if name in shapes:
            raise UsageError(f"--input-shapes names {name!r} twice")
        shapes[name] = dims
        pos = match.end()
    if not shapes:
        raise UsageError("--input-shapes is empty: expected items like 'data:[1,3,224,224]'")
    return shapes


def parse_input_dtypes(text: str) -> dict[str, str]:
    """`"ids:int64 mask:int32"` -> {name: dtype}; dtypes are numpy names."""
    dtypes: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _DTYPE_ITEM.match(text, pos)
        if not match:
            raise UsageError(
                f"malformed --input-dtypes near {text[pos : pos + 30]!r}: "
                "expected items like 'input_ids:int64' separated by spaces or commas"
            )
        name, dtype = match.group(1), match.group(2)
        if dtype not in DTYPES:
            raise UsageError(
                f"--input-dtypes: unknown dtype {dtype!r} for {name!r}; "
                f"valid: {', '.join(DTYPES)}.{did_you_mean(dtype, DTYPES)}"
            )
        dtypes[name] = dtype
        pos = match.end()
    if not dtypes:
        raise UsageError("--input-dtypes is empty: expected items like 'input_ids:int64'")
    return dtypes
