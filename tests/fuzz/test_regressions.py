"""What the fuzzer found, kept: each case runs as a `tvmc` process and must end as stated (a
clean error with its exit code and message, or a run that is accepted)."""

from __future__ import annotations

import io
import json
import platform
import re
import struct
import tarfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from tests.fuzz.harness import ACCEPTED, CLEAN, Case, Executor
from tests.fuzz.mutate_npz import archive, header_text, npy
from tests.fuzz.mutate_records import MARKER, encode
from tests.fuzz.seeds import Resources, cnn, shapes, tensors


def _model_bytes(build, change) -> bytes:
    model = build()
    change(model)
    return model.SerializeToString()


def _set_initializer(name: str, value: np.ndarray):
    def change(model: onnx.ModelProto) -> None:
        tensor = next(t for t in model.graph.initializer if t.name == name)
        tensor.CopyFrom(numpy_helper.from_array(value, name))

    return change


def _uint16_clip(model: onnx.ModelProto) -> None:
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.UINT16
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 0


def _records(resources: Resources, *bad: str) -> bytes:
    return "\n".join([*resources.record_lines[:2], *bad]).encode() + b"\n"


def _line(resources: Resources, change) -> str:
    """The first records line changed as JSON (MARKER + text writes a raw number)."""
    doc = json.loads(resources.record_lines[0])
    change(doc)
    return encode(doc)


