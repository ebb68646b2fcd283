"""Shell completions: the committed scripts are current, parse in each shell, and complete."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tvmc.cli import completion
from tvmc.cli.completion import generate, walk_commands
from tvmc.cli.main import cli
from tvmc.cli.types import FileWithExt

COMMITTED = Path(__file__).resolve().parents[2] / "tvmc" / "cli" / "completion" / "scripts"
SHELLS = {"bash": "tvmc.bash", "zsh": "_tvmc", "fish": "tvmc.fish"}
# (command path, option, choices) for every choice option of the app, so new commands are covered.
CHOICE_OPTIONS = [
    (node.path, option.names[-1], option.values.choices)
    for node in walk_commands(cli)
    for option in node.options()
    if option.takes_value and option.values.kind == "choice"
]


def needs(shell: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(shutil.which(shell) is None, reason=f"{shell} is not installed")


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripts freshly generated from the app, so behaviour tests do not depend on staleness."""
    directory = tmp_path_factory.mktemp("completions")
    assert completion.main([str(directory)]) == 0
    return directory


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A working directory with model files, another file and a directory."""
    for name in ("model.onnx", "saved.tvmc", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "models").mkdir()
    return tmp_path


def test_committed_scripts_are_current(scripts: Path) -> None:
    for name in SHELLS.values():
        committed = COMMITTED / name
        assert committed.is_file(), f"{committed} is missing: run `make completions`"
        assert committed.read_bytes() == (scripts / name).read_bytes(), (
            f"{committed} is out of date: run `make completions`"
        )


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_completion_command_prints_the_shipped_script(shell: str) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert result.stdout == (COMMITTED / SHELLS[shell]).read_text()
    assert result.stdout.startswith("#") and f"tvmc {shell} completion" in result.stdout


def test_completion_command_names_the_shells() -> None:
    result = CliRunner().invoke(cli, ["completion", "bsh"])
    assert result.exit_code == 2 and "Did you mean 'bash'?" in result.stderr


def test_check_mode(scripts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert completion.main(["--check", str(scripts)]) == 0
    (tmp_path / "tvmc.bash").write_text("stale\n")
    assert completion.main(["--check", str(tmp_path)]) == 1
    assert "run `make completions`" in capsys.readouterr().err


def test_generation_is_deterministic() -> None:
    assert generate(cli) == generate(cli)


def test_file_with_ext_normalizes_extensions() -> None:
    assert FileWithExt(["onnx", ".TVMC", ".onnx"]).extensions == (".onnx", ".tvmc")


@pytest.mark.parametrize(
    ("shell", "syntax_check"),
    [("bash", ["bash", "-n"]), ("zsh", ["zsh", "-n"]), ("fish", ["fish", "--no-execute"])],
)
def test_scripts_parse(scripts: Path, shell: str, syntax_check: list[str]) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    result = subprocess.run(
        [*syntax_check, str(scripts / SHELLS[shell])], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr


# --- bash: call the completion function with COMP_WORDS set, as readline would ------------------


def bash_complete(script: Path, words: list[str], cwd: Path | None = None) -> list[str]:
    """COMPREPLY for the command line `words` (the last one is the word under the cursor)."""
    program = (
        'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tvmc; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    result = subprocess.run(
        ["bash", "-c", program, "bash", str(script), *words],
        capture_output=True, text=True, timeout=30, cwd=cwd, check=True,
    )  # fmt: skip
    return sorted(line for line in result.stdout.splitlines() if line)


@needs("bash")
def test_bash_subcommands(scripts: Path) -> None:
    for node in walk_commands(cli):
        if node.subcommands:
            words = [*node.path, ""]
            assert bash_complete(scripts / "tvmc.bash", words) == sorted(node.subcommands)


@needs("bash")
def test_bash_options(scripts: Path) -> None:
    for node in walk_commands(cli):
        expected = sorted(name for option in node.options() for name in option.names)
        assert bash_complete(scripts / "tvmc.bash", [*node.path, "-"]) == expected
    assert "--format" in bash_complete(scripts / "tvmc.bash", ["tvmc", "-v", "load", "--f"])


@needs("bash")
@pytest.mark.parametrize(("path", "option", "choices"), CHOICE_OPTIONS)
def test_bash_choices(scripts: Path, path: tuple[str, ...], option: str, choices: tuple) -> None:
    script = scripts / "tvmc.bash"
    assert bash_complete(script, [*path, option, ""]) == sorted(choices)
    assert bash_complete(script, [*path, option, "=", ""]) == sorted(choices)  # --opt=<TAB>
    assert bash_complete(script, [*path, option, choices[0][:1]]) == sorted(
        c for c in choices if c.startswith(choices[0][:1])
    )


@needs("bash")
def test_bash_model_file_by_extension(scripts: Path, files: Path) -> None:
    script = scripts / "tvmc.bash"
    expected = ["model.onnx", "models", "saved.tvmc"]
    assert bash_complete(script, ["tvmc", "load", ""], files) == expected
    assert bash_complete(script, ["tvmc", "load", "--format", "json", ""], files) == expected
    assert bash_complete(script, ["tvmc", "load", "--format=json", "m"], files) == expected[:2]
    assert bash_complete(script, ["tvmc", "load", "-o", ""], files) == sorted(
        ["model.onnx", "models", "notes.txt", "saved.tvmc"]
    )
    assert bash_complete(script, ["tvmc", "load", "--input-shapes", ""], files) == []
    assert bash_complete(script, ["tvmc", "load", "model.onnx", ""], files) == []


@click.group()
def demo() -> None:
    """A made-up app: nested groups, every kind of value."""


@demo.group()
def records() -> None:
    """Tuning records."""


@records.command("merge")
@click.argument("inputs", nargs=-1, type=FileWithExt((".json",)))
@click.option("--into", type=click.Path(file_okay=False), help="Directory.")
@click.option("--mode", type=click.Choice(["append", "replace"]), multiple=True)
@click.option("--strict/--lenient", default=True)
def merge(inputs: tuple[str, ...], into: str, mode: tuple[str, ...], strict: bool) -> None:
    """Merge records."""


@needs("bash")
def test_bash_generic_app(tmp_path: Path, files: Path) -> None:
    script = tmp_path / "demo.bash"
    script.write_text(completion.bash_script(demo))
    (files / "log.json").write_bytes(b"")
    assert bash_complete(script, ["tvmc", ""]) == ["records"]
    assert bash_complete(script, ["tvmc", "records", ""]) == ["merge"]
    options = ["--help", "--into", "--lenient", "--mode", "--strict"]
    assert bash_complete(script, ["tvmc", "records", "merge", "-"]) == options
    assert bash_complete(script, ["tvmc", "records", "merge", "--mode", ""]) == [
        "append",
        "replace",
    ]
    assert bash_complete(script, ["tvmc", "records", "merge", "--into", ""], files) == ["models"]
    json_files = ["log.json", "models"]
    assert bash_complete(script, ["tvmc", "records", "merge", ""], files) == json_files
    assert bash_complete(script, ["tvmc", "records", "merge", "a.json", "b.json", ""], files) == (
        json_files
    )


# --- fish: `complete -C` prints what fish would offer ---------------------------------------------


def fish_complete(script: Path, line: str, cwd: Path | None = None) -> list[str]:
    """Fish's completions (without descriptions) for the command line `line`."""
    result = subprocess.run(
        ["fish", "--no-config", "-c", 'source $argv[1]; complete -C $argv[2]', str(script), line],
        capture_output=True, text=True, timeout=30, cwd=cwd, check=True,
    )  # fmt: skip
    return sorted(line.split("\t")[0] for line in result.stdout.splitlines() if line)


