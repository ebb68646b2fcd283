"""Inputs files read defensively: every damaged .npz is an InputError naming the file and the
array, found from the headers before any data are allocated."""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.fuzz.mutate_npz import archive, header_text, npy
from tvmc.driver.npz import read_npz
from tvmc.driver.runner import make_inputs
from tvmc.errors import InputError
from tvmc.graph import TensorType

EXPECTED = {"x": TensorType((2, 3), "float32")}
X = np.arange(6, dtype=np.float32).reshape(2, 3)


def member(descr: str = "<f4", shape: object = (2, 3), data: bytes | None = None) -> bytes:
    return npy(header_text(descr, False, shape), X.tobytes() if data is None else data)


def write(tmp_path: Path, blob: bytes) -> str:
    path = tmp_path / "in.npz"
    path.write_bytes(blob)
    return str(path)


def bad_crc() -> bytes:
    blob = bytearray(archive([("x.npy", member())]))
    local = blob.find(b"PK\x03\x04")
    struct.pack_into("<I", blob, local + 14, zlib.crc32(b"wrong"))
    central = blob.find(b"PK\x01\x02")
    struct.pack_into("<I", blob, central + 16, zlib.crc32(b"wrong"))
    return bytes(blob)


CASES = {
    "member without .npy": (archive([("x", member())]), r"holds 'x', which is not an array"),
    "bad CRC": (bad_crc(), r"Bad CRC-32"),
    "pickle": (archive([("x.npy", member("|O"))]), r"holds Python objects \(a pickle\)"),
    "wrong dtype": (archive([("x.npy", npy(header_text("<f8", False, (2, 3)), bytes(48)))]),
                    r"input 'x' is float64, the model expects float32\[2,3\]; convert it"),
    "wrong shape": (archive([("x.npy", member(shape=(3, 2)))]),
                    r"input 'x' has shape \[3, 2\], the model expects float32\[2,3\] \(inputs"),
    "big-endian": (archive([("x.npy", member(">f4"))]), r"dtype '>f4'; tvmc reads native"),
    "strings": (archive([("x.npy", member("<U4"))]), r"dtype '<U4'"),
    "header garbage": (archive([("x.npy", npy("{", b""))]), r"not a valid .npy header"),
    "deep header": (archive([("x.npy", npy("[" * 5000 + "]" * 5000, b""))]),
                    r"not a valid .npy header"),
    "truncated data": (archive([("x.npy", member(data=X.tobytes()[:10]))]),
                       r"describes 24 B of data, the member holds 10 B"),
    "trailing data": (archive([("x.npy", member(data=X.tobytes() + b"junk"))]),
                      r"has bytes after its data"),
    "twice": (archive([("x.npy", member()), ("x.npy", member())]), r"holds 'x.npy' twice"),
    "negative dim": (archive([("x.npy", member(shape=(-1, 3)))]), r"a negative dimension"),
    "not a zip": (b"PK\x03\x04 but not really", r"not an .npz archive"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_inputs_are_input_errors(case: str, tmp_path: Path) -> None:
    blob, pattern = CASES[case]
    with pytest.raises(InputError, match=pattern):
        make_inputs(EXPECTED, write(tmp_path, blob))


def test_a_4_tib_header_is_bounded_by_the_member(tmp_path: Path) -> None:
    path = write(tmp_path, archive([("x.npy", member(shape=(2**40,)))]))
    with pytest.raises(InputError, match=r"'x'.*describes 4 TiB of data, the member holds 24 B"):
        read_npz(path)  # no model to compare with: the member's size bounds it


def test_a_valid_file_reads(tmp_path: Path) -> None:
    path = tmp_path / "ok.npz"
    np.savez(path, x=X)
    arrays = make_inputs(EXPECTED, str(path))
    np.testing.assert_array_equal(arrays["x"], X)
    assert arrays["x"].flags.writeable


def test_fortran_order_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "f.npz"
    np.savez(path, x=np.asfortranarray(X))
    np.testing.assert_array_equal(read_npz(str(path), EXPECTED)["x"], X)


def test_compressed_files_read(tmp_path: Path) -> None:
    path = tmp_path / "c.npz"
    np.savez_compressed(path, x=X, extra=np.zeros((0,), np.int64))
    arrays = read_npz(str(path))
    assert set(arrays) == {"x", "extra"} and arrays["extra"].shape == (0,)


def test_a_deflate_bomb_is_read_only_as_far_as_its_header_allows(tmp_path: Path) -> None:
    big = npy(header_text("<f4", False, (1 << 22,)), bytes(1 << 24))
    path = write(tmp_path, archive([("x.npy", big)], zipfile.ZIP_DEFLATED))
    with pytest.raises(InputError, match=r"has shape \[4194304\], the model expects"):
        make_inputs(EXPECTED, path)


@pytest.mark.parametrize("dtype", ["bfloat16", "int4", "float8_e4m3fn"])
def test_narrow_arrays_saved_as_raw_bytes_read_as_the_model_type(tmp_path: Path, dtype) -> None:
    path = tmp_path / "n.npz"
    x = np.arange(6).reshape(2, 3).astype(dtype)
    np.savez(path, x=x)  # numpy writes them as '<V2' / '<V1'
    arrays = make_inputs({"x": TensorType((2, 3), dtype)}, str(path))
    assert arrays["x"].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(arrays["x"].astype(np.float32), x.astype(np.float32))
    with pytest.raises(InputError, match=r"dtype '\|V2'|dtype '<V2'|dtype '\|V1'|dtype '<V1'"):
        make_inputs(EXPECTED, str(path))
