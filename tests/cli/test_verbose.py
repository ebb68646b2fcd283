"""-v before or after the subcommand; under -v a user error keeps its exit code and a bug exits 70,
each with its traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import tvmc.cli.compile
import tvmc.cli.main
from tests.cli.runners import SUBPROCESS_ENV
from tests.driver.test_compile_run import write_tiny_model
from tvmc.cli.main import cli
from tvmc.errors import INTERNAL_ERROR_EXIT_CODE


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("verbose"))


@pytest.mark.parametrize("args", [["-v", "compile"], ["compile", "-v"], ["compile", "--verbose"]])
def test_verbose_before_or_after_the_subcommand(model: Path, tmp_path: Path, args: list[str]):
    command = [sys.executable, "-m", "tvmc", *args, str(model), "-o", str(tmp_path / "t.tar")]
    done = subprocess.run(command, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "compiled 1 kernels" in done.stderr or "kernels in" in done.stderr  # -v: info logs


def test_without_verbose_no_info_logs(model: Path, tmp_path: Path):
    command = [sys.executable, "-m", "tvmc", "compile", str(model), "-o", str(tmp_path / "t.tar")]
    done = subprocess.run(command, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "kernels in" not in done.stderr


def test_verbose_flags_add_up(monkeypatch: pytest.MonkeyPatch):
    levels: list[int] = []
    monkeypatch.setattr(tvmc.cli.main, "setup_logging", levels.append)
    result = CliRunner().invoke(cli, ["-v", "completion", "-v", "bash"])
    assert result.exit_code == 0 and levels == [1, 2]  # the group's -v, then both: -vv


@pytest.mark.parametrize("args", [["-v", "compile"], ["compile", "-v"], ["compile"]])
def test_a_bug_exits_70(model: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]):
    def broken(*_args, **_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(tvmc.cli.compile, "compile_model", broken)
    result = CliRunner().invoke(cli, [*args, str(model)])
    assert result.exit_code == INTERNAL_ERROR_EXIT_CODE, result.output
    assert "Internal error: RuntimeError: boom" in result.stderr
    verbose = "-v" in args
    assert ("Traceback" in result.stderr) == verbose
    assert ("run again with -v" in result.stderr) != verbose


@pytest.mark.parametrize("args", [["-v", "load"], ["load", "-v"]])
def test_a_user_error_under_verbose_keeps_its_exit_code(tmp_path: Path, args: list[str]):
    result = CliRunner().invoke(cli, [*args, str(tmp_path / "missing.onnx")])
    assert result.exit_code == 4, result.output
    assert "Traceback" in result.stderr and "Error: model file" in result.stderr
