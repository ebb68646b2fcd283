"""The fish completion script."""

from __future__ import annotations

import re
from collections.abc import Sequence

import click

from tvmc.cli.completion.model import HEADER, Values, argument_slots, short_help, walk_commands

# --- fish --------------------------------------------------------------------------------------

FISH_LIBRARY = r"""
# Prints the command path (words from `tvmc`) and how many arguments it has, before the cursor.
function __tvmc_state
    set -l path tvmc
    set -l nargs 0
    set -l expect 0
    set -l only_args 0
    set -l words (commandline -opc)
    set -e words[1]
    for word in $words
        if test $expect = 1
            set expect 0
        else if test $only_args = 0; and test "$word" = --
            set only_args 1
        else if test $only_args = 0; and string match -q -- '-*' $word
            contains -- $word (__tvmc_value_options $path); and set expect 1
        else if test $nargs = 0; and contains -- $word (__tvmc_subcommands $path)
            set path $path $word
        else
            set nargs (math $nargs + 1)
        end
    end
    echo "$path"
    echo $nargs
end

# True when completing for the command whose words are $argv.
function __tvmc_command
    set -l state (__tvmc_state)
    test "$state[1]" = "$argv"
end

# True when completing argument $argv[1] (N, or N+ for N or later) of the command $argv[2..].
function __tvmc_argument
    set -l state (__tvmc_state)
    set -l index (string trim -r -c + -- $argv[1])
    test "$state[1]" = "$argv[2..-1]"; or return 1
    if string match -q -- '*+' $argv[1]
        test $state[2] -ge $index
    else
        test $state[2] -eq $index
    end
end

# Completes directories and the files whose names end in one of $argv.
function __tvmc_files
    set -l token (commandline -ct)
    for file in (complete -C "__fish_command_without_completions $token" | string split -f1 \t)
        if string match -q -- '*/' $file
            echo $file
            continue
        end
        for ext in $argv
            if string match -qi -- "*$ext" $file
                echo $file
                break
            end
        end
    end
end
"""


def fish_quote(text: str) -> str:
    """`text` single-quoted for fish."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_word(text: str) -> str:
    """`text` as one word of a fish list (backslash before specials)."""
    return re.sub(r"([^\w.,+=@%/-])", r"\\\1", text)


def fish_action(values: Values, option: bool) -> list[str]:
    """`complete` flags completing `values`, for an option's value or for an argument."""
    if values.kind == "file" and not values.extensions:
        return ["-r", "-F"] if option else ["-F"]
    flags = ["-x"] if option else []
    if values.kind == "choice":
        flags += ["-a", fish_quote(" ".join(fish_word(c) for c in values.choices))]
    elif values.kind == "file":
        flags += ["-a", fish_quote(f"(__tvmc_files {' '.join(map(fish_word, values.extensions))})")]
    elif values.kind == "dir":
        flags += ["-a", fish_quote("(__fish_complete_directories)")]
    return flags


def fish_switch(function: str, comment: str, branches: dict[str, Sequence[str]]) -> str:
    """A function printing, one a line, the words listed for the command path in $argv."""
    lines = [f"# {comment}", f"function {function}", '    switch "$argv"']
    for path, words in branches.items():
        if words:
            lines += [
                f"        case {fish_quote(path)}",
                f"            printf '%s\\n' {' '.join(map(fish_quote, words))}",
            ]
    return "\n".join([*lines, "    end", "end"])


def fish_script(root: click.Command) -> str:
    """The fish completion script: a generic command-line walker and one line per completion."""
    nodes = walk_commands(root)
    subcommands = {" ".join(n.path): list(n.subcommands) for n in nodes}
    value_options = {
        " ".join(n.path): sorted(name for o in n.options() if o.takes_value for name in o.names)
        for n in nodes
    }
    lines = ["complete -c tvmc -f  # no file names unless a completion below asks for them"]
    for node in nodes:
        path = " ".join(node.path)
        lines.append(f"\n# {path}")
        for sub, command in node.subcommands.items():
            condition = fish_quote(f"__tvmc_argument 0 {path}")
            lines.append(
                f"complete -c tvmc -n {condition} -a {fish_quote(fish_word(sub))} "
                f"-d {fish_quote(short_help(command))}"
            )
        for option in node.options():
            flags = []
            for name in option.names:
                if name.startswith("--"):
                    flags += ["-l", fish_quote(name[2:])]
                elif len(name) == 2:
                    flags += ["-s", fish_quote(name[1:])]
                else:
                    flags += ["-o", fish_quote(name[1:])]
            if option.takes_value:
                flags += fish_action(option.values, option=True)
            if option.help:
                flags += ["-d", fish_quote(option.help)]
            lines.append(
                f"complete -c tvmc -n {fish_quote(f'__tvmc_command {path}')} {' '.join(flags)}"
            )
        slots, rest = argument_slots(node)
        positions = [(str(i), a) for i, a in enumerate(slots)]
        if rest is not None:
            positions.append((f"{len(slots)}+", rest))
        for index, argument in positions:
            flags = fish_action(argument.values, option=False)
            if flags:
                condition = fish_quote(f"__tvmc_argument {index} {path}")
                lines.append(f"complete -c tvmc -n {condition} {' '.join(flags)}")
    return (
        "\n".join(
            [
                f"# {HEADER.format(shell='fish')}",
                "# Copy it to ~/.config/fish/completions/tvmc.fish (docs/completions.md).",
                fish_switch("__tvmc_subcommands", "Subcommands of the command $argv.", subcommands),
                "",
                fish_switch(
                    "__tvmc_value_options",
                    "Options of the command $argv that take a value.",
                    value_options,
                ),
                FISH_LIBRARY,
                *lines,
            ]
        )
        + "\n"
    )
