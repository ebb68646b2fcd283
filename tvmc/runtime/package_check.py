"""Checks of a package's members before any of its code runs: digests, types, bounds, agreement.

A package is a file anyone may have edited or damaged. Before a byte of it is allocated for or
called, a reader checks: each member's SHA-256 against metadata.json's `digests` (corruption);
every JSON value's type, with nesting bounded; mod.json's plan against itself (every buffer
inside its storage, every call's buffers the shapes and dtypes of its kernel's params, the entry
a real entry) and against metadata.json; every size against this machine's memory. Each failure
is one PackageError saying what is wrong. What these checks cannot catch (code that is wrong or
hostile by design) is docs/threat-model.md's subject.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from tvmc.codegen.abi import KernelSignature
from tvmc.codegen.layout import layout_digest
from tvmc.codegen.threads import num_threads, physical_cores
from tvmc.dtypes import DTYPES, numpy_dtype
from tvmc.errors import PackageError
from tvmc.memory import machine_memory
from tvmc.plan import STORAGE_KINDS, WORKSPACE_ALIGN

if TYPE_CHECKING:
    from tvmc.codegen.abi import Launch
    from tvmc.runtime.executor import ProgramInfo

MAX_JSON_DEPTH = 64  # mod.json nests 4 deep, metadata.json about 6: deeper is not ours
MAX_RANK = 32  # numpy's limit on dimensions is 64; no model tensor comes close
# a call's model nodes (profiles only): generous bounds on what a reader displays
MAX_SOURCES = 1024  # nodes fused into one kernel
MAX_SOURCE_INPUTS = 64
MAX_SOURCE_TEXT = 1024  # characters of a node name or op type
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_OPEN, _CLOSE = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)
_HEX = re.compile(r"[0-9a-f]{64}")


def sha256_of(data: bytes | IO[bytes], chunk: int = 1 << 22) -> str:
    """The hex SHA-256 of bytes, or of a stream read to its end in chunks."""
    if isinstance(data, bytes | bytearray | memoryview):
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    while block := data.read(chunk):
        digest.update(block)
    return digest.hexdigest()


def json_depth(data: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (strings skipped)."""
    codes = np.frombuffer(_STRINGS.sub(b'""', data), np.uint8)
    steps = np.isin(codes, _OPEN).astype(np.int64) - np.isin(codes, _CLOSE)
    return int(np.cumsum(steps).max(initial=0))


def parse_json(where: str, data: bytes, name: str) -> Any:
    """A JSON member, its nesting bounded before it is parsed (the parser recurses)."""
    depth = json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise PackageError(
            f"{where}: corrupt {name}: JSON nested {depth} deep "
            f"(a package nests at most {MAX_JSON_DEPTH})"
        )
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise PackageError(f"{where}: corrupt {name}: {exc}") from None


def check_digest(where: str, name: str, digests: Mapping[str, str], actual: str) -> None:
    """PackageError unless member `name`'s SHA-256 is the one metadata.json records."""
    if name not in digests:
        raise PackageError(f"{where}: metadata.json records no digest of {name}")
    if digests[name] != actual:
        raise PackageError(
            f"{where}: {name} is corrupt: its SHA-256 is not the one metadata.json "
            "records (a damaged copy? copy or compile the package again)"
        )


