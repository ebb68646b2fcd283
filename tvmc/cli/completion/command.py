"""`tvmc completion bash|zsh|fish`: print the completion script installed with tvmc.

The scripts are generated from the Click app by `make completions` into `scripts/` beside this
file and ship in the wheel, so pip users get them without the repository (docs/completions.md).
"""

from __future__ import annotations

from importlib import resources

import click

from tvmc.cli.completion.model import SCRIPT_NAMES
from tvmc.cli.types import SuggestChoice

SCRIPTS_DIR = "scripts"  # beside this module; package data


def script_text(shell: str) -> str:
    """The completion script for `shell` (bash, zsh or fish), as shipped."""
    scripts = resources.files("tvmc.cli.completion").joinpath(SCRIPTS_DIR)
    return scripts.joinpath(SCRIPT_NAMES[shell]).read_text(encoding="utf-8")


@click.command("completion")
@click.argument("shell", type=SuggestChoice(sorted(SCRIPT_NAMES)), metavar="SHELL")
def completion_command(shell: str) -> None:
    """Print the completion script for bash, zsh or fish (to source or install).

    \b
    bash: tvmc completion bash > ~/.local/share/bash-completion/completions/tvmc
    zsh:  tvmc completion zsh > ~/.zsh/completions/_tvmc   (a directory on $fpath)
    fish: tvmc completion fish > ~/.config/fish/completions/tvmc.fish
    """
    click.echo(script_text(shell), nl=False)
