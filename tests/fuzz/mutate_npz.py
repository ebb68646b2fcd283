"""The npz mutator: inputs files for the seed package with damaged member names, .npy headers
(dtype, shape, order, version, length), data, zip records (CRCs, sizes, compression) and
arrays of the wrong dtype or shape; then `tvmc run seed.tar --inputs in.npz`."""

from __future__ import annotations

import functools
import io
import struct
import warnings
import zipfile
import zlib

import numpy as np
from hypothesis import strategies as st

from tests.fuzz import values
from tests.fuzz.harness import Case
from tests.fuzz.seeds import Resources

DESCRS = ["<f4", "<f8", "<f2", "|b1", "<i8", "<i4", "|u1", ">f4", "|O", "<U4", "|S3", "V12",
          "<c8", "<m8", "<M8[s]", "[('a', '<f4')]", "f4", "float32", "nope", "<f16"]  # fmt: skip
SHAPES = [(1, 3, 8, 8), (), (0,), (1, 3, 8), (8, 8, 3, 1), (192,), (2**40,), (2**31, 2**31),
          (2**62, 2**62, 4), (-1, 3, 8, 8), (1.5,), ("a",), [1, 3, 8, 8], None, 5]  # fmt: skip
NAMES = ["x.npy", "x", "x.npy.npy", "y.npy", "../x.npy", "dir/x.npy", ".npy", "X.npy", "x.NPY",
         "x/", "\u00e9.npy", "a" * 300 + ".npy"]  # fmt: skip


def npy(header: str, data: bytes, version: tuple[int, int] = (1, 0), length: int | None = None,
        magic: bytes = b"\x93NUMPY") -> bytes:  # fmt: skip
    """An .npy file from its parts (any of them may be wrong)."""
    text = header.encode("latin1", errors="replace")
    size_format = "<H" if version[0] == 1 else "<I"
    prefix = len(magic) + 2 + struct.calcsize(size_format)
    text += b" " * ((64 - (prefix + len(text) + 1) % 64) % 64) + b"\n"
    declared = len(text) if length is None else length
    declared &= 0xFFFF if version[0] == 1 else 0xFFFFFFFF
    return magic + bytes(version) + struct.pack(size_format, declared) + text + data


def header_text(descr: object, fortran: object, shape: object) -> str:
    return f"{{'descr': {descr!r}, 'fortran_order': {fortran!r}, 'shape': {shape!r}, }}"


def archive(members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED) -> bytes:
    """A zip of `members` (duplicates allowed)."""
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w", compression) as zf:
        warnings.simplefilter("ignore")  # duplicate names are the point
        for name, data in members:
            zf.writestr(name or ".npy", data)  # zipfile cannot write an empty name
    return buffer.getvalue()


def _patch_central(data: bytes, offset: int, value: int, size: str = "<I") -> bytes:
    """Set a field of every central-directory record (CRC at 16, sizes at 20 and 24)."""
    out = bytearray(data)
    at = out.find(b"PK\x01\x02")
    while at >= 0:
        struct.pack_into(size, out, at + offset, value)
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


@functools.cache
def _bomb() -> bytes:
    """An archive small on disk whose member inflates to 64 MiB, as its header says."""
    big = npy(header_text("<f4", False, (1 << 24,)), bytes(1 << 26))
    return archive([("x.npy", big)], zipfile.ZIP_DEFLATED)


@st.composite
def npz_cases(draw: st.DrawFn, resources: Resources) -> Case:
    """A damaged inputs file for the seed package."""
    shape = resources.input_shape
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    changes: list[str] = []
    descr, fortran, dims = "<f4", False, shape
    data = x.tobytes()
    name = "x.npy"
    version, length, magic = (1, 0), None, b"\x93NUMPY"
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["name", "descr", "shape", "fortran", "header", "version",
                                     "length", "magic", "data", "typed"]))  # fmt: skip
        if what == "name":
            name = draw(st.one_of(st.sampled_from(NAMES), values.names))
        elif what == "descr":
            descr = draw(st.sampled_from(DESCRS))
        elif what == "shape":
            dims = draw(st.one_of(st.sampled_from(SHAPES), st.tuples(values.ints)))
        elif what == "fortran":
            fortran = draw(st.sampled_from([True, "yes", None, 1]))
        elif what == "version":
            version = draw(st.sampled_from([(2, 0), (3, 0), (0, 0), (9, 9), (1, 1)]))
        elif what == "length":
            length = draw(st.sampled_from([0, 1, 10, 2**16 - 1, 2**32 - 1, 2**31]))
        elif what == "magic":
            magic = draw(st.sampled_from([b"\x93NUMPX", b"", b"PK\x03\x04", b"\x93NUMPY\x93"]))
        elif what == "data":
            data, how = draw(values.damaged(data))
            what = f"data: {how}"
        else:  # a well-formed array of another dtype or shape
            others = [x.astype(np.float64), x[0], x.reshape(-1), x.astype(np.int64),
                      np.zeros((), np.float32)]  # fmt: skip
            array = draw(st.sampled_from(others))
            descr, dims, data = array.dtype.str, array.shape, array.tobytes()
        changes.append(what)
    member = npy(header_text(descr, fortran, dims), data, version, length, magic)
    if draw(st.integers(0, 3)) == 0:
        header = draw(st.sampled_from(["{", "{'descr': '<f4'", "[" * 5000 + "]" * 5000,
                                       "__import__('os').system('true')", "{} " * 10,
                                       "{'descr': '<f4', 'fortran_order': False, 'shape': (1," +
                                       "1," * 20000 + ")}"]))  # fmt: skip
        member = npy(header, data, version, length, magic)
        changes.append(f"header {header[:30]!r}")
    members = [(name, member)]
    if draw(st.integers(0, 4)) == 0:
        extra = draw(st.sampled_from(["dup", "other", "many"]))
        members += {"dup": [(name, member)], "other": [("z.npy", member)],
                    "many": [(f"m{i}.npy", b"") for i in range(5000)]}[extra]  # fmt: skip
        changes.append(f"members: {extra}")
    compression = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    blob = archive(members, compression)
    zip_change = draw(st.sampled_from(["none", "none", "crc", "size", "csize", "method",
                                       "damage", "bomb"]))  # fmt: skip
    if zip_change == "crc":
        blob = _patch_central(blob, 16, zlib.crc32(b"wrong"))
        local = blob.find(b"PK\x03\x04")
        blob = blob[: local + 14] + struct.pack("<I", zlib.crc32(b"wrong")) + blob[local + 18 :]
    elif zip_change in ("size", "csize"):
        blob = _patch_central(blob, 24 if zip_change == "size" else 20,
                              draw(st.sampled_from([0, 1, 2**32 - 1, 2**31])))  # fmt: skip
    elif zip_change == "method":
        blob = _patch_central(blob, 10, draw(st.sampled_from([1, 12, 14, 99, 93])), "<H")
    elif zip_change == "damage":
        blob, how = draw(values.damaged(blob))
        zip_change = f"damage: {how}"
    elif zip_change == "bomb":
        blob = _bomb()
    changes.append(f"zip: {zip_change}")
    args = ["run", str(resources.package), "--inputs", "in.npz", "--repeat", "1"]
    return Case("npz", args, {"in.npz": blob}, changes)
