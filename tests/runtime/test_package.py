"""The package format: round trip, atomic writes, and refusing bad, unsafe or foreign packages."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import tvmc
from tests.driver.test_compile_run import write_tiny_model
from tests.runtime.forge import Members, members_of, rewrite
from tvmc.codegen.host import HostCPU
from tvmc.errors import PackageError
from tvmc.runtime import package as package_format
from tvmc.runtime.package import (
    LIBRARY,
    OBJECT,
    PARAMS,
    REQUIRED_MEMBERS,
    read_package,
    read_params,
    write_package,
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tvmc.TVMCPackage:
    directory = tmp_path_factory.mktemp("package")
    model = write_tiny_model(directory)
    return tvmc.compile(str(model), package_path=str(directory / "tiny.tar"))


def with_metadata(**changes) -> Callable[[Members], Members]:
    def change(members: Members) -> Members:
        metadata = {**json.loads(members["metadata.json"]), **changes}
        return {**members, "metadata.json": json.dumps(metadata).encode()}

    return change


def one_line_error(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message, message
    return message


def test_members_and_round_trip(built: tvmc.TVMCPackage):
    members = members_of(built.package_path)
    assert list(members) == ["metadata.json", "mod.json", "mod.params", "mod.o", "mod.so"]
    contents = read_package(built.package_path)
    assert contents.metadata == built.metadata
    assert contents.object_code == members[OBJECT] and contents.shared_library == members[LIBRARY]
    assert contents.program.to_json() == built.program.to_json()
    assert {k.name for k in contents.kernels} >= {c.kernel for c in contents.program.calls}
    for name in contents.program.params:
        assert contents.params[name].dtype == np.dtype(contents.program.buffers[name].dtype)


def test_write_is_atomic(built: tvmc.TVMCPackage, tmp_path: Path):
    contents = read_package(built.package_path)
    path = tmp_path / "out.tar"
    assert write_package(str(path), contents) == str(path)
    before = path.read_bytes()

    class Exploding(type(contents)):
        def members(self) -> Members:
            return {"metadata.json": b"{}", "mod.o": _explode()}

    def _explode() -> bytes:
        raise RuntimeError("disk on fire")

    broken = Exploding(**vars(contents))
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_package(str(path), broken)
    assert path.read_bytes() == before  # the old package is untouched
    assert os.listdir(tmp_path) == ["out.tar"]  # and no temporary file is left behind


@pytest.mark.parametrize("shared", [True, False], ids=["mod.so", "mod.o"])
def test_linker_free_load(built: tvmc.TVMCPackage, tmp_path: Path, rng, shared: bool):
    inputs = {n: rng.standard_normal((2, 3, 4)).astype(np.float32) for n in ("x", "y")}
    want = built.run(inputs=inputs).outputs
    if shared:  # forced by the parameter: mod.so is in the package but not used
        package = tvmc.TVMCPackage(built.package_path, use_shared_library=False)
    else:  # a package without mod.so, as written where no C compiler exists
        without = rewrite(built.package_path, tmp_path / "no_so.tar",
                          lambda m: {k: v for k, v in m.items() if k != LIBRARY})  # fmt: skip
        package = tvmc.TVMCPackage(without)
        assert package.summary()["shared_library"] is False
    got = package.run(inputs=inputs).outputs
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_broken_shared_library_falls_back_to_the_object(built, tmp_path: Path, caplog, monkeypatch):
    monkeypatch.setattr(logging.getLogger("tvmc"), "propagate", True)  # the CLI may have cut it
    path = rewrite(built.package_path, tmp_path / "bad_so.tar", lambda m: {**m, LIBRARY: b"junk"})
    result = tvmc.run(path, fill_mode="ones")
    assert result.outputs["cat"].shape == (2, 24)
    assert "loading mod.o instead" in caplog.text


def test_corrupt_and_truncated(built: tvmc.TVMCPackage, tmp_path: Path):
    data = Path(built.package_path).read_bytes()
    (tmp_path / "garbage.tar").write_bytes(b"this is not a tar file" * 40)
    (tmp_path / "truncated.tar").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.tar").write_bytes(b"")
    for name in ("garbage.tar", "truncated.tar", "empty.tar"):
        with pytest.raises(PackageError) as excinfo:
            tvmc.TVMCPackage(tmp_path / name)
        message = one_line_error(excinfo)
        assert name in message and re.search(r"corrupt or truncated|lacks", message), message
    with pytest.raises(PackageError, match="does not exist"):
        tvmc.TVMCPackage(tmp_path / "missing.tar")
    with pytest.raises(PackageError, match="is not a file"):
        tvmc.TVMCPackage(tmp_path)


@pytest.mark.parametrize("member", REQUIRED_MEMBERS)
def test_missing_member(built: tvmc.TVMCPackage, tmp_path: Path, member: str):
    path = rewrite(built.package_path, tmp_path / "p.tar",
                   lambda m: {k: v for k, v in m.items() if k != member})  # fmt: skip
    with pytest.raises(PackageError, match=f"lacks {member}"):
        read_package(path)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (with_metadata(format_version=99), r"format version 99; this tvmc reads 3"),
        (with_metadata(format="tvmc.model"), r"not a tvmc package"),
        (with_metadata(inputs="x"), r"'inputs' is \"x\", not a list"),
        (with_metadata(inputs=[{"name": "x", "buffer": "nope"}, {}]), r"inputs\[0\] 'shape'"),
        (lambda m: {**m, "metadata.json": b"{"}, r"corrupt metadata.json"),
        (lambda m: {**m, "mod.json": b"[]"}, r"corrupt mod.json"),
        (lambda m: {**m, PARAMS: b"PK junk"}, r"corrupt mod.params"),
    ],
    ids=["version", "format", "schema", "buffers", "metadata", "mod.json", "params"],
)
def test_invalid_members(built: tvmc.TVMCPackage, tmp_path: Path, change, pattern: str):
    path = rewrite(built.package_path, tmp_path / "p.tar", change)
    with pytest.raises(PackageError, match=pattern) as excinfo:
        read_package(path)
    one_line_error(excinfo)


def test_pickled_params_are_refused(built: tvmc.TVMCPackage, tmp_path: Path):
    params = io.BytesIO()
    name = read_package(built.package_path).program.params[0]
    np.savez(params, **{name: np.array([{"evil": 1}], dtype=object)})
    path = rewrite(
        built.package_path, tmp_path / "p.tar", lambda m: {**m, PARAMS: params.getvalue()}
    )
    with pytest.raises(PackageError, match="corrupt mod.params"):
        read_package(path)


@pytest.mark.parametrize("name", ["../escape.txt", "/tmp/absolute.txt", "a/../../escape.txt"])
def test_escaping_member_names_are_refused(built: tvmc.TVMCPackage, tmp_path: Path, name: str):
    path = rewrite(built.package_path, tmp_path / "p.tar", lambda m: {**m, name: b"pwned"})
    with pytest.raises(PackageError, match="outside the package"):
        read_package(path)
    assert not (tmp_path.parent / "escape.txt").exists()


def test_links_are_refused(built: tvmc.TVMCPackage, tmp_path: Path):
    path = tmp_path / "p.tar"
    rewrite(built.package_path, path, lambda m: m)
    with tarfile.open(path, "a") as tar:
        link = tarfile.TarInfo("mod.o.link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(PackageError, match="holds a link 'mod.o.link'"):
        read_package(str(path))


def test_foreign_triple(tmp_path: Path):
    model = write_tiny_model(tmp_path)
    path = str(tmp_path / "arm.tar")
    tvmc.compile(str(model), package_path=path, target_llvm_mtriple="aarch64-linux-gnu")
    assert LIBRARY not in members_of(path)
    with pytest.raises(PackageError) as excinfo:
        tvmc.run(path)
    message = one_line_error(excinfo)
    assert "aarch64-linux-gnu" in message and "--target llvm" in message


def test_missing_cpu_feature(built: tvmc.TVMCPackage, monkeypatch):
    wanted = [f[1:] for f in built.metadata["features"].split(",") if f.startswith("+")]
    if not wanted:
        pytest.skip("this host's package names no CPU features")
    host = package_format.host_cpu()
    features = {**host.feature_map(), wanted[0]: False}
    signed = ",".join(("+" if has else "-") + name for name, has in features.items())
    lacking = HostCPU(host.triple, host.name, signed)
    monkeypatch.setattr(package_format, "host_cpu", lambda: lacking)
    with pytest.raises(PackageError) as excinfo:
        tvmc.TVMCPackage(built.package_path).run()
    message = one_line_error(excinfo)
    assert f"+{wanted[0]}" in message and "-mcpu=" in message
    assert f"--target-llvm-mattr=-{wanted[0]}" in message


def test_missing_cpu_feature_of_a_real_build(tmp_path: Path):
    host = package_format.host_cpu().feature_map()
    absent = [f for f in ("amx-tile", "avx512fp16", "avxvnni", "avx512f", "avx2") if f in host]
    absent = [f for f in absent if not host[f]]
    if not absent:
        pytest.skip("this x86 host has every candidate feature (or is not x86)")
    model = write_tiny_model(tmp_path)
    path = str(tmp_path / "future.tar")
    tvmc.compile(str(model), package_path=path, target_llvm_mattr=f"+{absent[0]}")
    with pytest.raises(PackageError, match=rf"lacks: \+{absent[0]}"):
        tvmc.run(path)


def test_params_are_read_exactly_and_aligned():
    arrays = {
        "w": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "f": np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
        "m": np.array([True, False, True]),
        "e": np.zeros((0, 5), np.float16),
        "s": np.array(3.5, np.float64),
    }
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    buffer.seek(0)
    params = read_params("p.tar", buffer)
    assert list(params) == list(arrays)
    for name, want in arrays.items():
        got = params[name]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        if got.size and name != "f":
            assert got.ctypes.data % 64 == 0 and got.flags.c_contiguous
