"""User errors end in one `Error: ...` line, a non-zero exit code, empty stdout, no traceback.

Every case runs twice: in-process through Click's CliRunner, and as `python -m tvmc` in a
subprocess (the real entry point, exit codes and streams).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

from tvmc import __version__
from tvmc.cli.completion import walk_commands
from tvmc.cli.main import cli

# Lines Click prints around a usage error's `Error:` line.
USAGE_LINES = re.compile(r"Usage: .*|Try '.*' for help\.|")


@dataclass(frozen=True)
class Outcome:
    """What a tvmc invocation left behind."""

    exit_code: int
    stdout: str
    stderr: str


Run = Callable[..., Outcome]


def run_in_process(*args: str, cwd: Path) -> Outcome:
    """tvmc through Click's CliRunner."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, list(args), prog_name="tvmc")
    finally:
        os.chdir(old)
    return Outcome(result.exit_code, result.stdout, result.stderr)


def run_subprocess(*args: str, cwd: Path) -> Outcome:
    """tvmc as `python -m tvmc` in a fresh interpreter."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-m", "tvmc", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd, env=env,
    )  # fmt: skip
    return Outcome(result.returncode, result.stdout, result.stderr)


@pytest.fixture(params=["in_process", "subprocess"])
def tvmc(request: pytest.FixtureRequest, tmp_path: Path) -> Run:
    """Runs tvmc with the given arguments in tmp_path, in-process or as a subprocess."""
    runner = run_in_process if request.param == "in_process" else run_subprocess
    return lambda *args: runner(*args, cwd=tmp_path)


def make_model(op_types: list[str], names: list[str] | None = None) -> onnx.ModelProto:
    """A chain of unary nodes on a float32[1,3] input `x`, output `y`."""
    names = names or [f"node{i}" for i in range(len(op_types))]
    edges = ["x", *[f"t{i}" for i in range(len(op_types) - 1)], "y"]
    nodes = [
        helper.make_node(op, [edges[i]], [edges[i + 1]], name=names[i])
        for i, op in enumerate(op_types)
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 10)
    return model


@pytest.fixture(autouse=True)
def model_files(tmp_path: Path) -> None:
    """Good and bad model files in the working directory of every test."""
    data = make_model(["Relu", "Sigmoid"]).SerializeToString()
    (tmp_path / "tiny.onnx").write_bytes(data)
    (tmp_path / "tiny.bin").write_bytes(data)
    (tmp_path / "truncated.onnx").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.onnx").write_bytes(b"")
    (tmp_path / "garbage.onnx").write_bytes(b"this is not a protobuf \x00\xff\xfe" * 8)
    (tmp_path / "garbage.tvmc").write_bytes(b"not a tar file" * 8)
    (tmp_path / "models").mkdir()
    for name in ("m.tflite", "m.pb", "m.pt", "m.pth", "m.h5", "m.keras"):
        (tmp_path / name).write_bytes(b"another framework's bytes")
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "saved_model.pb").write_bytes(b"")
    unsupported = make_model(["Relu", "FooBar", "FooBar"], ["relu0", "first_foo", "second_foo"])
    (tmp_path / "unsupported.onnx").write_bytes(unsupported.SerializeToString())
    data_dependent = make_model(["Relu", "NonZero", "Unique"], ["relu0", "nz", "uniq"])
    (tmp_path / "data_dependent.onnx").write_bytes(data_dependent.SerializeToString())
    (tmp_path / "load_json.json").write_text(json.dumps({"load": {"format": "json"}}))
    (tmp_path / "flat_json.json").write_text(json.dumps({"format": "json"}))
    (tmp_path / "unknown_key.json").write_text(json.dumps({"frmat": "json"}))
    (tmp_path / "unknown_option.json").write_text(json.dumps({"load": {"fromat": "json"}}))
    (tmp_path / "not_json.json").write_text("format: json\n")


def error_line(outcome: Outcome) -> str:
    """The one `Error:` line of a failed run, after checking the rest of its output."""
    assert outcome.exit_code != 0, outcome
    assert outcome.stdout == "", f"stdout not empty on error: {outcome.stdout!r}"
    assert "Traceback" not in outcome.stderr, outcome.stderr
    lines = outcome.stderr.splitlines()
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1, f"want one 'Error:' line in {outcome.stderr!r}"
    others = [line for line in lines if not line.startswith("Error: ")]
    assert all(USAGE_LINES.fullmatch(line) for line in others), outcome.stderr
    return errors[0]


# (arguments, exit code, regular expressions the error line must match)
ERRORS = {
    "missing file": (["load", "missing.onnx"], 4, [r"'missing.onnx' does not exist"]),
    "directory": (["load", "models"], 4, [r"'models' is a directory"]),
    "empty file": (["load", "empty.onnx"], 4, [r"'empty.onnx' is empty"]),
    "garbage": (["load", "garbage.onnx"], 4, [r"'garbage.onnx' is not a valid ONNX model"]),
    "truncated": (["load", "truncated.onnx"], 4, [r"'truncated.onnx'.*(truncated|not a valid)"]),
    "garbage saved model": (["load", "garbage.tvmc"], 4, [r"'garbage.tvmc'.*(corrupt|truncated)"]),
    "unknown extension": (["load", "tiny.bin"], 2, [r"'\.bin'", r"--model-format", r"onnx, tvmc"]),
    "bad model format": (
        ["load", "tiny.onnx", "--model-format", "pb"],
        2,
        [r"--model-format", r"'pb' is not one of 'onnx', 'tvmc'"],
    ),
    "malformed shapes": (["load", "tiny.onnx", "--input-shapes", "x[1"], 2, [r"--input-shapes"]),
    "unknown input": (
        ["load", "tiny.onnx", "--input-shapes", "z:[1,3]"],
        2,
        [r"--input-shapes", r"'z'", r"'x'"],
    ),
    "unknown dtype": (
        ["load", "tiny.onnx", "--input-dtypes", "x:flaot32"],
        2,
        [r"'flaot32'", r"Did you mean 'float32'\?"],
    ),
    "unsupported op": (
        ["load", "unsupported.onnx"],
        5,
        [r"FooBar", r"\b2 nodes\b", r"first 'first_foo'"],
    ),
    "data-dependent shapes": (
        ["compile", "data_dependent.onnx"],
        5,
        [
            r"NonZero \(1 node, first 'nz'\) \[its output shape depends on the data",
            r"Unique \(1 node, first 'uniq'\) \[its output shape depends on the data",
        ],
    ),
    "tflite": (["compile", "m.tflite"], 5, [r"TensorFlow Lite", r"tf2onnx.convert --tflite"]),
    "frozen graph": (["load", "m.pb"], 5, [r"TensorFlow model", r"tf2onnx.convert --saved-model"]),
    "saved model dir": (["tune", "saved"], 5, [r"SavedModel", r"tf2onnx"]),
    "torch .pt": (["load", "m.pt"], 5, [r"PyTorch", r"torch.onnx.export"]),
    "torch .pth": (["load", "m.pth"], 5, [r"PyTorch", r"torch.onnx.export"]),
    "keras .h5": (["load", "m.h5"], 5, [r"Keras", r"tf2onnx.convert.from_keras"]),
    "keras .keras": (["load", "m.keras"], 5, [r"Keras", r"tf2onnx"]),
    "gpu device": (["run", "x.tar", "--device", "gpu"], 2, [r"'gpu'", r"Did you mean 'cuda'\?"]),
    "cpu target": (["compile", "tiny.onnx", "--target", "cpu"], 2, [r"Did you mean 'llvm'\?"]),
    "misspelt subcommand": (["lod", "tiny.onnx"], 2, [r"No such command 'lod'", r"'load'\?"]),
    "unknown option": (["load", "tiny.onnx", "--fromat", "json"], 2, [r"--fromat", r"--format"]),
    "config unknown key": (
        ["--config", "unknown_key.json", "load", "tiny.onnx"],
        2,
        [r"unknown key 'frmat'", r"\bload\b", r"\bformat\b", r"Did you mean 'format'\?"],
    ),
    "config unknown option": (
        ["--config", "unknown_option.json", "load", "tiny.onnx"],
        2,
        [r"'fromat'", r"valid: .*\bformat\b", r"Did you mean 'format'\?"],
    ),
    "config not json": (["--config", "not_json.json", "load", "tiny.onnx"], 2, [r"not valid JSON"]),
    "config missing": (["--config", "nope.json", "load", "tiny.onnx"], 2, [r"nope.json"]),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_user_error(tvmc: Run, case: str) -> None:
    args, exit_code, patterns = ERRORS[case]
    outcome = tvmc(*args)
    line = error_line(outcome)
    assert outcome.exit_code == exit_code, (outcome.exit_code, line)
    for pattern in patterns:
        assert re.search(pattern, line), f"{pattern!r} not in {line!r}"


@pytest.mark.parametrize(
    "path", [n.path[1:] for n in walk_commands(cli)], ids=lambda p: " ".join(("tvmc", *p))
)
def test_help(tvmc: Run, path: tuple[str, ...]) -> None:
    for flag in ("--help", "-h"):
        outcome = tvmc(*path, flag)
        assert outcome.exit_code == 0, outcome
        assert outcome.stdout.startswith(f"Usage: tvmc {' '.join(path)}".rstrip())
        assert outcome.stderr == ""


def test_version(tvmc: Run) -> None:
    outcome = tvmc("--version")
    assert outcome.exit_code == 0
    assert outcome.stdout.strip() == f"tvmc, version {__version__}"


def test_misspelt_subcommands_are_suggested() -> None:
    for name in [n.path[1] for n in walk_commands(cli) if len(n.path) == 2 and len(n.path[1]) > 3]:
        line = error_line(run_in_process(name[:-1], cwd=Path.cwd()))
        assert f"Did you mean '{name}'?" in line


def load_json(outcome: Outcome) -> dict:
    """The JSON document a successful `load --format json` printed."""
    assert outcome.exit_code == 0, outcome
    document = json.loads(outcome.stdout)
    assert document["inputs"] == {"x": {"shape": [1, 3], "dtype": "float32"}}
    assert document["outputs"] == {"y": {"shape": [1, 3], "dtype": "float32"}}
    return document


def test_load_json(tvmc: Run) -> None:
    load_json(tvmc("load", "tiny.onnx", "--format", "json"))
    load_json(tvmc("load", "tiny.onnx", "--json"))
    load_json(tvmc("load", "tiny.bin", "--model-format", "onnx", "--json"))
    document = load_json(tvmc("load", "tiny.onnx", "--input-shapes", "x:[1,3]", "--json"))
    assert document["ops"] == {"Relu": 1, "Sigmoid": 1}


def test_load_text(tvmc: Run) -> None:
    outcome = tvmc("load", "tiny.onnx")
    assert outcome.exit_code == 0, outcome
    assert "float32[1,3]" in outcome.stdout
    with pytest.raises(ValueError):
        json.loads(outcome.stdout)


def test_saved_model_round_trip(tvmc: Run, tmp_path: Path) -> None:
    outcome = tvmc("load", "tiny.onnx", "-o", "tiny.tvmc", "--json")
    assert load_json(outcome)["saved"] == "tiny.tvmc"
    assert (tmp_path / "tiny.tvmc").is_file()
    load_json(tvmc("load", "tiny.tvmc", "--json"))


@pytest.mark.parametrize("config", ["load_json.json", "flat_json.json"])
def test_config_sets_defaults(tvmc: Run, config: str) -> None:
    load_json(tvmc("--config", config, "load", "tiny.onnx"))


def test_command_line_beats_config(tvmc: Run) -> None:
    outcome = tvmc("--config", "load_json.json", "load", "tiny.onnx", "--format", "text")
    assert outcome.exit_code == 0, outcome
    assert "float32[1,3]" in outcome.stdout
    with pytest.raises(ValueError):
        json.loads(outcome.stdout)


@pytest.mark.parametrize("group", [[], ["records"]], ids=["tvmc", "tvmc records"])
def test_a_bare_group_shows_its_help_and_an_error(tvmc: Run, group: list[str]) -> None:
    outcome = tvmc(*group)
    assert outcome.exit_code == 2 and outcome.stdout == ""
    assert outcome.stderr.startswith(f"Usage: {' '.join(['tvmc', *group])} [OPTIONS] COMMAND")
    assert "Commands:" in outcome.stderr
    assert outcome.stderr.rstrip().endswith("\n\nError: Missing command.")
    assert outcome.stderr.count("Error:") == 1


def test_verbose_adds_the_traceback_and_keeps_the_error(tvmc: Run) -> None:
    outcome = tvmc("-v", "load", "missing.onnx")
    assert outcome.exit_code == 4 and outcome.stdout == ""
    assert outcome.stderr.startswith("Traceback (most recent call last)")
    assert outcome.stderr.rstrip().endswith("Error: model file 'missing.onnx' does not exist")


def test_names_are_printed_as_they_are(tvmc: Run, tmp_path: Path) -> None:
    model = make_model(["Relu"], ["[/bold]"])
    model.graph.input[0].name = model.graph.node[0].input[0] = "[red]x[/red]"
    (tmp_path / "markup.onnx").write_bytes(model.SerializeToString())
    outcome = tvmc("load", "markup.onnx")
    assert outcome.exit_code == 0, outcome
    assert "[red]x[/red]" in outcome.stdout
