"""Forged and damaged packages end in one `Error:` line and exit code 4, never in a crash.

Each case edits a real compiled package as an attacker would (recomputing metadata.json's member
digests, so the deeper checks are what refuses it) or as a damaged disk would (a flipped byte,
digests left alone), then runs `tvmc run` on it in a forked child (tests/runtime/forge.py):
a segfault or SIGILL kills that child, and shows here as a negative status, not a dead pytest.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnx
import pytest

import tvmc
from tests.driver.test_compile_run import tiny_model
from tests.runtime.forge import (
    Change,
    both,
    buffer,
    edit_json,
    flip_byte,
    members_of,
    rewrite,
    tensor,
)
from tvmc.errors import PackageError
from tvmc.runtime.package import read_package

N, C, W = 4, 64, 256  # inputs of 256 kB: code run on a forged plan would write far past arrays
PIB = 1 << 50
ROOT = Path(__file__).resolve().parents[2]


def wide_model() -> onnx.ModelProto:
    """tests/driver's tiny model at N x C x W: big enough that a forged plan would write far."""
    return tiny_model((N, C, W), "wide")


# ---- the forgeries -------------------------------------------------------------------------------
def plan(edit) -> Change:
    return edit_json("mod.json", edit)


def metadata(edit) -> Change:
    return edit_json("metadata.json", edit)


def workspace(size) -> Change:
    """workspace_bytes set to `size` in mod.json and metadata.json alike."""
    return both(plan(lambda p: p.update(workspace_bytes=size)),
                metadata(lambda m: m.update(workspace_bytes=size)))  # fmt: skip


def retype(name: str, shape: list[int] | None = None, dtype: str | None = None) -> Change:
    """Buffer `name` (an input or output) given another shape or dtype, in both members."""

    def edit(entry: dict) -> None:
        entry.update({k: v for k, v in (("shape", shape), ("dtype", dtype)) if v is not None})

    return both(plan(lambda p: edit(buffer(p, name))), metadata(lambda m: edit(tensor(m, name))))