@needs("fish")
def test_fish_completes(scripts: Path, files: Path) -> None:
    script = scripts / "tvmc.fish"
    assert "load" in fish_complete(script, "tvmc ")
    assert "--model-format" in fish_complete(script, "tvmc load --")
    for path, option, choices in CHOICE_OPTIONS:
        assert fish_complete(script, f"{' '.join(path)} {option} ") == sorted(choices)
    expected = ["model.onnx", "models/", "saved.tvmc"]
    assert fish_complete(script, "tvmc load ", files) == expected
    assert fish_complete(script, "tvmc load --format json ", files) == expected
    assert fish_complete(script, "tvmc load model.onnx ", files) == []


# --- zsh: a pseudo-terminal runs a real completion and prints what compadd receives ------------

ZSH_HARNESS = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT=; fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -d $2/zcompdump"
zpty -w z "bindkey '^I' complete-word; null-line() { echo -E - \$'\\0' }"
zpty -w z "compprefuncs=(null-line); comppostfuncs=(null-line exit)"
zpty -w z "compadd() {"
zpty -w z "  [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]] && { builtin compadd \"\$@\"; return }"
zpty -w z "  local -a hits; builtin compadd -A hits \"\$@\"; builtin compadd \"\$@\""
zpty -w z "  print -l -- \$hits"
zpty -w z "}"
zpty -w z "$3"$'\t'
integer seen=0
while zpty -r z; do :; done | while IFS= read -r line; do
    if [[ $line == *$'\0\r' ]]; then
        (( seen++ )) && exit 0 || continue
    fi
    (( seen )) && print -r -- "${line%$'\r'}"
