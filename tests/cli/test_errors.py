"""Bad input on every command: exit code, an `Error:` line that says what is wrong and what to
do (the nearest valid value for a misspelt one), empty stdout, and no traceback.

The table runs in-process through Click's CliRunner; a few rows also run as `python -m tvmc`.
test_cli_errors.py covers loading models and config files; this file the other commands.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from tests.cli.runners import run_in_process, run_subprocess
from tests.driver.test_tuning import write_conv_model
from tvmc.autotune import Record, append_records, read_records
from tvmc.errors import did_you_mean, suggest, unknown_choice


def hint(choice: str) -> str:
    """The regular expression of the suggestion of `choice`."""
    return rf"Did you mean '{choice}'\?"


# case -> (command line after `tvmc`, exit code, regular expressions the `Error:` line must match)
ERRORS: dict[str, tuple[str, int, list[str]]] = {
    # misspelt option values: the nearest valid one
    "device": ("run convs.tar --device cpuu", 2, ["'cpuu'", hint("cpu")]),
    "fill mode": ("run convs.tar --fill-mode randm", 2, [hint("random")]),
    "tuner": ("tune convs.onnx -o l.json --tuner rnadom", 2, ["--tuner", hint("random")]),
    "model format": ("load convs.onnx --model-format onx", 2, [hint("onnx")]),
    "output format": ("load convs.onnx --format jsn", 2, [hint("json")]),
    "dump format": ("compile convs.onnx --dump-code ll,asn", 2, [hint("asm")]),
    "target": ("compile convs.onnx --target llvn", 2, [hint("llvm")]),
    "target option": (
        "compile convs.onnx --target 'llvm -mcup=znver4'",
        2,
        ["'-mcup=znver4'", hint("-mcpu")],
    ),
    "target option value": ("compile convs.onnx --target 'llvm -mcpu'", 2, ["-mcpu needs a value"]),
    "cpu": (
        "compile convs.onnx --target-llvm-mcpu skylke",
        2,
        ["unknown CPU 'skylke'", hint("skylake")],
    ),
    "cpu feature": (
        "compile convs.onnx --target-llvm-mattr +avx2,+avx3",
        2,
        [r"\+avx3", hint(r"\+avx")],
    ),
    "pass": ("compile convs.onnx --disabled-pass fusse", 2, [hint("fuse")]),
    "tasks spec": ("tune convs.onnx --tasks lst", 2, ["--tasks", hint("list")]),
    "tasks range": (
        "tune convs.onnx -o l.json --tasks 5",
        2,
        ["out of range", r"2 task\(s\) \(0-1\)", "--tasks list"],
    ),
    # numbers that are no numbers: NaN passes every range check, inf never ends a wait
    "min repeat nan": (
        "run convs.tar --min-repeat-ms nan",
        2,
        ["--min-repeat-ms", "'nan' is not a finite number"],
    ),
    "timeout nan": (
        "tune convs.onnx -o l.json --timeout nan",
        2,
        ["--timeout", "'nan' is not a finite"],
    ),
    "timeout inf": (
        "tune convs.onnx -o l.json --timeout inf",
        2,
        ["--timeout", "'inf' is not a finite"],
    ),
    "tune min repeat inf": ("tune convs.onnx -o l.json --min-repeat-ms inf", 2, ["'inf' is not"]),
    "worker timeout nan": ("worker --device-key d --connect-timeout nan", 2, ["'nan' is not"]),
    "subcommand": ("cmpile convs.onnx", 2, [hint("compile")]),
    "records subcommand": ("records shwo log.json", 2, [hint("show")]),
    # inputs that do not match the model
    "shapes name": (
        "load convs.onnx --input-shapes 'xx:[1,3,16,16]'",
        2,
        ["--input-shapes", r"\['xx'\]", r"its inputs: \['x'\]", hint("x")],
    ),
    "shapes rank": (
        "load convs.onnx --input-shapes 'x:[1,3,16]'",
        2,
        [r"'x' 3 dimension\(s\) \[1, 3, 16\]", r"declares 4: \[1, 3, 16, 16\]"],
    ),
    "dtypes name": (
        "load convs.onnx --input-dtypes X:float32",
        2,
        ["--input-dtypes", r"\['X'\]", hint("x")],
    ),
    "inputs name": (
        "run convs.tar -i name.npz",
        2,
        ["unknown input 'xx'", r"x \(float32\[1,3,16,16\]\)", hint("x")],
    ),
    "inputs shape": (
        "run convs.tar -i shape.npz",
        2,
        [r"'x' has shape \[1, 3, 8, 8\]", r"expects float32\[1,3,16,16\]"],
    ),
    "inputs dtype": ("run convs.tar -i dtype.npz", 2, ["float64", "astype"]),
    "inputs not npz": ("run convs.tar -i convs.onnx", 2, ["not an .npz archive", "numpy.savez"]),
    "inputs missing": ("run convs.tar -i missing.npz", 2, ["'missing.npz' does not"]),
    # files: missing, directories, corrupt, unwritable
    "model missing": ("compile missing.onnx", 4, ["'missing.onnx' does not exist"]),
    "model directory": ("compile folder", 4, ["'folder' is a directory"]),
    "package directory": ("run folder", 4, ["'folder' is not a file"]),
    "package corrupt": ("run corrupt.tar", 4, ["'corrupt.tar' is not a readable package"]),
    "package is a model": ("run convs.onnx", 4, ["not a readable package"]),
    "model unwritable": (
        "load convs.onnx -o convs.onnx/m.tvmc",
        2,
        ["cannot write the model to 'convs.onnx/m.tvmc'", "writable"],
    ),
    "package unwritable": (
        "compile convs.onnx -o convs.onnx/m.tar",
        2,
        ["cannot write the package"],
    ),
    "package is a directory": ("compile convs.onnx -o folder", 2, ["is a directory"]),
    "outputs unwritable": (
        "run convs.tar -o convs.onnx/o.npz",
        2,
        ["cannot write outputs to 'convs.onnx/o.npz'"],
    ),
    "records unwritable": (
        "tune convs.onnx -o convs.onnx/l.json",
        2,
        ["cannot write tuning records"],
    ),
    "best unwritable": (
        "records best log.json -o convs.onnx/b.json",
        2,
        ["cannot write 'convs.onnx/b.json'"],
    ),
    "tune without records": ("tune convs.onnx", 2, [r"needs -o PATH \(or --tuning-records PATH\)"]),
    # records files
    "records missing": (
        "compile convs.onnx --tuning-records none.json",
        2,
        ["'none.json' does not exist"],
    ),
    "records corrupt": (
        "records show garbage.json",
        2,
        ["'garbage.json' holds no tuning record", "tvmc tune"],
    ),
    "records corrupt compile": (
        "compile convs.onnx --tuning-records garbage.json",
        2,
        ["holds no tuning record"],
    ),
    "records of another target": (
        "compile convs.onnx --tuning-records cuda.json",
        2,
        ["records for cuda, none for 'llvm'", "--target llvm"],
    ),
    # config files
    "config bad json": (
        "--config bad.json load convs.onnx",
        2,
        ["'bad.json' is not valid JSON", r"line 2 column \d+"],
    ),
    "config bad option": ("--config option.json load convs.onnx", 2, ["'fromat'", hint("format")]),
    "config bad value": (
        "--config value.json run convs.tar",
        2,
        ["--device", hint("cpu"), "the value comes from --config value.json"],
    ),
}
SUBPROCESS = ["device", "shapes name", "records of another target", "model unwritable"]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model, its package, real records and bad files, made once."""
    directory = tmp_path_factory.mktemp("errors")
    write_conv_model(directory)
    for args in (["compile", "convs.onnx", "-o", "convs.tar"],
                 ["tune", "convs.onnx", "-o", "log.json", "--trials", "2", "--tasks", "1",
                  "--tuner", "random", "--repeat", "1"]):  # fmt: skip
        code, _, stderr = run_in_process(args, directory)
        assert code == 0, stderr
    cuda = [
        Record(
            "cuda -arch=sm_90",
            *[getattr(r, f) for f in ("task_name", "args", "config")],
            r.costs,
            r.error_no,
            r.all_cost,
            r.timestamp,
        )  # fmt: skip
        for r in read_records(str(directory / "log.json"))
    ]
    append_records(str(directory / "cuda.json"), cuda)
    x = np.zeros((1, 3, 16, 16), np.float32)
    np.savez(directory / "name.npz", xx=x)
    np.savez(directory / "shape.npz", x=x[:, :, :8, :8])
    np.savez(directory / "dtype.npz", x=x.astype(np.float64))
    (directory / "folder").mkdir()
    (directory / "corrupt.tar").write_bytes((directory / "convs.tar").read_bytes()[:700])
    (directory / "garbage.json").write_text("this is not a records file\n{\n")
    (directory / "bad.json").write_text('{"load": {"format": "json"},\n "run": {"repeat": 3,}}\n')
    (directory / "option.json").write_text(json.dumps({"load": {"fromat": "json"}}))
    (directory / "value.json").write_text(json.dumps({"run": {"device": "cpuu"}}))
    return directory