def consistent_shrink(name: str) -> Change:
    """Input `name` halved everywhere mod.json and metadata.json mention it: its buffer, the
    views of its storage, the params of the kernels that take them. Only the code disagrees."""

    def edit(p: dict) -> None:
        own = buffer(p, name)
        count = int(np.prod(own["shape"]))
        views = {b["name"] for b in p["buffers"]
                 if (b["storage"], b["index"]) == (own["storage"], own["index"])}  # fmt: skip
        for b in p["buffers"]:
            if b["name"] in views:
                b["shape"] = [count // 2]
        kernels = {k["name"]: k for k in p["kernels"]}
        for call in p["calls"]:
            for i, arg in enumerate(call["args"]):
                if arg in views:
                    kernels[call["kernel"]]["params"][i][1] = [count // 2]

    return both(plan(edit), metadata(lambda m: tensor(m, name).update(shape=[N * C * W // 2])))


def entry_to_a_kernel(p: dict) -> None:
    p["entry"] = p["calls"][0]["kernel"]


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def deep_json(name: str, key: str) -> Change:
    """Member `name`'s `key` replaced by lists nested 10,000 deep (json.dumps would recurse)."""

    def change(members: dict[str, bytes]) -> dict[str, bytes]:
        document = json.loads(members[name])
        document[key] = "@DEEP@"
        text = json.dumps(document).replace('"@DEEP@"', "[" * 10_000 + "]" * 10_000)
        return {**members, name: text.encode()}

    return change


def huge_param_header(members: dict[str, bytes]) -> dict[str, bytes]:
    """mod.params whose param claims 2**40 floats in its .npy header (its data is 1 kB)."""
    (name,) = json.loads(members["mod.json"])["params"]
    npy = io.BytesIO()
    header = {"descr": "<f4", "fortran_order": False, "shape": (1 << 40,)}
    np.lib.format.write_array_header_1_0(npy, header)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as f:
        f.writestr(f"{name}.npy", npy.getvalue() + np.zeros(W, np.float32).tobytes())
    return {**members, "mod.params": archive.getvalue()}


def swap_call_buffers(p: dict) -> None:
    """The Mul's two operands (same shape and dtype) swapped: every check but the digest passes."""
    call = next(c for c in p["calls"] if c["kernel"].startswith("Mul"))
    call["args"][1], call["args"][2] = call["args"][2], call["args"][1]


def workspace_buffer(p: dict) -> dict:
    return next(b for b in p["buffers"] if b["storage"] == "workspace")


class Case(NamedTuple):
    """A forgery, what the one error line says, whether the forger recomputed the member
    digests (False: a damaged copy), and extra `tvmc run` arguments."""

    change: Change
    error: str
    digests: bool = True
    args: tuple[str, ...] = ()


def without_so(members: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in members.items() if k != "mod.so"}


def object_code(edit) -> Change:
    """mod.o edited (a package without mod.so, so that mod.o is what loads)."""
    return both(without_so, lambda members: {**members, "mod.o": edit(members["mod.o"])})


def relocations_far_off(code: bytes) -> bytes:
    """Every relocation of mod.o's first table moved 64 KB on: within the ELF's bounds checks'
    reach only where they look at what a relocation patches."""
    from tvmc.codegen.elf import HEADER, SECTION

    shoff, shnum = HEADER.unpack_from(code)[6], HEADER.unpack_from(code)[12]
    headers = [SECTION.unpack_from(code, shoff + i * SECTION.size) for i in range(shnum)]
    _, _, _, _, offset, size, _, _, _, _ = next(h for h in headers if h[1] == 4 and h[5])
    table = bytearray(code[offset : offset + size])
    for at in range(0, size, 24):
        where = int.from_bytes(table[at : at + 8], "little") + (1 << 16)
        table[at : at + 8] = where.to_bytes(8, "little")
    return code[:offset] + bytes(table) + code[offset + size :]


PROFILE = ("--profile",)
CASES: dict[str, Case] = {
    "workspace_bytes=0": Case(workspace(0), r"does not fit in the workspace"),
    "workspace_bytes=64": Case(workspace(64), r"does not fit in the workspace"),
    "workspace_bytes=-1": Case(workspace(-1), r"'workspace_bytes' is -1, not a non-negative"),
    "workspace_bytes=1.5": Case(workspace(1.5), r"'workspace_bytes' is 1.5, not a non-negative"),
    "entry names a kernel": Case(plan(entry_to_a_kernel), r"is not an entry function"),
    "mod.so byte flipped": Case(flip_byte("mod.so"), r"mod.so is corrupt", digests=False),
    "mod.o byte flipped": Case(both(without_so, flip_byte("mod.o")), r"mod.o is corrupt", False),
    "mod.json edited, digests not": Case(workspace(0), r"mod.json is corrupt", digests=False),
    "mod.o empty": Case(object_code(lambda c: b""), r"mod.o does not load: not an ELF object"),
    "mod.o random bytes": Case(
        object_code(lambda c: bytes(range(256)) * 64), r"mod.o does not load: not an ELF object"
    ),
    "mod.o truncated": Case(object_code(lambda c: c[: len(c) // 2]), r"mod.o does not load"),
    "mod.o relocations off its code": Case(
        object_code(relocations_far_off), r"mod.o does not load: .*relocation"
    ),
    "input buffer shrunk": Case(retype("x", shape=[N, C, W // 2]), r"kernel .* takes"),
    "output buffer shrunk": Case(retype("cat", shape=[N, C * W]), r"kernel .* takes"),
    "output dtype halved": Case(retype("cat", dtype="float16"), r"kernel .* takes"),
    "input shrunk consistently": Case(consistent_shrink("x"), r"does not describe the code"),
    "input shrunk consistently, mod.o": Case(
        both(without_so, consistent_shrink("x")), r"does not describe the code in mod.o"
    ),
    "call's buffers swapped": Case(
        plan(swap_call_buffers), r"does not describe the code in mod.so"
    ),
    "output 1 PiB": Case(retype("s", shape=[PIB // 4]), r"this machine has"),
    "workspace 1 PiB": Case(workspace(PIB), r"this machine has"),
    "param header 4 TiB": Case(huge_param_header, r"mod.json expects 256 values of float32"),
    "mod.json nested 10,000 deep": Case(deep_json("mod.json", "calls"), r"nested 10001 deep"),
    "metadata nested 10,000 deep": Case(deep_json("metadata.json", "configs"), r"nested"),
    "device is a list": Case(
        metadata(lambda m: m.update(device=["cpu"])), r"'device' is \[\"cpu\"\], not cpu or cuda"
    ),
    "heap scratch threads 0": Case(
        metadata(lambda m: m.update(heap_scratch_threads=0)),
        r"'heap_scratch_threads' is 0, not a whole number of at least 1",
    ),
    "heap scratch negative": Case(
        metadata(lambda m: m.update(heap_scratch_bytes=-5)), r"'heap_scratch_bytes' is -5, not a"
    ),
    "dtype unknown": Case(plan(lambda p: buffer(p, "x").update(dtype="float33")), r"float33"),
    "shape negative": Case(plan(lambda p: buffer(p, "x").update(shape=[-1, 3])), r"\[-1, 3\]"),
    "shape not numbers": Case(plan(lambda p: buffer(p, "x").update(shape=["a"])), r"'shape'"),
    "metadata input without name": Case(
        metadata(lambda m: m["inputs"][0].pop("name")), r"inputs\[0\] 'name' is missing"
    ),
    "metadata and mod.json shapes differ": Case(
        metadata(lambda m: m["inputs"][0].update(shape=[N, C, W - 1])), r"says input 'x' is"
    ),
    "old format version": Case(
        metadata(lambda m: m.update(format_version=1)), r"compile the model again"
    ),
    "--profile: workspace offset": Case(
        plan(lambda p: workspace_buffer(p).update(offset=1 << 40)), r"does not fit", args=PROFILE
    ),
    "--profile: workspace offset unaligned": Case(
        plan(lambda p: workspace_buffer(p).update(offset=8)), r"multiple of 64", args=PROFILE
    ),
    "--profile: buffer index": Case(
        plan(lambda p: buffer(p, "x").update(index=7)), r"own input slot", args=PROFILE
    ),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every case's forged package run by `tvmc run` in a forked child: status and stderr."""
    directory = tmp_path_factory.mktemp("forged")
    onnx.save(wide_model(), directory / "wide.onnx")
    real = str(directory / "wide.tar")
    tvmc.compile(str(directory / "wide.onnx"), package_path=real)
    assert {"mod.so", "mod.o"} <= set(members_of(real))
    commands = [["run", real, "--profile"]]
    for i, case in enumerate(CASES.values()):
        forged = rewrite(real, directory / f"forged{i}.tar", case.change, digests=case.digests)
        commands.append(["run", forged, "--fill-mode", "ones", *case.args])
    (directory / "commands.json").write_text(json.dumps(commands))
    done = subprocess.run(
        [sys.executable, "-m", "tests.runtime.forge", str(directory / "commands.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "NO_COLOR": "1", "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert results[0]["status"] == 0, results[0]["stderr"]  # the genuine package runs
    return dict(zip(CASES, results[1:]))


@pytest.mark.parametrize("case", list(CASES))
def test_forged_package_is_refused(outcomes: dict[str, dict], case: str):
    status, stderr = outcomes[case]["status"], outcomes[case]["stderr"]
    assert status == 4, f"{case}: status {status} (negative: killed by a signal)\n{stderr}"
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert re.search(CASES[case].error, lines[0]), lines[0]


# ---- CUDA packages: the PTX is text, so its layout is checked when the package is read ----------
@pytest.fixture(scope="module")
def cuda_package(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("forged_cuda")
    onnx.save(wide_model(), directory / "wide.onnx")
    path = str(directory / "wide.tar")
    tvmc.compile(str(directory / "wide.onnx"), target="cuda -arch=sm_90", package_path=path)
    return path


def wider_grid(p: dict) -> None:
    p["launches"][0]["grid"][0] *= 2


def without_layout_line(members: dict[str, bytes]) -> dict[str, bytes]:
    lines = members["mod.ptx"].decode().splitlines(keepends=True)
    return {**members, "mod.ptx": "".join(x for x in lines if "__tvmc_layout" not in x).encode()}


@pytest.mark.parametrize(
    ("change", "digests", "error"),
    [
        (plan(wider_grid), True, r"does not describe the code in mod.ptx"),
        (consistent_shrink("x"), True, r"does not describe the code in mod.ptx"),
        (without_layout_line, True, r"mod.ptx carries no layout digest"),
        (flip_byte("mod.ptx"), False, r"mod.ptx is corrupt"),
        (plan(lambda p: p["launches"].pop()), True, r"2 launches for 3 calls"),
    ],
    ids=["grid", "shrunk", "no layout", "flipped", "launch missing"],
)
def test_forged_cuda_package_is_refused(cuda_package, tmp_path: Path, change, digests, error):
    forged = rewrite(cuda_package, tmp_path / "forged.tar", change, digests=digests)
    with pytest.raises(PackageError, match=error) as excinfo:
        read_package(forged)
    assert "\n" not in str(excinfo.value)
