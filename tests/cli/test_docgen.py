"""docs/cli.md: current with the Click app, complete, and rendered from any Click app."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from tvmc import config
from tvmc.cli import docgen
from tvmc.cli.completion import walk_commands
from tvmc.cli.main import cli
from tvmc.cli.types import FileWithExt

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


@pytest.fixture(scope="module")
def rendered() -> str:
    return docgen.render(cli)


def test_committed_docs_are_current(rendered: str) -> None:
    assert COMMITTED.is_file(), "docs/cli.md is missing: run `make docs`"
    assert COMMITTED.read_text(encoding="utf-8") == rendered, (
        "docs/cli.md is stale: run `make docs`"
    )


def test_rendering_is_deterministic(rendered: str) -> None:
    assert docgen.render(cli) == rendered


def test_every_command_option_and_argument_is_documented(rendered: str) -> None:
    for node in walk_commands(cli):
        assert f" {' '.join(node.path)}\n" in rendered, f"no section for {node.path}"
        assert node.command.get_usage(node.context) in rendered
        for param in node.params():
            if isinstance(param, click.Option):
                for name in param.opts + param.secondary_opts:
                    assert f"`{name}`" in rendered, f"{' '.join(node.path)} {name} undocumented"
            else:
                assert f"`{param.make_metavar(node.context)}`" in rendered


def test_choices_and_environment_variables_are_documented(rendered: str) -> None:
    for node in walk_commands(cli):
        for option in node.options():
            for choice in option.values.choices:
                assert f"`{choice}`" in rendered
    for name in dir(config):
        if name.endswith("_ENV"):
            assert f"| `{getattr(config, name)}` |" in rendered


def test_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "cli.md"
    assert docgen.main([str(output)]) == 0
    assert docgen.main(["--check", str(output)]) == 0
    output.write_text("stale\n")
    assert docgen.main(["--check", str(output)]) == 1
    assert "run `make docs`" in capsys.readouterr().err
    assert docgen.main(["--check", str(tmp_path / "missing.md")]) == 1


@click.group()
def demo() -> None:
    """A made-up app.

    \b
    demo records merge a.json b.json
    """


@demo.group()
def records() -> None:
    """Tuning records."""


@records.command("merge")
@click.argument("inputs", nargs=-1, type=FileWithExt((".json",)))
@click.option("--into", type=click.Path(file_okay=False), required=True, help="Output | dir.")
@click.option("--mode", type=click.Choice(["append", "replace"]), default="append", multiple=True)
@click.option("--strict/--lenient", default=True, envvar="DEMO_STRICT")
@click.option("-j", "--jobs", type=int, default=4, show_default=True, help="Workers.")
def merge(
    inputs: tuple[str, ...], into: str, mode: tuple[str, ...], strict: bool, jobs: int
) -> None:
    """Merge records.\f

    Internal notes that stay out of the docs.
    """


def test_generic_app() -> None:
    text = docgen.render(demo, "demo")
    assert "#### demo records merge" in text
    assert "Usage: demo records merge [OPTIONS] [INPUTS]..." in text
    assert "```text\ndemo records merge a.json b.json\n```" in text
    assert "| `[INPUTS]...` | file (`.json`) | no |" in text
    assert "| `--into` | directory | required | Output \\| dir. |" in text
    assert "one of `append`, `replace`, repeatable" in text
    assert "| `--strict`, `--lenient` | flag | `--strict` | Environment: `DEMO_STRICT`. |" in text
    assert "| `-j`, `--jobs` | integer | `4` | Workers. |" in text
    assert "Internal notes" not in text
    assert "[`merge`](#demo-records-merge)" in text
