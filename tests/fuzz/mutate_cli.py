"""The CLI mutator: command lines built from the Click app's own commands and options, with
values that fit their types, boundary numbers and hostile strings, on copies of the seed files
(a case writes only inside its own directory). `tvmc worker` is left out: it serves until
stopped. Options that make a valid run long (trials, repeats, timeouts) take small values."""

from __future__ import annotations

import json

import click
from hypothesis import strategies as st

from tests.fuzz import values
from tests.fuzz.harness import Case
from tests.fuzz.seeds import Resources
from tvmc.cli.main import cli

FILES = ["seed.onnx", "seed.tar", "seed.json", "inputs.npz", "config.json", "missing.onnx",
         "missing.tar", ".", "/dev/null", "/", "seed.json/x", "", "-"]  # fmt: skip
SMALL_INTS = ["0", "1", "2", "-1", "x", "", "1.5", "nan", "99999999999999999999999"]
# Options whose large values make a valid run long: small values only.
BOUNDED = {
    "--trials": SMALL_INTS,
    "--repeat": SMALL_INTS,
    "--number": SMALL_INTS,
    "--early-stopping": SMALL_INTS,
    "--parallel": SMALL_INTS,
    "--min-repeat-ms": ["0", "0.5", "-1", "nan", "inf", "1e999", "x"],
    "--timeout": ["0", "0.001", "1", "-1", "nan", "inf", "x"],
    "--scheduler": ["tcp://127.0.0.1:9", "nope://x", "", "tcp://[::1", "127.0.0.1:0"],
}
OUTPUT_OPTIONS = ("-o", "--output", "--outputs", "--tuning-records")  # tune's output is -o too
CONFIGS = ['{"compile": {"opt_level": 9}}', '{"trials": "many"}', "[1, 2]", "{", '{"nope": 1}',
           '{"run": {"repeat": 1e999}}', '{"compile": []}', "", '{"target": "[/x]"}',
           '{"load": {"dump": "yes"}}']  # fmt: skip


def _commands() -> dict[tuple[str, ...], click.Command]:
    found: dict[tuple[str, ...], click.Command] = {}

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            # the root group imports its subcommands on first use: all of them, here
            subs = command.all_commands() if hasattr(command, "all_commands") else command.commands
            for name, sub in subs.items():
                walk(sub, (*path, name))
        elif path != ("worker",):
            found[path] = command

    walk(cli, ())
    return found


COMMANDS = _commands()


def _safe_output(name: str) -> str:
    """An output path that stays inside the case's directory."""
    name = name.replace("/", "_").replace("\x00", "_")
    return name if name not in ("", ".", "..") else "out"


def _value(draw: st.DrawFn, param: click.Parameter, name: str) -> str:
    """A value for `param`: one that fits its type, or a hostile string."""
    if name in BOUNDED:
        return draw(st.sampled_from(BOUNDED[name]))
    hostile = draw(st.integers(0, 3)) == 0
    if hostile:
        value = draw(values.strings)
    elif isinstance(param.type, click.Choice):
        value = str(draw(st.sampled_from(list(param.type.choices) + ["nope"])))
    elif isinstance(param.type, click.Path):
        value = draw(st.sampled_from(FILES))
    elif isinstance(param.type, (click.IntRange, click.FloatRange)) or param.type.name in (
        "integer",
        "float",
    ):
        value = draw(st.sampled_from(SMALL_INTS + ["1e999", "-0", "inf"]))
    else:
        value = draw(values.strings)
    return _safe_output(value) if name in OUTPUT_OPTIONS else value


@st.composite
def cli_cases(draw: st.DrawFn, resources: Resources) -> Case:
    """A command line for one tvmc command on copies of the seed files."""
    path = draw(st.sampled_from(sorted(COMMANDS)))
    command = COMMANDS[path]
    args: list[str] = []
    if draw(st.integers(0, 5)) == 0:
        args += draw(st.sampled_from([["-v"], ["-vv"], ["--config", "config.json"], ["-h"],
                                      ["--version"], ["--nope"]]))  # fmt: skip
    args += list(path)
    options = [p for p in command.params if isinstance(p, click.Option)]
    for param in command.params:
        if isinstance(param, click.Argument) and draw(st.integers(0, 9)):
            args.append(draw(st.one_of(st.sampled_from(FILES), values.strings)))
    for _ in range(draw(st.integers(0, 4))):
        option = draw(st.sampled_from(options))
        flag = draw(st.sampled_from(option.opts))
        if option.is_flag:
            args.append(flag)
        else:
            args += [flag, _value(draw, option, flag)]
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(args)))
        args.insert(at, draw(values.strings))
    if path == ("tune",) and "--trials" not in args:
        args += ["--trials", "2", "--repeat", "1", "--timeout", "5"]
    if path == ("tune",) and not any(a in args for a in ("-o", "--output", "--tuning-records")):
        args += ["-o", "records.json"]
    # argv cannot hold NUL; bytes that are not UTF-8 reach Python as surrogate escapes
    args = [a.replace("\x00", "").replace(values.BAD_UTF8_TOKEN, "\udcff\udcfe") for a in args]
    files = {
        "seed.onnx": resources.model.read_bytes(),
        "seed.tar": resources.package.read_bytes(),
        "seed.json": resources.records.read_bytes(),
        "inputs.npz": resources.inputs.read_bytes(),
        "config.json": draw(st.sampled_from(CONFIGS)).encode(),
    }
    return Case("cli", args, files, [json.dumps(args)[:200]])
