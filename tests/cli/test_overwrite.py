"""Nothing the user wrote is overwritten: `compile -o` and `load -o` replace only what they write
(a package, a saved model), never the model they read or another file, unless --force; `tune -o`
and `records best -o` append to or write records files only."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

import tvmc
from tests.cli.test_compile_run_cli import error, ok
from tests.cli.test_compile_run_cli import tvmc as run_tvmc
from tests.driver.test_compile_run import write_tiny_model
from tests.driver.test_tuning import write_conv_model
from tvmc.errors import UsageError


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_tiny_model(tmp_path)


def test_compile_refuses_to_replace_its_model(model: Path):
    before = digest(model)
    error(run_tvmc("compile", model, "-o", model), 2, r"'.*tiny.onnx': it is the model this")
    link = model.parent / "alias.tar"
    os.symlink(model, link)  # the same file by another name
    error(run_tvmc("compile", model, "-o", link), 2, "it is the model this command reads")
    assert digest(model) == before


def test_compile_refuses_a_file_that_is_not_a_package(model: Path, tmp_path: Path):
    notes = tmp_path / "notes.tar"
    notes.write_text("my notes\n")
    error(run_tvmc("compile", model, "-o", notes), 2, r"it exists and is not a tvmc package")
    assert notes.read_text() == "my notes\n"
    saved = tmp_path / "saved.tar"
    ok(run_tvmc("load", model, "-o", saved))  # a tar, but a saved model, not a package
    error(run_tvmc("compile", model, "-o", saved), 2, r"--force to replace it")
    ok(run_tvmc("compile", model, "-o", notes, "--force"))
    assert tvmc.TVMCPackage(notes).metadata["format"] == "tvmc.package"


def test_compile_replaces_a_package(model: Path, tmp_path: Path):
    package = tmp_path / "m.tar"
    ok(run_tvmc("compile", model, "-o", package))
    ok(run_tvmc("compile", model, "-o", package, "-O", "0"))
    assert tvmc.TVMCPackage(package).metadata["opt_level"] == 0


def test_compile_refuses_its_tuning_records(tmp_path: Path):
    model = write_conv_model(tmp_path)
    records = tmp_path / "log.json"
    records.write_text("")
    error(run_tvmc("compile", model, "--tuning-records", records, "-o", records), 2,
          "it is the tuning records file this command reads")  # fmt: skip


def test_python_api_refuses_too(model: Path):
    with pytest.raises(UsageError, match="it is the model"):
        tvmc.compile(str(model), package_path=str(model))
    with pytest.raises(UsageError, match="it is the model"):
        tvmc.load(str(model)).save(str(model))


def test_load_refuses_to_replace_its_model_or_other_files(model: Path, tmp_path: Path):
    saved = tmp_path / "m.tvmc"
    ok(run_tvmc("load", model, "-o", saved))
    ok(run_tvmc("load", model, "-o", saved))  # a saved model is replaced
    error(run_tvmc("load", saved, "-o", saved), 2, "it is the model this command reads")
    error(run_tvmc("load", model, "-o", model), 2, "it is the model this command reads")
    package = tmp_path / "m.tar"
    ok(run_tvmc("compile", model, "-o", package))
    error(run_tvmc("load", model, "-o", package), 2, "is not a saved tvmc model")
    ok(run_tvmc("load", model, "-o", package, "--force"))


def test_tune_appends_to_records_files_only(tmp_path: Path):
    model = write_conv_model(tmp_path)
    before = digest(model)
    args = ["--trials", "1", "--tuner", "random", "--repeat", "1"]
    error(run_tvmc("tune", model, "-o", model, *args), 2, "it is the model this command reads")
    assert digest(model) == before
    notes = tmp_path / "notes.json"
    notes.write_text("my notes\n")
    error(run_tvmc("tune", model, "-o", notes, *args), 2, "is not a records file")
    assert notes.read_text() == "my notes\n"
    records = tmp_path / "log.json"
    ok(run_tvmc("tune", model, "-o", records, *args))
    first = records.read_text()
    ok(run_tvmc("tune", model, "-o", records, *args, "--trials", "2"))
    assert records.read_text().startswith(first)  # appended, never truncated
    error(run_tvmc("records", "best", records, "-o", notes), 2, "is not a records file")
    ok(run_tvmc("records", "best", records, "-o", records))  # a records file is rewritten