def check(case: str, outcome: tuple[int, str, str]) -> None:
    args, exit_code, patterns = ERRORS[case]
    code, stdout, stderr = outcome
    assert "Traceback" not in stderr + stdout, stderr
    assert stdout == "", f"stdout not empty on error: {stdout!r}"
    lines = [line for line in stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, f"want one 'Error:' line in {stderr!r}"
    assert code == exit_code, (code, lines[0])
    for pattern in patterns:
        assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"


@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_invocation(case: str, source: Path) -> None:
    check(case, run_in_process(shlex.split(ERRORS[case][0]), source))


@pytest.mark.parametrize("case", SUBPROCESS)
def test_bad_invocation_in_a_process(case: str, source: Path) -> None:
    check(case, run_subprocess(shlex.split(ERRORS[case][0]), source))


def test_suggest() -> None:
    assert suggest("randm", ["random", "zeros", "ones"]) == "random"
    assert suggest("gpu", ["random", "zeros"]) is None
    assert suggest("X", ["x", "y"]) == "x"  # case alone
    assert did_you_mean("lst", ["all", "list"]) == " Did you mean 'list'?"
    assert did_you_mean("zzz", ["all", "list"]) == ""
    message = unknown_choice("tuner", "rnadom", ["xgb", "random"])
    assert message == "unknown tuner 'rnadom'; valid: xgb, random. Did you mean 'random'?"
