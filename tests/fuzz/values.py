"""Hypothesis strategies for the values attackers reach for: boundary integers, non-finite
floats, hostile names and strings, and byte-level damage."""

from __future__ import annotations

from hypothesis import strategies as st
from onnx import TensorProto

BOUNDARY_INTS = [0, 1, -1, 2, 3, 7, 255, 256, 65535, 2**31 - 1, 2**31, -(2**31), 2**32,
                 2**37, 2**40, 2**53, 2**62, 2**63 - 1, -(2**63)]  # fmt: skip
INT64 = st.integers(-(2**63), 2**63 - 1)
ints = st.one_of(st.sampled_from(BOUNDARY_INTS), st.integers(-16, 64), INT64)
int_lists = st.lists(ints, max_size=9)
floats = st.one_of(
    st.sampled_from(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            1e-45,
            1e38,
            3.5e38,
            1e308,
            float("inf"),
            float("-inf"),
            float("nan"),
        ]
    ),  # fmt: skip
    st.floats(allow_nan=True, allow_infinity=True),
)
ELEM_TYPES = sorted(TensorProto.DataType.values())
elem_types = st.one_of(st.sampled_from(ELEM_TYPES), st.sampled_from([0, 999, 2**20, 40]))

# Placeholders the model mutator swaps for invalid UTF-8 after serializing (protobuf refuses to
# hold it in a str field, but a file can carry it); the same length keeps the lengths valid.
BAD_UTF8_TOKEN = "FZBADUTF8"
BAD_UTF8_BYTES = b"\xff\xfe\xc3\x28\x80\xed\xa0\x80Z"
HOSTILE_NAMES = [
    "",
    " ",
    "[/bold]",
    "[red]x[/red]",
    "\x1b[31mred\x1b[0m",
    "a\nb",
    "a\rb",
    "tab\there",
    "nul\x00byte",
    "\u202egnp.exe",
    "\u2028",
    "名前",
    "ø" * 3,
    "../../etc/passwd",
    "/abs/path",
    "%s%n%x",
    "{0}{1}",
    "a" * 5000,
    "x" * 300,
    BAD_UTF8_TOKEN,
    "con",
    "-",
    "--help",
]
names = st.one_of(st.sampled_from(HOSTILE_NAMES), st.text(max_size=12))

# Strings for command-line values.
HOSTILE_STRINGS = HOSTILE_NAMES + [
    "nan", "inf", "-inf", "1e999", "-0", "0x10", "99999999999999999999999", "-5", "1.5",
    "x:[1,3,8,8]", "x:[]", "x:[-1]", "x:[99999999999]", "x:[1,3,8,8] x:[1]", "x:float16",
    "x:[1,3,8,8", ":", "llvm -mcpu=", "llvm -mattr=+nope", "cuda -arch=sm_0", "c", "llvm -x",
]  # fmt: skip
strings = st.one_of(st.sampled_from(HOSTILE_STRINGS), st.text(max_size=20))


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    """`data` with bytes flipped, cut, repeated or inserted; and what was done."""
    kind = draw(st.sampled_from(["flip", "truncate", "insert", "repeat", "zero"]))
    if not data:
        return b"\x00", "empty -> one NUL"
    at = draw(st.integers(0, len(data) - 1))
    if kind == "flip":
        count = draw(st.integers(1, 8))
        out = bytearray(data)
        for i in range(count):
            j = (at + i * draw(st.integers(1, 97))) % len(out)
            out[j] ^= draw(st.integers(1, 255))
        return bytes(out), f"flip {count} byte(s) from {at}"
    if kind == "truncate":
        return data[:at], f"truncate to {at} bytes"
    if kind == "insert":
        extra = draw(st.binary(min_size=1, max_size=16))
        return data[:at] + extra + data[at:], f"insert {len(extra)} bytes at {at}"
    if kind == "repeat":
        return data + data[at:], f"repeat the tail from {at}"
    end = min(len(data), at + draw(st.integers(1, 64)))
    return data[:at] + bytes(end - at) + data[end:], f"zero bytes {at}..{end}"
