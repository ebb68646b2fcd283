"""The zsh completion script."""

from __future__ import annotations

import re
from collections.abc import Sequence

import click

from tvmc.cli.completion.model import (
    HEADER,
    CommandNode,
    OptionSpec,
    Values,
    argument_slots,
    short_help,
    walk_commands,
)

# --- zsh ---------------------------------------------------------------------------------------

ZSH_FOOTER = """
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _tvmc "$@"  # autoloaded from $fpath
else
    compdef _tvmc tvmc  # sourced after compinit
fi
"""


def zsh_quote(text: str) -> str:
    """`text` single-quoted for zsh."""
    return "'" + text.replace("'", "'\\''") + "'"


def zsh_escape(text: str, specials: str) -> str:
    """`text` with backslashes before `specials` (and before backslashes)."""
    return "".join("\\" + c if c in specials or c == "\\" else c for c in text)


def zsh_action(values: Values) -> str:
    """The _arguments action completing `values`."""
    if values.kind == "choice":
        return "(" + " ".join(zsh_escape(c, " ()[]{}'\"$`:;|&<>*?~") for c in values.choices) + ")"
    if values.kind == "file" and values.extensions:
        globs = [zsh_escape(ext.lstrip("."), "()[]|*?~#^'\"") for ext in values.extensions]
        pattern = globs[0] if len(globs) == 1 else "(" + "|".join(globs) + ")"
        return f'_files -g "*.{pattern}"'
    return {"file": "_files", "dir": "_files -/"}.get(values.kind, " ")


def zsh_option(option: OptionSpec) -> str:
    """One _arguments spec (brace-expanded when the option has several names)."""
    explain = "[" + zsh_escape(option.help, "[]") + "]"
    if option.takes_value:
        explain += f":{zsh_escape(option.metavar, ':')}:{zsh_action(option.values)}"
    suffixes = [("=" if n.startswith("--") else "+" if len(n) == 2 else "") for n in option.names]
    names = [n + s if option.takes_value else n for n, s in zip(option.names, suffixes)]
    repeat = "*" if option.repeatable else ""
    if len(names) == 1:
        return zsh_quote(repeat + names[0] + explain)
    exclusion = repeat or "(" + " ".join(option.names) + ")"
    return zsh_quote(exclusion) + "{" + ",".join(names) + "}" + zsh_quote(explain)


def zsh_function_name(path: Sequence[str]) -> str:
    """_tvmc for the root, _tvmc__load for `tvmc load`."""
    return "_" + "__".join(re.sub(r"\W", "_", word) for word in path)


def zsh_function(node: CommandNode) -> str:
    """The completion function of one command."""
    specs = [zsh_option(option) for option in node.options()]
    slots, rest = argument_slots(node)
    subcommands = node.subcommands
    if subcommands:
        specs += ["': :->command'", "'*:: :->args'"]
    else:
        specs += [zsh_quote(f":{zsh_escape(a.name, ':')}:{zsh_action(a.values)}") for a in slots]
        if rest is not None:
            specs.append(zsh_quote(f"*:{zsh_escape(rest.name, ':')}:{zsh_action(rest.values)}"))
    name = zsh_function_name(node.path)
    lines = [f"{name}() {{"]
    if subcommands:
        lines += [
            "    local curcontext=$curcontext state state_descr line ret=1",
            "    local -A opt_args",
        ]
        call = "    _arguments -C -s -S"
    else:
        call = "    _arguments -s -S"
    lines.append(" \\\n        ".join([call, *specs]) + (" && ret=0" if subcommands else ""))
    if subcommands:
        described = [
            zsh_quote(zsh_escape(sub, ":") + ":" + short_help(cmd))
            for sub, cmd in subcommands.items()
        ]
        lines += [
            "    case $state in",
            "        command)",
            "            local -a commands=(",
            *[f"                {entry}" for entry in described],
            "            )",
            f"            _describe -t commands {zsh_quote(' '.join(node.path) + ' command')} "
            "commands && ret=0",
            "            ;;",
            "        args)",
            f'            curcontext="${{curcontext%:*:*}}:{"-".join(node.path)}-$words[1]:"',
            "            case $words[1] in",
            *[
                f"                {zsh_quote(sub)}) {zsh_function_name((*node.path, sub))} "
                "&& ret=0 ;;"
                for sub in subcommands
            ],
            "            esac",
            "            ;;",
            "    esac",
            "    return ret",
        ]
    lines.append("}")
    return "\n".join(lines)


def zsh_script(root: click.Command) -> str:
    """The zsh completion script (#compdef file): one _arguments function per command."""
    functions = [zsh_function(node) for node in walk_commands(root)]
    return (
        f"#compdef tvmc\n# {HEADER.format(shell='zsh')}\n"
        "# Put it in a directory on $fpath, before compinit runs (docs/completions.md).\n\n"
        + "\n\n".join(functions)
        + "\n"
        + ZSH_FOOTER
    )
