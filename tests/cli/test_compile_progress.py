"""`tvmc compile` on a terminal draws its stages and kernels done; in a pipe it draws nothing,
and `--format json` keeps stdout one JSON document either way."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from tests.cli.test_compile_run_cli import ok, tvmc
from tests.driver.test_compile_run import write_tiny_model
from tvmc.cli import compile as compile_cli
from tvmc.cli.compile_progress import RichCompileProgress, compile_progress


def terminal(width: int = 120) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=width, color_system=None), buffer


def test_the_display_shows_the_stage_and_kernels_done():
    console, buffer = terminal()
    with RichCompileProgress(console, "models/resnet.onnx") as progress:
        progress.stage("codegen")
        progress.kernels(3, 50)
        progress.display.refresh()
        shown = buffer.getvalue()
    assert "compiling resnet.onnx: generating code" in shown and "3/50 kernels" in shown
    progress.stage("link")
    assert "linking" in str(progress.display.tasks[0].description)


def test_no_display_off_a_terminal_or_on_a_dumb_one(monkeypatch: pytest.MonkeyPatch):
    assert compile_progress(Console(file=io.StringIO(), force_terminal=False), "m.onnx") is None
    assert compile_progress(terminal()[0], "m.onnx") is not None
    monkeypatch.setenv("TERM", "dumb")
    assert compile_progress(terminal()[0], "m.onnx") is None


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("progress"))


def test_compile_on_a_terminal_draws_progress_and_keeps_json_pure(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    console, buffer = terminal()
    monkeypatch.setattr(compile_cli, "err", console)
    out = tmp_path / "m.tar"
    result = ok(tvmc("compile", model, "-o", out, "--format", "json"))
    document = json.loads(result.stdout)  # nothing but the document on stdout
    drawn = buffer.getvalue()
    assert "compiling tiny.onnx" in drawn
    assert "linking" in drawn and f"{document['kernels']}/{document['kernels']} kernels" in drawn


def test_compile_in_a_pipe_draws_nothing_and_ends_with_a_one_line_summary(
    model: Path, tmp_path: Path
):
    out = tmp_path / "m.tar"
    result = ok(tvmc("compile", model, "-o", out))
    assert "compiling" not in result.stderr and "kernels" not in result.stderr
    first = result.stdout.splitlines()[0]
    size = out.stat().st_size
    assert first.startswith(f"compiled {model} -> {out} (")
    assert "kB): " in first or f"{size} B): " in first
    assert "kernels for llvm in " in first and first.endswith(" s")


def test_no_color_draws_without_colour(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NO_COLOR", "1")
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100)  # colours as the env says
    with RichCompileProgress(console, "m.onnx") as progress:
        progress.stage("lower")
        progress.display.refresh()
    drawn = buffer.getvalue()
    assert "compiling m.onnx: lowering to kernels" in drawn
    assert not re.search(r"\x1b\[[0-9;]*3[0-9]m", drawn)  # no foreground colour codes
