"""Static shell completions for bash, zsh and fish, generated from the Click app.

`python -m tvmc.cli.completion DIR` (`make completions`) writes DIR/tvmc.bash, DIR/_tvmc (zsh) and
DIR/tvmc.fish by walking the command tree; `--check DIR` only compares. The scripts are static: no
Python starts on TAB (importing tvmc takes about a second). They know subcommands (with their short
help), options (long and short; flags apart from options taking a value), arguments, and values:
`click.Choice` values, directories for `click.Path(file_okay=False)`, files for other paths.

Declaring file extensions: give a path parameter the type `tvmc.cli.types.FileWithExt`, and shells
complete only files with those extensions (and directories, to walk into); docs/cli.md lists them
too:

    @click.argument("model_file", type=FileWithExt((".onnx", ".tvmc")))
    @click.option("--tuning-records", type=FileWithExt((".json",), dir_okay=False))

Any parameter type with an `extensions` tuple of ".ext" strings is treated the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import click

from tvmc.cli.completion.bash import bash_script
from tvmc.cli.completion.fish import fish_script
from tvmc.cli.completion.model import (
    SCRIPT_NAMES,
    CommandNode,
    Values,
    value_completion,
    walk_commands,
)
from tvmc.cli.completion.zsh import zsh_script
from tvmc.cli.main import cli

__all__ = [
    "SCRIPT_NAMES",
    "CommandNode",
    "Values",
    "bash_script",
    "fish_script",
    "generate",
    "main",
    "stale_files",
    "value_completion",
    "walk_commands",
    "zsh_script",
]

# --- files -------------------------------------------------------------------------------------


def generate(root: click.Command) -> dict[str, str]:
    """The completion scripts by file name."""
    return {
        SCRIPT_NAMES["bash"]: bash_script(root),
        SCRIPT_NAMES["zsh"]: zsh_script(root),
        SCRIPT_NAMES["fish"]: fish_script(root),
    }


def stale_files(directory: str, scripts: dict[str, str]) -> list[str]:
    """The scripts whose file in `directory` is missing or differs."""
    stale = []
    for name, text in scripts.items():
        try:
            with open(os.path.join(directory, name), encoding="utf-8", newline="") as f:
                if f.read() == text:
                    continue
        except OSError:
            pass
        stale.append(name)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with --check compare) the completion scripts of the tvmc app."""
    parser = argparse.ArgumentParser(prog="python -m tvmc.cli.completion", description=__doc__)
    parser.add_argument("directory", help="where tvmc.bash, _tvmc and tvmc.fish go")
    parser.add_argument("--check", action="store_true", help="fail if the files are out of date")
    args = parser.parse_args(argv)
    scripts = generate(cli)
    if args.check:
        stale = stale_files(args.directory, scripts)
        if stale:
            print(
                f"{', '.join(stale)} in {args.directory}/ out of date; run `make completions`",
                file=sys.stderr,
            )
            return 1
        return 0
    os.makedirs(args.directory, exist_ok=True)
    for name, text in scripts.items():
        with open(os.path.join(args.directory, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
