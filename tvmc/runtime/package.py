"""The package format (`tvmc compile -o model.tar`): write it, read it safely, load its code.

A plain tar of `metadata.json`, `mod.json` (the entry function's plan and kernel signatures),
`mod.params` (numpy .npz, no pickles), and the code: for the CPU `mod.o` (always) and `mod.so`
(when a C compiler linked it); for CUDA `mod.ptx` (every kernel; `mod.json` adds the launches).
Reading never extracts: members are read into memory (params straight into 64-byte aligned
arrays), and only `mod.so` is written, to a private temporary directory, for dlopen. Nothing of
a package runs or is allocated before it is verified (`package_check`): each member's SHA-256
against metadata.json, mod.json's types, consistency and sizes, and once the code is loaded its
layout digest against mod.json's plan. The format is documented in docs/package-format.md.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import shutil
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from tvmc.codegen.abi import KernelSignature, Launch
from tvmc.codegen.cuda_target import CUDA_ARCHS, CUDATarget
from tvmc.codegen.host import host_cpu
from tvmc.codegen.layout import ptx_layout
from tvmc.codegen.loader import LoadedModule, link_shared, load_library, load_object
from tvmc.dtypes import as_dtype, is_narrow, numpy_dtype, register_narrow_types
from tvmc.errors import PackageError, UsageError
from tvmc.memory import machine_memory
from tvmc.runtime.cuda import CUDAExecutor
from tvmc.runtime.cuda_driver import device as cuda_device
from tvmc.runtime.executor import ProgramInfo, aligned_empty
from tvmc.runtime.package_check import (
    check_agreement,
    check_digest,
    check_layout,
    check_metadata_json,
    check_plan,
    check_program_json,
    parse_json,
    sha256_of,
)

logger = logging.getLogger("tvmc")

PACKAGE_FORMAT = "tvmc.package"
PACKAGE_FORMAT_VERSION = 3  # 2: member digests, layout digest; 3: tvmc_parallel_for, no libgomp
METADATA, PROGRAM, PARAMS, OBJECT, LIBRARY, PTX = (
    "metadata.json",
    "mod.json",
    "mod.params",
    "mod.o",
    "mod.so",
    "mod.ptx",
)
REQUIRED_MEMBERS = (METADATA, PROGRAM, PARAMS, OBJECT)  # a CPU package's; CUDA: PTX for OBJECT
CODE_MEMBER = {"cpu": OBJECT, "cuda": PTX}  # by metadata "device"
MAX_JSON_BYTES = 1 << 28  # a mod.json of 256 MiB would be a model of millions of kernels
_CHUNK = 1 << 22  # params are read in pieces of this many bytes, straight into their arrays
_OS_NAMES = {"linux": "linux", "darwin": "darwin", "macos": "darwin", "windows": "windows",
             "freebsd": "freebsd"}  # fmt: skip


@dataclass
class PackageContents:
    """Everything a package holds, in memory."""

    metadata: dict[str, Any]
    program: ProgramInfo
    kernels: tuple[KernelSignature, ...]
    params: dict[str, np.ndarray]
    object_code: bytes
    shared_library: bytes | None = None
    ptx: str | None = None  # a CUDA package's code (then object_code is empty)
    launches: tuple[Launch, ...] = ()  # a CUDA package's launches, in order

    @property
    def device(self) -> str:
        """Where the code runs: "cpu" or "cuda" (metadata "device"; older packages: cpu)."""
        return str(self.metadata.get("device", "cpu"))

    def plan(self) -> dict[str, Any]:
        """mod.json: the program, the kernel signatures and (CUDA) the launches."""
        program = {**self.program.to_json(), "kernels": [k.to_json() for k in self.kernels]}
        if self.ptx is not None:
            program["launches"] = [launch.to_json() for launch in self.launches]
        return program

    def members(self) -> dict[str, bytes]:
        """The tar members by name, in the order they are written; records their SHA-256
        digests in the metadata (`digests`), which comes first."""
        params = io.BytesIO()
        np.savez(params, **self.params)
        members = {PROGRAM: json.dumps(self.plan()).encode(), PARAMS: params.getvalue()}
        if self.ptx is not None:
            members[PTX] = self.ptx.encode()
        else:
            members[OBJECT] = self.object_code
        if self.shared_library is not None:
            members[LIBRARY] = self.shared_library
        self.metadata["digests"] = {name: sha256_of(data) for name, data in members.items()}
        return {METADATA: json.dumps(self.metadata, indent=1).encode(), **members}


def link_shared_library(
    object_code: bytes, cc: str | None = None, options: tuple[str, ...] = ()
) -> bytes | None:
    """`mod.so` linked by `cc` with `options` (a cross compiler; RuntimeError when it fails), else
    by the system C compiler (None when there is none, or it fails: mod.o loads without one)."""
    with tempfile.TemporaryDirectory(prefix="tvmc-link-") as tmp:
        path = os.path.join(tmp, LIBRARY)
        try:
            link_shared(object_code, path, cc, options)
        except RuntimeError as exc:
            if cc is not None:
                raise
            logger.warning("no mod.so in the package (the runtime loads mod.o instead): %s", exc)
            return None
        with open(path, "rb") as f:
            return f.read()


def write_package(path: str, contents: PackageContents) -> str:
    """Write the package tar atomically (a temporary file renamed over `path`); returns `path`."""
    if os.path.isdir(path):
        raise UsageError(f"cannot write the package to {path!r}: it is a directory")
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                   dir=directory)  # fmt: skip
        with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w") as tar:
            for name, data in contents.members().items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = int(time.time())
                info.mode = 0o755 if name == LIBRARY else 0o644
                tar.addfile(info, io.BytesIO(data))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)  # readers see the old file or the whole new one, never half
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            reason = exc.strerror or str(exc)
            raise UsageError(f"cannot write the package to {path!r}: {reason}") from None
        raise
    return path


def read_package(path: str) -> PackageContents:
    """Read and verify a package (it is not loaded, and may be for another machine)."""
    if not os.path.exists(path):
        raise PackageError(f"package {path!r} does not exist")
    if not os.path.isfile(path):
        raise PackageError(f"package {path!r} is not a file")
    try:
        with tarfile.open(path, "r:*") as tar:
            contents = _read_members(path, tar, _scan(path, tar))
    except (tarfile.TarError, OSError, EOFError) as exc:
        reason = str(exc).splitlines()[-1].lstrip("- ") if str(exc) else type(exc).__name__
        raise PackageError(
            f"{path!r} is not a readable package (corrupt or truncated?): {reason}"
        ) from None
    except MemoryError:
        raise PackageError(f"{path!r}: not enough memory to read the package") from None
    _check_params(path, contents)
    return contents


def _read_members(
    path: str, tar: tarfile.TarFile, found: dict[str, tarfile.TarInfo]
) -> PackageContents:
    """The members, each verified before the next is read: metadata, mod.json, params, code."""
    where = repr(path)  # how errors name the package

    def data(name: str, limit: int) -> bytes:
        if found[name].size > limit:
            raise PackageError(f"{where}: {name} is {found[name].size:,} bytes, more than a "
                               f"package's {name} can be ({limit:,})")  # fmt: skip
        handle = tar.extractfile(found[name])
        return handle.read() if handle else b""

    metadata = _metadata(path, parse_json(where, data(METADATA, MAX_JSON_BYTES), METADATA))
    device, digests = metadata.get("device", "cpu"), metadata["digests"]
    if CODE_MEMBER[device] not in found:  # mod.so is optional: mod.o holds the same code
        raise PackageError(f"{path!r} is not a tvmc package: it lacks {CODE_MEMBER[device]}")

    def verified(name: str, limit: int = machine_memory()) -> bytes:
        member = data(name, limit)
        check_digest(where, name, digests, sha256_of(member))
        return member

    mod = parse_json(where, verified(PROGRAM, MAX_JSON_BYTES), PROGRAM)
    check_program_json(where, mod)
    program = ProgramInfo.from_json(mod)
    if any(is_narrow(b.dtype) for b in program.buffers.values()):
        register_narrow_types()  # numpy needs ml_dtypes for them; other packages never load it
    kernels = tuple(KernelSignature.from_json(k) for k in mod["kernels"])
    launches = tuple(Launch.from_json(x) for x in mod.get("launches", ()))
    if device == "cuda" and not launches and program.calls:
        raise PackageError(f"{path!r}: mod.json of a CUDA package lacks its launches")
    check_plan(where, program, kernels, launches if device == "cuda" else None)
    check_agreement(where, metadata, program)

    handle = tar.extractfile(found[PARAMS])
    check_digest(where, PARAMS, digests, sha256_of(handle or io.BytesIO()))
    if handle is not None:
        handle.seek(0)
    wanted = {n: (program.buffers[n].dtype, math.prod(program.buffers[n].shape))
              for n in program.params}  # fmt: skip
    params = read_params(path, handle, wanted)
    library = verified(LIBRARY) if LIBRARY in found else None
    code = verified(OBJECT) if device == "cpu" else b""
    ptx = verified(PTX).decode(errors="replace") if device == "cuda" else None
    contents = PackageContents(metadata, program, kernels, params, code, library, ptx, launches)
    if ptx is not None:  # a CUDA package's code is text: its layout is checked before loading
        check_layout(where, PTX, ptx_layout(ptx), contents.plan())
    return contents


def _scan(path: str, tar: tarfile.TarFile) -> dict[str, tarfile.TarInfo]:
    """The package's regular-file members by name, refusing any that could escape a directory."""
    found: dict[str, tarfile.TarInfo] = {}
    for member in tar:
        name = member.name
        parts = name.replace("\\", "/").split("/")
        if name.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            raise PackageError(f"{path!r} holds a member outside the package: {name!r}")
        if member.issym() or member.islnk():
            raise PackageError(f"{path!r} holds a link {name!r}; refusing it")
        if member.isdir():
            continue
        if not member.isfile():
            raise PackageError(f"{path!r} holds a special file {name!r}; refusing it")
        name = "/".join(p for p in parts if p not in ("", "."))  # ./mod.o is mod.o
        if name in found:
            raise PackageError(f"{path!r} holds {name!r} twice")
        found[name] = member
    # the code member (mod.o or mod.ptx) is checked once metadata.json names the device
    missing = [name for name in (METADATA, PROGRAM, PARAMS) if name not in found]
    if missing:
        raise PackageError(f"{path!r} is not a tvmc package: it lacks {', '.join(missing)}")
    return found


