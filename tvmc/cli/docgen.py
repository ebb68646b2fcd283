"""The CLI reference (docs/cli.md), generated from the Click app so it cannot drift from the code.

`python -m tvmc.cli.docgen docs/cli.md` (`make docs`) writes it; `--check` only compares and fails
when the file is out of date. For the group and every subcommand: usage, help, options (type or
choices, default, help, environment variable), arguments and subcommands; then the environment
variables declared in `tvmc/config.py`.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import re
import sys
from collections.abc import Sequence
from types import ModuleType

import click

import tvmc.config as config
from tvmc.cli.completion import CommandNode, walk_commands
from tvmc.cli.main import cli

TITLE = "# tvmc command-line reference"
NOTE = (
    "Generated from the Click app by `make docs` (`python -m tvmc.cli.docgen docs/cli.md`); "
    "do not edit by hand."
)


def cell(text: str) -> str:
    """`text` made safe for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    """`text` as inline code (backticks inside are fenced with more backticks)."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def help_markdown(text: str) -> str:
    """Click help text as Markdown: paragraphs rewrapped, \\b blocks kept verbatim, cut at \\f."""
    text = inspect.cleandoc(text.split("\f")[0])
    blocks = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = paragraph.splitlines()
        if lines and lines[0].strip() == "\b":
            blocks.append("```text\n" + "\n".join(lines[1:]) + "\n```")
        elif lines:
            blocks.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(blocks)


def anchor(path: Sequence[str]) -> str:
    """The GitHub heading anchor of a command's section."""
    return "-".join(path).lower()


def choice_names(param_type: click.Choice) -> list[str]:
    """The choices as the user types them, in declared order."""
    return [c.name if isinstance(c, enum.Enum) else str(c) for c in param_type.choices]


def type_text(param: click.Parameter) -> str:
    """The value a parameter takes: flag, count, choices, file (with extensions) or a type name."""
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    if isinstance(param, click.Option) and param.count:
        return "count"
    param_type = param.type
    extensions = getattr(param_type, "extensions", None)
    if isinstance(param_type, click.Choice):
        text = "one of " + ", ".join(code(c) for c in choice_names(param_type))
    elif extensions:
        text = "file (" + ", ".join(code(ext) for ext in extensions) + ")"
    elif isinstance(param_type, click.Path):
        text = {(True, False): "file", (False, True): "directory"}.get(
            (param_type.file_okay, param_type.dir_okay), "path"
        )
    elif isinstance(param_type, click.File):
        text = "file"
    else:
        text = param_type.name
    if param.nargs > 1:
        text += f" ×{param.nargs}"
    if param.multiple:
        text += ", repeatable"
    return text


def default_text(param: click.Parameter) -> str:
    """The default as inline code, 'required', or '' when there is none worth showing."""
    if param.required:
        return "required"
    default = param.to_info_dict().get("default")
    if callable(default):
        return "(computed)"
    if default is None or default is False or default == () or default == []:
        return ""
    if isinstance(param, click.Option) and param.count and default == 0:
        return ""
    if isinstance(param, click.Option) and param.secondary_opts and isinstance(default, bool):
        return code(param.opts[0] if default else param.secondary_opts[0])
    if isinstance(default, list | tuple):
        return ", ".join(code(str(d)) for d in default)
    return code(str(default))


def envvars(param: click.Parameter, context: click.Context) -> list[str]:
    """Environment variables that set this parameter (declared, or from auto_envvar_prefix)."""
    if param.envvar:
        return [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
    prefix = context.auto_envvar_prefix
    if isinstance(param, click.Option) and param.allow_from_autoenv and prefix and param.name:
        return [f"{prefix}_{param.name.upper()}"]
    return []


def options_table(node: CommandNode) -> list[str]:
    """The options of one command as a Markdown table."""
    rows = ["| Option | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for param in node.params():
        if not isinstance(param, click.Option) or param.hidden:
            continue
        names = ", ".join(code(name) for name in param.opts + param.secondary_opts)
        description = cell(param.help or "")
        variables = envvars(param, node.context)
        if variables:
            description += " Environment: " + ", ".join(code(v) for v in variables) + "."
        rows.append(
            f"| {names} | {cell(type_text(param))} | {cell(default_text(param))} | "
            f"{description.strip()} |"
        )
    return rows


def arguments_table(node: CommandNode) -> list[str]:
    """The positional arguments of one command as a Markdown table, or nothing."""
    arguments = [p for p in node.params() if isinstance(p, click.Argument)]
    if not arguments:
        return []
    rows = ["| Argument | Type | Required |", "| --- | --- | --- |"]
    for argument in arguments:
        name = argument.make_metavar(node.context)
        required = "yes" if argument.required else "no"
        rows.append(f"| {code(name)} | {cell(type_text(argument))} | {required} |")
    return rows


def command_section(node: CommandNode) -> list[str]:
    """The Markdown section of one command."""
    level = "#" * min(len(node.path) + 1, 6)
    lines = [f"{level} {' '.join(node.path)}", "", "```text", node.command.get_usage(node.context)]
    lines += ["```", ""]
    if node.command.help:
        lines += [help_markdown(node.command.help), ""]
    arguments = arguments_table(node)
    if arguments:
        lines += ["**Arguments**", "", *arguments, ""]
    lines += ["**Options**", "", *options_table(node), ""]
    if node.subcommands:
        lines += ["**Commands**", "", "| Command | Description |", "| --- | --- |"]
        for name, command in node.subcommands.items():
            link = f"[{code(name)}](#{anchor((*node.path, name))})"
            lines.append(f"| {link} | {cell(command.get_short_help_str(limit=120))} |")
        lines.append("")
    return lines


def environment_variables(module: ModuleType) -> list[tuple[str, str]]:
    """(variable, description) for each `*_ENV` name in `module`, from the comment above it."""
    source = inspect.getsource(module).splitlines()
    found = []
    for index, line in enumerate(source):
        match = re.match(r"([A-Z][A-Z0-9_]*_ENV)\s*=", line)
        if not match or not isinstance(getattr(module, match.group(1), None), str):
            continue
        comment: list[str] = []
        for previous in reversed(source[:index]):
            if not previous.startswith("#"):
                break
            comment.insert(0, previous.lstrip("#").strip())
        found.append((getattr(module, match.group(1)), " ".join(comment)))
    return sorted(found)


def render(root: click.Command, name: str = "tvmc", environment: ModuleType = config) -> str:
    """The whole reference as Markdown; `environment` declares the `*_ENV` variables."""
    nodes = walk_commands(root, name)
    contents = ", ".join(f"[{code(' '.join(n.path))}](#{anchor(n.path)})" for n in nodes)
    lines = [
        TITLE,
        "",
        NOTE,
        "",
        f"Commands: {contents}; [environment variables](#environment).",
        "",
    ]
    for node in nodes:
        lines += command_section(node)
    lines += ["## Environment", "", "| Variable | Description |", "| --- | --- |"]
    lines += [f"| {code(var)} | {cell(text)} |" for var, text in environment_variables(environment)]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with --check compare) the CLI reference."""
    parser = argparse.ArgumentParser(prog="python -m tvmc.cli.docgen", description=__doc__)
    parser.add_argument("output", help="the Markdown file, e.g. docs/cli.md")
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    args = parser.parse_args(argv)
    text = render(cli)
    if args.check:
        try:
            with open(args.output, encoding="utf-8", newline="") as f:
                current = f.read()
        except OSError:
            current = None
        if current != text:
            print(f"{args.output} is out of date; run `make docs`", file=sys.stderr)
            return 1
        return 0
    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
