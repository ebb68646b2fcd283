"""The command tree as completion scripts see it: commands, options, arguments, values."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import click

SCRIPT_NAMES = {"bash": "tvmc.bash", "zsh": "_tvmc", "fish": "tvmc.fish"}
HEADER = "tvmc {shell} completion, generated from the Click app by `make completions`; do not edit."


@dataclass(frozen=True)
class Values:
    """What completes a value: kind is 'none', 'choice', 'file' or 'dir'."""

    kind: str = "none"
    choices: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()


def value_completion(param_type: click.ParamType) -> Values:
    """How a shell should complete a value of `param_type`."""
    extensions = getattr(param_type, "extensions", None)
    if extensions:
        return Values("file", extensions=tuple(extensions))
    if isinstance(param_type, click.Choice):
        names = (c.name if isinstance(c, enum.Enum) else str(c) for c in param_type.choices)
        return Values("choice", choices=tuple(sorted(names)))
    if isinstance(param_type, click.Path) and param_type.dir_okay and not param_type.file_okay:
        return Values("dir")
    if isinstance(param_type, click.Path | click.File):
        return Values("file")
    if isinstance(param_type, click.types.BoolParamType):
        return Values("choice", choices=("false", "true"))
    return Values()


@dataclass(frozen=True)
class OptionSpec:
    """One option as the shells see it."""

    names: tuple[str, ...]
    takes_value: bool
    repeatable: bool
    help: str
    metavar: str
    values: Values


@dataclass(frozen=True)
class ArgumentSpec:
    """One positional argument; nargs -1 takes all the rest."""

    name: str
    nargs: int
    values: Values


@dataclass(frozen=True)
class CommandNode:
    """One command of the tree: its words from the root, the command and a context for it."""

    path: tuple[str, ...]
    command: click.Command
    context: click.Context

    @property
    def subcommands(self) -> dict[str, click.Command]:
        """Visible subcommands by name, sorted (empty for a plain command)."""
        if not isinstance(self.command, click.Group):
            return {}
        found = {}
        for name in self.command.list_commands(self.context):
            command = self.command.get_command(self.context, name)
            if command is not None and not command.hidden:
                found[name] = command
        return dict(sorted(found.items()))

    def params(self) -> list[click.Parameter]:
        """Parameters in declaration order, the help option included."""
        return self.command.get_params(self.context)

    def options(self) -> list[OptionSpec]:
        """Visible options in declaration order."""
        specs = []
        for param in self.params():
            if not isinstance(param, click.Option) or param.hidden:
                continue
            takes_value = not (param.is_flag or param.count)
            specs.append(
                OptionSpec(
                    names=tuple(param.opts) + tuple(param.secondary_opts),
                    takes_value=takes_value,
                    repeatable=bool(param.multiple or param.count),
                    help=one_line(param.help or ""),
                    metavar=metavar(param),
                    values=value_completion(param.type) if takes_value else Values(),
                )
            )
        return specs

    def arguments(self) -> list[ArgumentSpec]:
        """Positional arguments in order."""
        return [
            ArgumentSpec(param.name or "arg", param.nargs, value_completion(param.type))
            for param in self.params()
            if isinstance(param, click.Argument)
        ]


def walk_commands(root: click.Command, name: str = "tvmc") -> list[CommandNode]:
    """Every visible command, depth first: the root, then subcommands sorted by name."""
    nodes: list[CommandNode] = []

    def visit(command: click.Command, path: tuple[str, ...], parent: click.Context | None) -> None:
        settings = dict(command.context_settings)
        if parent is None:  # a fixed width keeps help text, so the generated files, machine-free
            settings.update(terminal_width=100, max_content_width=100)
        context = click.Context(command, info_name=path[-1], parent=parent, **settings)
        node = CommandNode(path, command, context)
        nodes.append(node)
        for sub_name, sub_command in node.subcommands.items():
            visit(sub_command, (*path, sub_name), context)

    visit(root, (name,), None)
    return nodes


def one_line(text: str) -> str:
    """Help text as one line: up to Click's \\f cut, whitespace collapsed."""
    return " ".join(text.split("\f")[0].replace("\b", " ").split())


def metavar(param: click.Parameter) -> str:
    """The value's name for messages: the declared metavar or the type's name, lower case."""
    if param.metavar:
        return param.metavar.lower()
    if isinstance(param.type, click.Path | click.File):
        return "directory" if value_completion(param.type).kind == "dir" else "file"
    if isinstance(param.type, click.Choice) and param.name:
        return param.name.replace("_", " ")
    return param.type.name.lower()


def short_help(command: click.Command) -> str:
    """A command's one-line help, as in the group's command list."""
    return one_line(command.get_short_help_str(limit=80))


def argument_slots(node: CommandNode) -> tuple[list[ArgumentSpec], ArgumentSpec | None]:
    """The argument at each position, and the one that takes the rest (nargs -1) if any."""
    slots: list[ArgumentSpec] = []
    rest = None
    for argument in node.arguments():
        if argument.nargs < 0:
            rest = rest or argument
        elif rest is None:
            slots.extend([argument] * argument.nargs)
    return slots, rest
