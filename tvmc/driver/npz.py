"""Reading an inputs file (`tvmc run --inputs x.npz`) defensively.

An .npz is a zip of .npy members. Each member's header is read and checked before anything is
allocated: a plain dtype (no pickled objects), a size that the member's own bytes and this
machine's memory can hold, and, when the model's inputs are known, the dtype and shape the model
expects. Data are read to the member's end, so zip's CRC check runs; every failure is an
InputError naming the file and the member.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from collections.abc import Mapping

import numpy as np
from numpy.lib import format as npy

from tvmc.dtypes import is_narrow, numpy_dtype
from tvmc.errors import InputError
from tvmc.graph import DTYPES, TensorType
from tvmc.memory import human_bytes, memory_limit

MAX_MEMBERS = 4096  # an inputs file names model inputs: a few, not thousands
HEADER_LIMIT = 10_000  # bytes of an .npy header (numpy's own default limit)
# What reading a damaged archive or member raises, besides numpy's ValueError.
_READ_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
                ValueError, NotImplementedError, RuntimeError, UnicodeDecodeError)  # fmt: skip


def read_npz(path: str, expected: Mapping[str, TensorType] | None = None) -> dict[str, np.ndarray]:
    """The arrays of the .npz at `path`, each checked against `expected` (by name) if given."""
    if not os.path.isfile(path):
        raise InputError(f"inputs file {path!r} does not exist")
    if not zipfile.is_zipfile(path):
        raise InputError(
            f"cannot read inputs file {path!r}: not an .npz archive; write one with "
            "numpy.savez(path, input_name=array, ...)"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_MEMBERS:
                raise InputError(f"inputs file {path!r} has {len(members)} members; at most "
                                 f"{MAX_MEMBERS}")  # fmt: skip
            arrays: dict[str, np.ndarray] = {}
            for info in members:
                name = _input_name(path, info)
                if name in arrays:
                    raise InputError(f"inputs file {path!r} holds {info.filename!r} twice")
                arrays[name] = _read_member(path, archive, info, (expected or {}).get(name))
            return arrays
    except InputError:
        raise
    except _READ_ERRORS as exc:
        raise InputError(f"cannot read inputs file {path!r} (an .npz of arrays): {exc}") from None


def _input_name(path: str, info: zipfile.ZipInfo) -> str:
    if info.is_dir() or not info.filename.endswith(".npy"):
        raise InputError(
            f"inputs file {path!r} holds {info.filename!r}, which is not an array (.npy member); "
            "write the file with numpy.savez"
        )
    return info.filename[: -len(".npy")]


def _read_member(
    path: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo, typ: TensorType | None
) -> np.ndarray:
    """One member's array, its header checked before its data are allocated."""
    where = f"inputs file {path!r}, array {info.filename[:-4]!r}"
    with archive.open(info) as f:
        try:
            version = npy.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = npy.read_array_header_1_0(f, HEADER_LIMIT)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = npy.read_array_header_2_0(f, HEADER_LIMIT)
            else:
                raise ValueError(f"unknown .npy format version {version}")
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError):
            raise  # the archive, not the header
        except Exception as exc:  # numpy parses the header as a Python literal: anything goes
            raise InputError(f"{where}: not a valid .npy header: {exc}") from None
        if dtype.hasobject:
            raise InputError(f"{where} holds Python objects (a pickle); tvmc reads only plain "
                             "numeric arrays")  # fmt: skip
        if _raw_narrow(dtype, typ):  # numpy saves bfloat16, float8, int4... as raw bytes (V2, V1)
            dtype = numpy_dtype(typ.dtype)  # type: ignore[union-attr]
        if dtype.name not in DTYPES or dtype.byteorder == ">":
            raise InputError(f"{where} has dtype {dtype.str!r}; tvmc reads native-order arrays "
                             f"of {', '.join(DTYPES)}")  # fmt: skip
        if any(d < 0 for d in shape):
            raise InputError(f"{where}: its header gives a negative dimension: {list(shape)}")
        name, file = info.filename[: -len(".npy")], f" (inputs file {path!r})"
        if typ is not None and dtype.name != typ.dtype:  # as runner reports arrays given in code
            raise InputError(f"input {name!r} is {dtype.name}, the model expects {typ}; convert "
                             f"it with .astype({typ.dtype!r}){file}")  # fmt: skip
        if typ is not None and tuple(shape) != typ.shape:
            raise InputError(f"input {name!r} has shape {list(shape)}, the model expects {typ}"
                             + file)  # fmt: skip
        count = math.prod(shape)
        size = count * dtype.itemsize
        left = info.file_size - f.tell()
        if size > left:
            raise InputError(f"{where}: its header describes {human_bytes(size)} of data, the "
                             f"member holds {human_bytes(max(left, 0))}")  # fmt: skip
        if size > memory_limit():
            raise InputError(f"{where} needs {human_bytes(size)}, more than this machine's "
                             "memory")  # fmt: skip
        data = np.empty(size, np.uint8)
        view = memoryview(data)
        done = 0
        while done < size:
            read = f.readinto(view[done:])
            if not read:
                raise InputError(f"{where} is truncated: {done} of {size} bytes of data")
            done += read
        if f.read(1):  # reading to the end is also what makes zipfile check the CRC
            raise InputError(f"{where} has bytes after its data; it is not a valid .npy")
    return data.view(dtype).reshape(shape, order="F" if fortran else "C")


def _raw_narrow(dtype: np.dtype, typ: TensorType | None) -> bool:
    """A plain void dtype standing for the narrow type the model expects (same item size)."""
    return (
        typ is not None
        and is_narrow(typ.dtype)
        and dtype.kind == "V"
        and dtype.names is None
        and dtype.itemsize == numpy_dtype(typ.dtype).itemsize
    )
