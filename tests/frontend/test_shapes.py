"""--input-shapes and --input-dtypes grammar."""

from __future__ import annotations

import pytest

from tvmc.errors import UsageError
from tvmc.frontend import parse_input_dtypes, parse_input_shapes


@pytest.mark.parametrize(
    "text, expected",
    [
        ("data:[1,3,224,224]", {"data": (1, 3, 224, 224)}),
        ("a:[1,2] b:[3]", {"a": (1, 2), "b": (3,)}),
        ("a:[1, 2], b:[3]", {"a": (1, 2), "b": (3,)}),
        ("a:[1,2],b:[3]", {"a": (1, 2), "b": (3,)}),
        ("input:0:[1,10]", {"input:0": (1, 10)}),
        ("gpu_0/data_0:[1,3,224,224]", {"gpu_0/data_0": (1, 3, 224, 224)}),
        ("bert.input_ids:[1,128] mask:[1,128]", {"bert.input_ids": (1, 128), "mask": (1, 128)}),
        ("scalar:[]", {"scalar": ()}),
        ("  x : [ 2 , 2 ]  ", {"x": (2, 2)}),
    ],
)
def test_parse_input_shapes(text, expected):
    assert parse_input_shapes(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("data", "malformed"),
        ("data:1,2", "malformed"),
        ("data:[1,x]", "must be integers"),
        ("data:[1,-1]", "negative"),
        ("a:[1] a:[2]", "twice"),
        ("", "empty"),
        ("a:[1] junk", "malformed"),
    ],
)
def test_parse_input_shapes_errors(text, message):
    with pytest.raises(UsageError, match=message):
        parse_input_shapes(text)


def test_parse_input_dtypes():
    assert parse_input_dtypes("ids:int64, mask:int32") == {"ids": "int64", "mask": "int32"}
    with pytest.raises(UsageError, match="Did you mean 'float32'"):
        parse_input_dtypes("x:float23")
