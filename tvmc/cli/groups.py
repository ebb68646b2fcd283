"""Click groups whose bare invocation is a usage error showing the help (`tvmc`, `tvmc records`).

Kept apart from `tvmc.cli.types` (which imports the driver) so that `tvmc --help` stays light.
"""

from __future__ import annotations

from typing import Any

import click


class MissingCommand(click.UsageError):
    """A group run without a subcommand: its help, then `Error: Missing command.` (exit 2)."""

    def __init__(self, ctx: click.Context) -> None:
        super().__init__("Missing command.", ctx)

    def show(self, file: Any = None) -> None:
        help_text = self.ctx.get_help() if self.ctx else ""
        click.echo(f"{help_text}\n\nError: {self.format_message()}", file=file, err=True)


class CommandGroup(click.Group):
    """click.Group whose bare invocation is a usage error that shows the help (Click prints the
    help alone there, with exit 2 and no message)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            raise MissingCommand(ctx)
        return super().parse_args(ctx, args)
