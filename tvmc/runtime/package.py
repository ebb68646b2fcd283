"""The package format (`tvmc compile -o model.tar`): write it, read it safely, load its code.

A plain tar of `metadata.json`, `mod.json` (the entry function's plan and kernel signatures),
`mod.params` (numpy .npz, no pickles), and the code: for the CPU `mod.o` (always) and `mod.so`
(when a C compiler linked it); for CUDA `mod.ptx` (every kernel; `mod.json` adds the launches).
Reading never extracts: members are read into memory (params straight into 64-byte aligned
arrays), and only `mod.so` is written, to a private temporary directory, for dlopen. The format
is documented in docs/package-format.md.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

import llvmlite.binding as llvm
import numpy as np

from tvmc.codegen import KernelSignature, LoadedModule, link_shared, load_library, load_object
from tvmc.codegen.cuda_program import Launch
from tvmc.codegen.target import CUDA_ARCHS, CUDATarget, host_triple, init_llvm
from tvmc.dtypes import as_dtype
from tvmc.errors import PackageError, UsageError
from tvmc.runtime.cuda import CUDAExecutor
from tvmc.runtime.cuda_driver import device as cuda_device
from tvmc.runtime.executor import ProgramInfo, aligned_empty

logger = logging.getLogger("tvmc")

PACKAGE_FORMAT = "tvmc.package"
PACKAGE_FORMAT_VERSION = 1
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
# metadata.json keys a reader relies on, with their JSON types.
METADATA_KEYS: dict[str, type] = {
    "format": str,
    "format_version": int,
    "tvmc_version": str,
    "target": str,
    "triple": str,
    "cpu": str,
    "features": str,
    "inputs": list,
    "outputs": list,
    "configs": dict,
    "workspace_bytes": int,
    "naive_bytes": int,
}
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

    def members(self) -> dict[str, bytes]:
        """The tar members by name, in the order they are written."""
        params = io.BytesIO()
        np.savez(params, **self.params)
        program = {**self.program.to_json(), "kernels": [k.to_json() for k in self.kernels]}
        if self.ptx is not None:
            program["launches"] = [launch.to_json() for launch in self.launches]
        members = {
            METADATA: json.dumps(self.metadata, indent=1).encode(),
            PROGRAM: json.dumps(program).encode(),
            PARAMS: params.getvalue(),
        }
        if self.ptx is not None:
            members[PTX] = self.ptx.encode()
        else:
            members[OBJECT] = self.object_code
        if self.shared_library is not None:
            members[LIBRARY] = self.shared_library
        return members


def link_shared_library(object_code: bytes, uses_threads: bool) -> bytes | None:
    """`mod.so` linked by the system C compiler, or None when there is none (or it fails)."""
    with tempfile.TemporaryDirectory(prefix="tvmc-link-") as tmp:
        path = os.path.join(tmp, LIBRARY)
        try:
            link_shared(object_code, path, uses_threads)
        except RuntimeError as exc:
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
    """Read and validate a package (it is not loaded, and may be for another machine)."""
    if not os.path.exists(path):
        raise PackageError(f"package {path!r} does not exist")
    if not os.path.isfile(path):
        raise PackageError(f"package {path!r} is not a file")
    try:
        with tarfile.open(path, "r:*") as tar:
            found = _scan(path, tar)

            def data(name: str) -> bytes:
                handle = tar.extractfile(found[name])
                return handle.read() if handle else b""

            metadata = _metadata(path, _json(path, data(METADATA), METADATA))
            device = metadata.get("device", "cpu")
            if device not in CODE_MEMBER:
                raise PackageError(f"{path!r}: unknown device {device!r} in metadata.json")
            if CODE_MEMBER[device] not in found:
                lacking = CODE_MEMBER[device]
                raise PackageError(f"{path!r} is not a tvmc package: it lacks {lacking}")
            mod = _json(path, data(PROGRAM), PROGRAM)
            try:
                program = ProgramInfo.from_json(mod)
                kernels = tuple(KernelSignature.from_json(k) for k in mod["kernels"])
                launches = tuple(Launch.from_json(x) for x in mod.get("launches", ()))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise PackageError(
                    f"{path!r}: corrupt mod.json: {type(exc).__name__} {exc}"
                ) from None
            params = read_params(path, tar.extractfile(found[PARAMS]))
            library = data(LIBRARY) if LIBRARY in found else None
            code = data(OBJECT) if device == "cpu" else b""
            ptx = data(PTX).decode(errors="replace") if device == "cuda" else None
            contents = PackageContents(
                metadata, program, kernels, params, code, library, ptx, launches
            )
    except (tarfile.TarError, OSError, EOFError) as exc:
        reason = str(exc).splitlines()[-1].lstrip("- ") if str(exc) else type(exc).__name__
        raise PackageError(
            f"{path!r} is not a readable package (corrupt or truncated?): {reason}"
        ) from None
    _check_consistent(path, contents)
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
    """metadata.json, checked: our format, our version, the keys readers rely on."""
    if not isinstance(metadata, dict) or metadata.get("format") != PACKAGE_FORMAT:
        found = metadata.get("format") if isinstance(metadata, dict) else None
        raise PackageError(f"{path!r} is not a tvmc package (metadata format {found!r})")
    version = metadata.get("format_version")
    if version != PACKAGE_FORMAT_VERSION:
        raise PackageError(
            f"{path!r} has package format version {version!r}; this tvmc reads "
            f"{PACKAGE_FORMAT_VERSION}: compile the model again with this tvmc"
        )
    for key, kind in METADATA_KEYS.items():
        if not isinstance(metadata.get(key), kind):
            raise PackageError(f"{path!r}: corrupt metadata.json: {key!r} missing or malformed")
    return metadata


def read_params(path: str, handle: IO[bytes] | None) -> dict[str, np.ndarray]:
    """The .npz arrays, each read straight into a 64-byte aligned array; pickles are refused."""
    params: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(handle or io.BytesIO()) as archive:
            for info in archive.infolist():
                with archive.open(info) as f:
                    params[info.filename.removesuffix(".npy")] = _read_npy(f)
    except (zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as exc:
        raise PackageError(f"{path!r}: corrupt mod.params: {exc}") from None
    return params


def _read_npy(f: IO[bytes]) -> np.ndarray:
    """One .npy stream into a fresh aligned array: a single copy of the data, read in chunks."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    if dtype.hasobject:
        raise ValueError("object arrays (pickles) are not allowed")
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