# ---- types ---------------------------------------------------------------------------------------
def is_int(value: Any) -> bool:
    """A JSON integer (not a bool, not a float)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_shape(value: Any) -> bool:
    """A list of at most MAX_RANK non-negative integers."""
    return (
        isinstance(value, list)
        and len(value) <= MAX_RANK
        and all(is_int(d) and d >= 0 for d in value)
    )


def is_names(value: Any) -> bool:
    """A list of strings."""
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _require(ok: bool, where: str, member: str, what: str) -> None:
    if not ok:
        raise PackageError(f"{where}: corrupt {member}: {what}")


def _check_fields(where: str, member: str, label: str, item: Any, fields: dict) -> None:
    """`item` is an object whose `fields` (name -> (check, description); a name ending in ?
    is optional) all pass; `label` says where the object is ("" for the member itself)."""
    _require(isinstance(item, dict), where, member, f"{label or 'it'} is not a JSON object")
    prefix = f"{label} " if label else ""
    for key, (check, description) in fields.items():
        optional = key.endswith("?")
        key = key.rstrip("?")
        if optional and key not in item:
            continue
        shown = _shown(item.get(key))
        _require(
            check(item.get(key)), where, member, f"{prefix}{key!r} is {shown}, not {description}"
        )


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return "missing" if value is None else text if len(text) <= 60 else text[:57] + "..."


def _is_dtype(value: Any) -> bool:
    return isinstance(value, str) and value in DTYPES


NAME = (lambda v: isinstance(v, str) and v != "", "a name")
COUNT = (lambda v: is_int(v) and v >= 0, "a non-negative integer")
POSITIVE = (lambda v: is_int(v) and v >= 1, "a whole number of at least 1")
SHAPE = (is_shape, f"a list of at most {MAX_RANK} non-negative integers")
DTYPE = (_is_dtype, f"one of {', '.join(DTYPES)}")
NAMES = (is_names, "a list of names")
TEXT = (lambda v: isinstance(v, str), "a string")
EXTENTS = (
    lambda v: isinstance(v, list) and len(v) == 3 and all(is_int(d) and d >= 1 for d in v),
    "three positive integers",
)
BUFFER = {"name": NAME, "shape": SHAPE, "dtype": DTYPE,
          "storage": (lambda v: v in STORAGE_KINDS, f"one of {', '.join(STORAGE_KINDS)}"),
          "index": COUNT, "offset": COUNT}  # fmt: skip


def _is_source(value: Any) -> bool:
    """{"name", "op", "inputs", "output"}: a model node a call computes, within the bounds."""
    return (
        isinstance(value, dict)
        and {"name", "op", "inputs", "output"} <= set(value)  # more: a newer tvmc's, ignored
        and all(
            isinstance(value[k], str) and len(value[k]) <= MAX_SOURCE_TEXT for k in ("name", "op")
        )  # fmt: skip
        and isinstance(value["inputs"], list)
        and len(value["inputs"]) <= MAX_SOURCE_INPUTS
        and all(map(is_shape, value["inputs"]))
        and is_shape(value["output"])
    )


SOURCES = (
    lambda v: isinstance(v, list) and len(v) <= MAX_SOURCES and all(map(_is_source, v)),
    f"a list of at most {MAX_SOURCES} {{name, op, inputs, output}} objects (names of at most "
    f"{MAX_SOURCE_TEXT} characters, at most {MAX_SOURCE_INPUTS} input shapes)",
)
CALL = {"kernel": NAME, "args": NAMES, "node?": TEXT, "flops?": COUNT, "sources?": SOURCES}
LAUNCH = {"kernel": NAME, "grid": EXTENTS, "block": EXTENTS, "shared": COUNT, "args": NAMES,
          "node?": TEXT, "flops?": COUNT}  # fmt: skip
TENSOR = {"name": NAME, "buffer": NAME, "shape": SHAPE, "dtype": DTYPE}
LIST = (lambda v: isinstance(v, list), "a list")
OBJECT = (lambda v: isinstance(v, dict), "an object")
DIGESTS = (
    lambda v: (
        isinstance(v, dict) and all(isinstance(d, str) and _HEX.fullmatch(d) for d in v.values())
    ),
    "an object of hex SHA-256 digests",
)
# metadata.json's keys a reader relies on (format and version are checked first)
METADATA = {"tvmc_version": TEXT, "target": TEXT, "triple": TEXT, "cpu": TEXT, "features": TEXT,
            "inputs": LIST, "outputs": LIST, "configs": OBJECT, "workspace_bytes": COUNT,
            "naive_bytes": COUNT, "digests": DIGESTS, "arch?": TEXT,
            "device?": (lambda v: v in ("cpu", "cuda"), "cpu or cuda"),
            "uses_threads?": (lambda v: isinstance(v, bool), "true or false"),
            "heap_scratch_bytes?": COUNT, "heap_scratch_threads?": POSITIVE}  # fmt: skip
PLAN = {"entry": NAME, "inputs": NAMES, "outputs": NAMES, "params": NAMES, "buffers": LIST,
        "calls": LIST, "kernels": LIST, "launches?": LIST, "workspace_bytes": COUNT,
        "naive_bytes?": COUNT, "images?": POSITIVE, "slots?": POSITIVE}  # fmt: skip


def _is_param(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 3
        and NAME[0](value[0])
        and is_shape(value[1])
        and _is_dtype(value[2])
    )


KERNEL = {"name": NAME, "params": (lambda v: isinstance(v, list) and all(map(_is_param, v)),
                                   "a list of [name, shape, dtype]")}  # fmt: skip


def check_program_json(where: str, mod: Any) -> None:
    """mod.json holds the right JSON types everywhere (before any of it is used)."""
    member = "mod.json"
    _check_fields(where, member, "", mod, PLAN)
    for key, fields in (("buffers", BUFFER), ("calls", CALL), ("kernels", KERNEL),
                        ("launches", LAUNCH)):  # fmt: skip
        for i, item in enumerate(mod.get(key, ())):
            _check_fields(where, member, f"{key}[{i}]", item, fields)
    names = [b["name"] for b in mod["buffers"]]
    _require(len(set(names)) == len(names), where, member, "buffers repeat a name")


def check_metadata_json(where: str, metadata: Mapping[str, Any]) -> None:
    """metadata.json's keys a reader relies on hold the right types; every input and output
    is an object with a name, buffer, shape and dtype."""
    _check_fields(where, "metadata.json", "", metadata, METADATA)
    for kind in ("inputs", "outputs"):
        for i, entry in enumerate(metadata[kind]):
            _check_fields(where, "metadata.json", f"{kind}[{i}]", entry, TENSOR)
        names = [e["name"] for e in metadata[kind]]
        _require(len(set(names)) == len(names), where, "metadata.json", f"{kind} repeat a name")


# ---- the plan --------------------------------------------------------------------------------
def nbytes(shape: Sequence[int], dtype: str) -> int:
    """Bytes of a dense tensor (exact: no overflow however large the shape)."""
    return math.prod(shape) * numpy_dtype(dtype).itemsize


def footprint(shape: Sequence[int], dtype: str) -> int:
    """Bytes a buffer takes where it is stored: an empty tensor keeps a 1-element placeholder
    (its kernels' param), as the runtime allocates and the memory planner places it."""
    return max(math.prod(shape), 1) * numpy_dtype(dtype).itemsize


def check_plan(
    where: str,
    program: ProgramInfo,
    kernels: Iterable[KernelSignature],
    launches: Sequence[Launch] | None = None,
) -> None:
    """The plan is consistent and fits this machine; `launches`: a CUDA package's (else CPU)."""
    signatures = {}
    for kernel in kernels:
        if kernel.name in signatures:
            raise PackageError(f"{where}: mod.json lists kernel {kernel.name!r} twice")
        signatures[kernel.name] = kernel
    if program.slots > program.images:
        raise PackageError(
            f"{where}: mod.json gives {program.images} images {program.slots} workspace "
            "slots; they are at most one an image"
        )
    _check_storage(where, program)
    _check_memory(where, program)
    if launches is None:
        _check_entry(where, program, signatures)
    for call in program.calls:
        _check_call(where, program, signatures.get(call.kernel), call.kernel, call.args)
    if launches is not None:
        _check_launches(where, program, launches)


def _check_storage(where: str, program: ProgramInfo) -> None:
    """Each input/output/param names its own slot; every buffer lies inside its storage."""
    lists = {"input": program.inputs, "output": program.outputs, "param": program.params}
    seen: set[str] = set()
    for kind, names in lists.items():
        for index, name in enumerate(names):
            buf = program.buffers.get(name)
            if name in seen or buf is None or (buf.storage, buf.index) != (kind, index):
                raise PackageError(
                    f"{where}: mod.json {kind} {index} ({name!r}) is not a "
                    f"buffer of its own {kind} slot"
                )
            seen.add(name)
    for buf in program.buffers.values():
        size = footprint(buf.shape, buf.dtype)
        if buf.storage == "workspace":
            room, what = program.workspace_bytes - buf.offset, "the workspace"
            if buf.offset % WORKSPACE_ALIGN:
                raise PackageError(
                    f"{where}: mod.json buffer {buf.name!r}: workspace offset "
                    f"{buf.offset} is not a multiple of {WORKSPACE_ALIGN}"
                )
        else:
            names = lists[buf.storage]
            if buf.index >= len(names):
                raise PackageError(
                    f"{where}: mod.json buffer {buf.name!r}: {buf.storage} "
                    f"{buf.index} does not exist ({len(names)} of them)"
                )
            owner = program.buffers[names[buf.index]]
            room, what = footprint(owner.shape, owner.dtype), f"{buf.storage} {owner.name!r}"
        if size > room:
            raise PackageError(
                f"{where}: mod.json buffer {buf.name!r} ({size} bytes at offset "
                f"{buf.offset}) does not fit in {what}"
            )


def _check_call(
    where: str,
    program: ProgramInfo,
    kernel: KernelSignature | None,
    name: str,
    args: Sequence[str],
) -> None:
    """A call's kernel exists and each buffer has the dtype and element count of the kernel's
    param (an empty tensor is passed as its 1-element placeholder)."""
    if kernel is None or name == program.entry:
        raise PackageError(f"{where}: mod.json calls {name!r}, which is not one of its kernels")
    if len(args) != len(kernel.params):
        raise PackageError(
            f"{where}: mod.json passes {len(args)} buffers to {name!r}, which "
            f"takes {len(kernel.params)}"
        )
    for arg, (param, shape, dtype) in zip(args, kernel.params):
        buf = program.buffers.get(arg)
        if buf is None:
            raise PackageError(f"{where}: mod.json passes unknown buffer {arg!r} to {name!r}")
        count, want = math.prod(buf.shape), math.prod(shape)
        if buf.dtype != dtype or not (count == want or (count == 0 and want == 1)):
            raise PackageError(
                f"{where}: mod.json buffer {arg!r} is {buf.dtype}{list(buf.shape)}, but "
                f"kernel {name!r} takes {dtype}{list(shape)} for {param!r}"
            )


def _check_entry(where: str, program: ProgramInfo, kernels: Mapping[str, KernelSignature]) -> None:
    """The entry is listed, with the signature every entry function has."""
    slots = len(program.inputs) + len(program.outputs) + len(program.params)
    params = (
        ("args", (max(slots, 1),), "uint64"),
        ("workspace", (max(program.workspace_bytes, 1),), "uint8"),
    )
    entry = kernels.get(program.entry)
    if entry is None:
        raise PackageError(f"{where}: mod.json lacks the entry function {program.entry!r}")
    if entry.params != params:
        raise PackageError(
            f"{where}: mod.json entry {program.entry!r} is not an entry function "
            f"of this plan ({slots} arguments, {program.workspace_bytes} bytes "
            "of workspace)"
        )


def _check_launches(where: str, program: ProgramInfo, launches: Sequence[Launch]) -> None:
    """A CUDA package launches its calls, in order, on the same buffers."""
    if len(launches) != len(program.calls):
        raise PackageError(
            f"{where}: mod.json of a CUDA package has {len(launches)} launches "
            f"for {len(program.calls)} calls"
        )
    for launch, call in zip(launches, program.calls):
        if (launch.kernel, tuple(launch.args)) != (call.kernel, tuple(call.args)):
            raise PackageError(
                f"{where}: mod.json launch of {launch.kernel!r} does not match "
                f"its call of {call.kernel!r}"
            )


def image_slots_wanted(images: int, threads: int) -> int:
    """The image workspaces a run of a plan of `images` allocates on this machine, where the
    code reads the count (`Executor.image_slots`): one for each image its threads (the count
    set, `threads`, or its cores, whichever is more) run at once."""
    return min(images, max(threads, physical_cores())) if images > 1 else 1


def _check_memory(where: str, program: ProgramInfo) -> None:
    """What running the plan allocates fits in this machine's memory."""
    names = [*program.inputs, *program.outputs]  # a one-image plan's: the caller holds N
    sizes = [program.buffers[n].nbytes for n in names]
    params = [program.buffers[n].nbytes for n in program.params]
    slots = max(program.slots, image_slots_wanted(program.images, num_threads()))
    need = program.workspace_bytes * slots + sum(sizes) * program.images + sum(params)
    have = machine_memory()
    if need > have:
        raise PackageError(
            f"{where}: mod.json asks for {need:,} bytes of inputs, outputs, "
            f"params and workspace; this machine has {have:,}"
        )


def check_agreement(where: str, metadata: Mapping[str, Any], program: ProgramInfo) -> None:
    """metadata.json describes the plan's inputs and outputs as mod.json does."""
    workspace = program.all_workspace_bytes
    if metadata["workspace_bytes"] != workspace:
        raise PackageError(
            f"{where}: metadata.json and mod.json disagree on workspace_bytes "
            f"({metadata['workspace_bytes']} vs {workspace})"
        )
    for kind, names in (("inputs", program.inputs), ("outputs", program.outputs)):
        entries = metadata[kind]
        if [e["buffer"] for e in entries] != names:
            raise PackageError(f"{where}: metadata.json {kind} do not match mod.json")
        for entry in entries:
            buf = program.buffers[entry["buffer"]]
            shape = program.caller_shape(buf.name)
            if (tuple(entry["shape"]), entry["dtype"]) != (shape, buf.dtype):
                raise PackageError(
                    f"{where}: metadata.json says {kind[:-1]} {entry['name']!r} is "
                    f"{entry['dtype']}{entry['shape']}, mod.json {buf.dtype}{list(shape)}"
                )


def check_layout(where: str, code: str, found: bytes | str | None, plan: Mapping) -> None:
    """The code's layout digest is the digest of the plan mod.json states."""
    if isinstance(found, bytes):
        found = found.decode("ascii", errors="replace")
    if found is None:
        raise PackageError(
            f"{where}: {code} carries no layout digest: compile the model again with this tvmc"
        )
    if found != layout_digest(plan):
        raise PackageError(
            f"{where}: mod.json does not describe the code in {code} (its buffers, "
            "calls, kernels or workspace differ from those the code was compiled "
            "for): the package was edited or mixed from two packages"
        )