def _metadata(path: str, metadata: Any) -> dict[str, Any]:
    """metadata.json, checked: our format, our version, the keys readers rely on and their
    types (`device` one we know, every input and output named and typed, digests)."""
    if not isinstance(metadata, dict) or metadata.get("format") != PACKAGE_FORMAT:
        found = metadata.get("format") if isinstance(metadata, dict) else None
        raise PackageError(f"{path!r} is not a tvmc package (metadata format {found!r})")
    version = metadata.get("format_version")
    if version != PACKAGE_FORMAT_VERSION:
        raise PackageError(
            f"{path!r} has package format version {version!r}; this tvmc reads "
            f"{PACKAGE_FORMAT_VERSION}: compile the model again with this tvmc"
        )
    check_metadata_json(repr(path), metadata)
    return metadata


def read_params(
    path: str, handle: IO[bytes] | None, wanted: Mapping[str, tuple[str, int]] | None = None
) -> dict[str, np.ndarray]:
    """The .npz arrays, each read straight into a 64-byte aligned array; pickles are refused.

    `wanted`: name -> (dtype, element count) of the arrays to read; others are skipped, and an
    array of another dtype or size is refused before anything is allocated for it.
    """
    params: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(handle or io.BytesIO()) as archive:
            for info in archive.infolist():
                name = info.filename.removesuffix(".npy")
                if wanted is not None and name not in wanted:
                    continue
                limit = min(info.file_size, machine_memory())
                with archive.open(info) as f:
                    params[name] = _read_npy(f, name, limit, (wanted or {}).get(name))
    except (zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as exc:
        raise PackageError(f"{path!r}: corrupt mod.params: {exc}") from None
    return params


def _read_npy(
    f: IO[bytes], name: str, limit: int, wanted: tuple[str, int] | None = None
) -> np.ndarray:
    """One .npy stream into a fresh aligned array: a single copy of the data, read in chunks;
    its header must claim at most `limit` bytes, and be `wanted` (dtype, size) when given."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    if dtype.hasobject:
        raise ValueError("object arrays (pickles) are not allowed")
    count = math.prod(shape)
    # .npz keeps bfloat16, float8, int4... as raw bytes (void) of the same width
    raw_narrow = dtype.kind == "V" and dtype.names is None
    if wanted is not None and raw_narrow and dtype.itemsize == numpy_dtype(wanted[0]).itemsize:
        dtype = numpy_dtype(wanted[0])
    if wanted is not None and (dtype.name, count) != wanted:
        raise ValueError(f"param {name!r} is {dtype.name}{list(shape)}, mod.json expects "
                         f"{wanted[1]} values of {wanted[0]}")  # fmt: skip
    if count * dtype.itemsize > limit:
        raise ValueError(f"param {name!r} claims {count * dtype.itemsize:,} bytes, more than "
                         f"its member holds ({limit:,})")  # fmt: skip
    array = aligned_empty(tuple(reversed(shape)) if fortran_order else shape, dtype)
    target = memoryview(array.reshape(-1).view(np.uint8))
    done = 0
    while done < len(target):
        chunk = f.read(min(_CHUNK, len(target) - done))
        if not chunk:
            raise ValueError(f"array data ends after {done} of {len(target)} bytes")
        target[done : done + len(chunk)] = chunk
        done += len(chunk)
    return array.T if fortran_order else array


def _check_params(path: str, contents: PackageContents) -> None:
    """Every param of the plan is in mod.params, of its buffer's dtype and size."""
    program = contents.program
    for name in program.params:
        buf, value = program.buffers.get(name), contents.params.get(name)
        if buf is None or value is None:
            raise PackageError(f"{path!r}: mod.params lacks param {name!r}")
        # .npz holds bfloat16, float8, int4... as raw bytes (void): the buffer says what they are
        value = contents.params[name] = as_dtype(value, buf.dtype)
        if value.dtype != numpy_dtype(buf.dtype) or value.size != int(np.prod(buf.shape)):
            raise PackageError(
                f"{path!r}: param {name!r} is {value.dtype}{list(value.shape)}, "
                f"mod.json expects {buf.dtype}{list(buf.shape)}"
            )


def _arch_os(triple: str) -> tuple[str, str]:
    """(architecture, OS) of a triple; the OS is '' when the triple names none we know."""
    parts = triple.lower().split("-")
    arch = parts[0].replace("amd64", "x86_64").replace("arm64", "aarch64")
    os_name = next((v for p in parts[1:] for k, v in _OS_NAMES.items() if p.startswith(k)), "")
    return arch, os_name


def check_host(path: str, metadata: Mapping[str, Any]) -> None:
    """PackageError unless this machine can run the package's code (triple, CPU features)."""
    here = host_cpu().triple
    triple, cpu = metadata["triple"], metadata["cpu"]
    (arch, os_name), (host_arch, host_os) = _arch_os(triple), _arch_os(here)
    if arch != host_arch or (os_name and host_os and os_name != host_os):
        raise PackageError(
            f"{path!r} was compiled for {triple} (cpu {cpu}); this machine is {here}: compile "
            f"it for this machine with --target llvm (or --target-llvm-mtriple={here})"
        )
    host = host_cpu()  # from the cache: no LLVM loaded to ask (tvmc.codegen.host)
    wanted = [f[1:] for f in metadata["features"].split(",") if f.startswith("+")]
    missing = [f for f in wanted if not host.has(f)]
    if missing:
        raise PackageError(
            f"{path!r} needs CPU features this machine ({host.name}) lacks: "
            f"{', '.join('+' + f for f in missing)}; compile it here with --target llvm, or for "
            f'the oldest machine you deploy to with --target "llvm -mcpu=<cpu>" '
            f"(or --target-llvm-mattr={','.join('-' + f for f in missing)})"
        )
    if not wanted and cpu not in ("generic", host.name):
        logger.warning(
            "%s was compiled for -mcpu=%s, this machine is %s: its features cannot be checked; "
            "if it stops with an illegal instruction, compile it here",
            path,
            cpu,
            host.name,
        )


def load_module(
    path: str, contents: PackageContents, use_shared_library: bool = True
) -> LoadedModule:
    """The package's code in this process: mod.so with ctypes, else mod.o without a linker;
    refused unless the code's layout digest is that of mod.json's plan (before any call)."""
    if contents.device != "cpu":
        raise PackageError(
            f"{path!r} was compiled for {contents.metadata['target']}: run it with --device "
            f"{contents.device} (device={contents.device!r}), or compile it for this CPU with "
            "--target llvm"
        )
    check_host(path, contents.metadata)
    module = None
    if use_shared_library and contents.shared_library is not None:
        try:
            module, code = _load_shared(contents.shared_library, contents.kernels), LIBRARY
        except (OSError, AttributeError) as exc:
            logger.warning("%s: mod.so does not load here (%s); loading mod.o instead", path, exc)
    if module is None:
        try:
            module, code = load_object(contents.object_code, contents.kernels, probe=True), OBJECT
        except RuntimeError as exc:
            raise PackageError(f"{path!r}: mod.o does not load: {exc}") from None
    check_layout(repr(path), code, module.layout, contents.plan())
    return module


def _load_shared(library: bytes, kernels: tuple[KernelSignature, ...]) -> LoadedModule:
    """dlopen the library from a private directory, removed at once (the mapping stays)."""
    directory = tempfile.mkdtemp(prefix="tvmc-package-")  # mode 0700: no one else can swap it
    try:
        path = os.path.join(directory, LIBRARY)
        with open(path, "wb") as f:
            f.write(library)
        return load_library(path, kernels)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def load_cuda(path: str, contents: PackageContents) -> CUDAExecutor:
    """A CUDA package loaded on this machine's GPU (memory, kernels and graph set up once)."""
    if contents.device != "cuda" or contents.ptx is None:
        raise PackageError(
            f"{path!r} was compiled for the CPU ({contents.metadata['target']}): run it with "
            "--device cpu, or compile it for the GPU with --target cuda"
        )
    gpu = cuda_device()
    arch = contents.metadata.get("arch", "")
    if arch in CUDA_ARCHS and CUDATarget(arch).compute_capability > gpu.capability:
        raise PackageError(
            f"{path!r} was compiled for {arch}; this GPU ({gpu.name}) is {gpu.arch}: compile "
            f'it for this GPU with --target cuda (or --target "cuda -arch={gpu.arch}")'
        )
    return CUDAExecutor(contents.ptx, contents.program, contents.launches, contents.params)