done
"""


def zsh_complete(scripts: Path, line: str, cwd: Path, scratch: Path) -> list[str]:
    """What zsh's completion system adds for `line` (compadd is wrapped to print its matches)."""
    harness = scratch / "harness.zsh"
    harness.write_text(ZSH_HARNESS)
    result = subprocess.run(
        ["zsh", "-f", str(harness), str(scripts), str(scratch), line],
        capture_output=True, text=True, timeout=30, cwd=cwd,
    )  # fmt: skip
    return sorted(set(result.stdout.split()))


@needs("zsh")
def test_zsh_completes(
    scripts: Path, files: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    scratch = tmp_path_factory.mktemp("zsh")

    def complete(line: str) -> list[str]:
        return zsh_complete(scripts, line, files, scratch)

    assert complete("tvmc ") == sorted(cli.all_commands())
    assert "--model-format" in complete("tvmc load --")
    for path, option, choices in CHOICE_OPTIONS:
        assert complete(f"{' '.join(path)} {option} ") == sorted(choices)
    assert complete("tvmc load ") == ["model.onnx", "models", "saved.tvmc"]
    assert complete("tvmc load -o ") == ["model.onnx", "models", "notes.txt", "saved.tvmc"]
    assert complete("tvmc load model.onnx --input-shapes ") == []


@needs("fish")
def test_fish_generic_app(tmp_path: Path, files: Path) -> None:
    script = tmp_path / "demo.fish"
    script.write_text(completion.fish_script(demo))
    (files / "log.json").write_bytes(b"")
    assert fish_complete(script, "tvmc ") == ["records"]
    assert fish_complete(script, "tvmc records ") == ["merge"]
    assert fish_complete(script, "tvmc records merge --mode ") == ["append", "replace"]
    assert fish_complete(script, "tvmc records merge --into ", files) == ["models/"]
    assert fish_complete(script, "tvmc records merge a.json ", files) == ["log.json", "models/"]


@needs("zsh")
def test_zsh_generic_app(files: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    scratch = tmp_path_factory.mktemp("zsh")
    (scratch / "_tvmc").write_text(completion.zsh_script(demo))
    (files / "log.json").write_bytes(b"")

    def complete(line: str) -> list[str]:
        return zsh_complete(scratch, line, files, scratch)

    assert complete("tvmc ") == ["records"]
    assert complete("tvmc records ") == ["merge"]
    assert complete("tvmc records merge --mode ") == ["append", "replace"]
    assert complete("tvmc records merge --into ") == ["models"]
    assert complete("tvmc records merge a.json ") == ["log.json", "models"]