# name: (case builder, class, exit code, pattern in stderr)
CASES = {
    "slice with scalar starts": (
        lambda r: Case("model", ["compile", "m.onnx", "-o", "o.tar"], {"m.onnx": _model_bytes(
            shapes, _set_initializer("starts", np.array(0, np.int64)))}),
        CLEAN, 4, r"Slice node 'slice': input 1 \(starts\) must be a 1-D list"),
    "clip of three maxima": (
        lambda r: Case("model", ["load", "m.onnx"], {"m.onnx": _model_bytes(
            tensors, _set_initializer("hi", np.ones(3, np.float32)))}),
        CLEAN, 4, r"Clip node 'clip': input 2 \(max\) must hold one value"),
    "clip of uint16 with float bounds": (
        lambda r: Case("model", ["compile", "m.onnx", "-o", "o.tar"],
                       {"m.onnx": _model_bytes(tensors, _uint16_clip)}),
        CLEAN, 4, r"Gather node 'gather'|Clip node 'clip': inputs 0 and 1 must have one"),
    "ir_version past int32": (
        lambda r: Case("model", ["load", "m.onnx"], {"m.onnx": _model_bytes(
            cnn, lambda m: setattr(m, "ir_version", 84569387852))}),
        ACCEPTED, 0, r""),
    "opset 2^37 (onnx's checker takes int32)": (
        lambda r: Case("model", ["load", "m.onnx"], {"m.onnx": _model_bytes(
            cnn, lambda m: setattr(m.opset_import[0], "version", 2**37))}),
        ACCEPTED, 0, r"opset 137438953472 is newer than 22; converting with the newest rules"),
    "opset 2^62 (onnx's get_schema takes int32)": (
        lambda r: Case("model", ["compile", "m.onnx", "-o", "o.tar"], {"m.onnx": _model_bytes(
            tensors, lambda m: setattr(m.opset_import[0], "version", 2**62))}),
        ACCEPTED, 0, r"opset 4611686018427387904 is newer"),
    "npz header '{'": (
        lambda r: Case("npz", ["run", str(r.package), "--inputs", "in.npz"],
                       {"in.npz": archive([("x.npy", npy("{", b""))])}),
        CLEAN, 2, r"array 'x': not a valid .npy header"),
    "npz header of 4 TiB": (
        lambda r: Case("npz", ["run", str(r.package), "--inputs", "in.npz"], {"in.npz": archive(
            [("y.npy", npy(header_text("<f4", False, (2**40,)), b""))])}),
        CLEAN, 2, r"array 'y': its header describes 4 TiB of data, the member holds 0 B"),
    "records nested 1000 deep": (
        lambda r: Case("records", ["records", "show", "log.json"],
                       {"log.json": _records(r, "[" * 1000 + "]" * 1000)}),
        ACCEPTED, 0, r"log.json:3: skipping a corrupt .*nested"),
    "records cost of 400 digits": (
        lambda r: Case("records", ["records", "best", "log.json", "-o", "b.json"], {
            "log.json": _records(r, _line(r, lambda d: d["result"].__setitem__(0, [10**400])))}),
        ACCEPTED, 0, r"log.json:3: skipping a corrupt"),
    "records error_no 1e999": (
        lambda r: Case("records", ["records", "show", "log.json"], {"log.json": _records(
            r, _line(r, lambda d: d["result"].__setitem__(1, MARKER + "1e999")))}),
        ACCEPTED, 0, r"log.json:3: skipping a corrupt .*out of range"),
    "records costs of 1e400": (
        lambda r: Case("records", ["records", "show", "log.json"], {"log.json": _records(
            r, _line(r, lambda d: d["result"].__setitem__(0, [MARKER + "1e400"])))}),
        ACCEPTED, 0, r"log.json:3: skipping a corrupt .*out of range"),
    "records args not a list": (
        lambda r: Case("records", ["records", "show", "log.json"], {
            "log.json": _records(r, _line(r, lambda d: d["input"].__setitem__(2, 7)))}),
        ACCEPTED, 0, r"log.json:3: skipping a corrupt .*args"),
    "records pads of 1e308": (
        lambda r: Case("records", ["records", "show", "log.json"], {"log.json": _records(
            r, _line(r, lambda d: d["input"][2][3][1].__setitem__("pads", [1e308] * 4)))}),
        ACCEPTED, 0, r""),
    "records show of a package (over 64 KiB of warnings before the Error line)": (
        lambda r: Case("cli", ["records", "show", "p.tar"], {"p.tar": r.package.read_bytes() * 3}),
        CLEAN, 2, r"bytes cut[\s\S]*Error: 'p.tar' holds no tuning record"),
    "verbose load of ''": (lambda r: Case("cli", ["-v", "load", ""]), CLEAN, 4,
                           r"Traceback[\s\S]*Error: model file '' does not exist"),
    "bare tvmc": (lambda r: Case("cli", []), CLEAN, 2, r"Commands:[\s\S]*Error: Missing command"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_finding(name: str, executor: Executor, resources: Resources) -> None:
    build, kind, exit_code, pattern = CASES[name]
    case = build(resources)
    outcome = executor.run(case, timeout=120)
    assert (outcome.kind, outcome.returncode) == (kind, exit_code), outcome
    assert re.search(pattern, outcome.stderr), outcome.stderr


def test_markup_in_node_names_is_printed_by_profile(executor: Executor, tmp_path) -> None:
    model = cnn()
    model.graph.node[0].name = "[/bold]"  # the conv: fused nodes take its name
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    compiled = executor.run(Case("cli", ["compile", str(tmp_path / "m.onnx"), "-o",
                                         str(tmp_path / "m.tar")]))  # fmt: skip
    assert compiled.kind == ACCEPTED, compiled
    outcome = executor.run(Case("cli", ["run", str(tmp_path / "m.tar"), "--profile"]))
    assert outcome.kind == ACCEPTED and "[/bold]" in outcome.stdout, outcome


def _text_filled_with_ud2(object_code: bytes) -> bytes:
    """An ELF64 object whose .text sections hold only `ud2` (an illegal instruction)."""
    data = bytearray(object_code)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names_at = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    for i in range(shnum):
        header = shoff + i * shentsize
        name_offset = struct.unpack_from("<I", data, header)[0]
        name = data[names_at + name_offset : data.index(0, names_at + name_offset)]
        offset, size = struct.unpack_from("<QQ", data, header + 0x18)
        if name.startswith(b".text") and size:
            data[offset : offset + size] = b"\x0f\x0b" * (size // 2) + b"\x90" * (size % 2)
    return bytes(data)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="ud2 is an x86 instruction")
def test_damaged_code_in_a_package_is_refused(executor: Executor, resources: Resources) -> None:
    with tarfile.open(resources.package) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    members.pop("mod.so", None)  # the object is loaded then
    members["mod.o"] = _text_filled_with_ud2(members["mod.o"])
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    outcome = executor.run(Case("package", ["run", "p.tar"], {"p.tar": buffer.getvalue()}))
    assert (outcome.kind, outcome.returncode) == (CLEAN, 4), outcome
    assert "mod.o" in outcome.stderr, outcome.stderr