def _json(path: str, data: bytes, name: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        raise PackageError(f"{path!r}: corrupt {name}: {exc}") from None


def _check_consistent(path: str, contents: PackageContents) -> None:
    """The members agree: metadata names the program's buffers, every param is there."""
    program, metadata = contents.program, contents.metadata
    for kind, names in (("inputs", program.inputs), ("outputs", program.outputs)):
        entries = metadata[kind]
        if [e.get("buffer") if isinstance(e, dict) else None for e in entries] != names:
            raise PackageError(f"{path!r}: metadata.json {kind} do not match mod.json")
    if contents.device == "cuda":
        _check_launches(path, contents)
    elif program.entry not in {k.name for k in contents.kernels}:
        raise PackageError(f"{path!r}: mod.json lacks the entry function {program.entry!r}")
    for name in program.params:
        buf, value = program.buffers.get(name), contents.params.get(name)
        if buf is None or value is None:
            raise PackageError(f"{path!r}: mod.params lacks param {name!r}")
        # .npz holds bfloat16, float8, int4... as raw bytes (void): the buffer says what they are
        value = contents.params[name] = as_dtype(value, buf.dtype)
        if value.dtype != np.dtype(buf.dtype) or value.size != int(np.prod(buf.shape)):
            raise PackageError(
                f"{path!r}: param {name!r} is {value.dtype}{list(value.shape)}, "
                f"mod.json expects {buf.dtype}{list(buf.shape)}"
            )


def _check_launches(path: str, contents: PackageContents) -> None:
    """A CUDA package's launches name its kernels, with one known buffer per kernel param."""
    kernels = {k.name: k for k in contents.kernels}
    if not contents.launches and contents.program.calls:
        raise PackageError(f"{path!r}: mod.json of a CUDA package lacks its launches")
    for launch in contents.launches:
        kernel = kernels.get(launch.kernel)
        if kernel is None:
            raise PackageError(f"{path!r}: mod.json launches unknown kernel {launch.kernel!r}")
        unknown = [a for a in launch.args if a not in contents.program.buffers]
        if len(launch.args) != len(kernel.params) or unknown:
            raise PackageError(f"{path!r}: mod.json launch of {launch.kernel!r} does not match "
                               "its kernel's params")  # fmt: skip


def host_cpu_features() -> dict[str, bool]:
    """This machine's CPU features as LLVM names them (`avx2`: True, ...)."""
    init_llvm()
    return dict(llvm.get_host_cpu_features())


def _arch_os(triple: str) -> tuple[str, str]:
    """(architecture, OS) of a triple; the OS is '' when the triple names none we know."""
    parts = triple.lower().split("-")
    arch = parts[0].replace("amd64", "x86_64").replace("arm64", "aarch64")
    os_name = next((v for p in parts[1:] for k, v in _OS_NAMES.items() if p.startswith(k)), "")
    return arch, os_name


def check_host(path: str, metadata: Mapping[str, Any]) -> None:
    """PackageError unless this machine can run the package's code (triple, CPU features)."""
    here = host_triple()
    triple, cpu = metadata["triple"], metadata["cpu"]
    (arch, os_name), (host_arch, host_os) = _arch_os(triple), _arch_os(here)
    if arch != host_arch or (os_name and host_os and os_name != host_os):
        raise PackageError(
            f"{path!r} was compiled for {triple} (cpu {cpu}); this machine is {here}: compile "
            f"it for this machine with --target llvm (or --target-llvm-mtriple={here})"
        )
    host = host_cpu_features()
    wanted = [f[1:] for f in metadata["features"].split(",") if f.startswith("+")]
    missing = [f for f in wanted if not host.get(f, False)]
    host_cpu = llvm.get_host_cpu_name()
    if missing:
        raise PackageError(
            f"{path!r} needs CPU features this machine ({host_cpu}) lacks: "
            f"{', '.join('+' + f for f in missing)}; compile it here with --target llvm, or for "
            f'the oldest machine you deploy to with --target "llvm -mcpu=<cpu>" '
            f"(or --target-llvm-mattr={','.join('-' + f for f in missing)})"
        )
    if not wanted and cpu not in ("generic", host_cpu):
        logger.warning(
            "%s was compiled for -mcpu=%s, this machine is %s: its features cannot be checked; "
            "if it stops with an illegal instruction, compile it here",
            path,
            cpu,
            host_cpu,
        )


def load_module(
    path: str, contents: PackageContents, use_shared_library: bool = True
) -> LoadedModule:
    """The package's code in this process: mod.so with ctypes, else mod.o without a linker."""
    if contents.device != "cpu":
        raise PackageError(
            f"{path!r} was compiled for {contents.metadata['target']}: run it with --device "
            f"{contents.device} (device={contents.device!r}), or compile it for this CPU with "
            "--target llvm"
        )
    check_host(path, contents.metadata)
    if use_shared_library and contents.shared_library is not None:
        try:
            return _load_shared(contents.shared_library, contents.kernels)
        except (OSError, AttributeError) as exc:
            logger.warning("%s: mod.so does not load here (%s); loading mod.o instead", path, exc)
    try:
        return load_object(contents.object_code, contents.kernels)
    except RuntimeError as exc:
        raise PackageError(f"{path!r}: mod.o does not load: {exc}") from None


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
