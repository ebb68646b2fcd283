"""Static shell completions for bash, zsh and fish, generated from the Click app.

`python -m tvmc.cli.completion DIR` (`make completions`) writes DIR/tvmc.bash, DIR/_tvmc (zsh) and
DIR/tvmc.fish by walking the command tree; `--check DIR` only compares. The scripts are static: no
Python starts on TAB (importing tvmc takes about a second). They know subcommands (with their short
help), options (long and short; flags apart from options taking a value), arguments, and values:
`click.Choice` values, directories for `click.Path(file_okay=False)`, files for other paths.

Declaring file extensions: give a path parameter the type `FileWithExt`, and shells complete only
files with those extensions (and directories, to walk into); docs/cli.md lists them too:

    @click.argument("model_file", type=FileWithExt((".onnx", ".tvmc")))
    @click.option("--tuning-records", type=FileWithExt((".json",), dir_okay=False))

Any parameter type with an `extensions` tuple of ".ext" strings is treated the same way.
"""

from __future__ import annotations

import argparse
import enum
import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

SCRIPT_NAMES = {"bash": "tvmc.bash", "zsh": "_tvmc", "fish": "tvmc.fish"}
HEADER = "tvmc {shell} completion, generated from the Click app by `make completions`; do not edit."


class FileWithExt(click.Path):
    """A `click.Path` whose completions (and docs) offer only files with the given extensions."""

    def __init__(self, extensions: Sequence[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        normalized = ["." + ext.lstrip(".").lower() for ext in extensions]
        self.extensions: tuple[str, ...] = tuple(dict.fromkeys(normalized))

    def to_info_dict(self) -> dict[str, Any]:
        """Click's info dict plus the extensions."""
        return {**super().to_info_dict(), "extensions": self.extensions}


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


# --- bash --------------------------------------------------------------------------------------

BASH_LIBRARY = r"""
# Completes "$1" with the words that follow it.
__tvmc_words() {
    local cur=$1 word
    shift
    COMPREPLY=()
    for word in "$@"; do
        [[ $word == "$cur"* ]] && COMPREPLY+=("$word")
    done
}

# Completes "$1" with files matching the glob patterns that follow (none: any file) and directories.
__tvmc_files() {
    local cur=$1 pattern IFS=$'\n'
    shift
    compopt -o filenames 2>/dev/null
    if (($# == 0)); then
        COMPREPLY=($(compgen -f -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -d -- "$cur"))
    for pattern in "$@"; do
        COMPREPLY+=($(compgen -f -X '!'"$pattern" -- "$cur"))
    done
}

# Completes "$1" with directories.
__tvmc_dirs() {
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -d -- "$1"))
}

# True when "$1" is one of the words that follow it.
__tvmc_has() {
    local word=$1
    shift
    [[ " $* " == *" $word "* ]]
}

_tvmc() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local path=tvmc nargs=0 expect= only_args= i word
    local -a subcommands options value_options
    __tvmc_spec "$path"
    # Walk the words before the cursor: enter subcommands, skip option values, count arguments.
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if [[ $word == = ]]; then
            continue  # `--opt=value` split at '=' by COMP_WORDBREAKS; the value follows
        elif [[ -n $expect ]]; then
            expect=
        elif [[ -z $only_args && $word == -- ]]; then
            only_args=1
        elif [[ -z $only_args && $word == -* ]]; then
            __tvmc_has "$word" "${value_options[@]}" && expect=1
        elif ((nargs == 0)) && __tvmc_has "$word" "${subcommands[@]}"; then
            path="$path $word"
            __tvmc_spec "$path"
        else
            nargs=$((nargs + 1))
        fi
    done
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]]; then
        prev=${COMP_WORDS[COMP_CWORD - 2]}
    fi
    if [[ -z $only_args && $prev == -* ]] && __tvmc_has "$prev" "${value_options[@]}"; then
        __tvmc_values "$path" "$prev" "$cur"
    elif [[ -z $only_args && $cur == -* ]]; then
        __tvmc_words "$cur" "${options[@]}"
    elif ((nargs == 0 && ${#subcommands[@]} > 0)); then
        __tvmc_words "$cur" "${subcommands[@]}"
    else
        __tvmc_values "$path" "@$nargs" "$cur"
    fi
}

complete -F _tvmc tvmc
"""


def bash_words(words: Sequence[str]) -> str:
    """Words quoted for a bash command line."""
    return " ".join(shlex.quote(word) for word in words)


def bash_action(values: Values) -> str:
    """The bash call that completes `values` from "$cur", or '' when nothing does."""
    if values.kind == "choice":
        return f'__tvmc_words "$cur" {bash_words(values.choices)}'
    if values.kind == "file":
        return f'__tvmc_files "$cur" {bash_words("*" + ext for ext in values.extensions)}'.strip()
    if values.kind == "dir":
        return '__tvmc_dirs "$cur"'
    return ""


def bash_script(root: click.Command) -> str:
    """The bash completion script: per-command data as case branches over a generic walker."""
    spec_cases, value_cases = [], []
    for node in walk_commands(root):
        path = " ".join(node.path)
        options = node.options()
        names = sorted(name for option in options for name in option.names)
        value_names = sorted(n for option in options if option.takes_value for n in option.names)
        spec_cases.append(
            f"        {shlex.quote(path)})\n"
            f"            subcommands=({bash_words(node.subcommands)})\n"
            f"            options=({bash_words(names)})\n"
            f"            value_options=({bash_words(value_names)})\n"
            "            ;;"
        )
        for option in options:
            action = bash_action(option.values)
            if option.takes_value and action:
                labels = "|".join(shlex.quote(f"{path} {name}") for name in option.names)
                value_cases.append(f"        {labels}) {action} ;;")
        slots, rest = argument_slots(node)
        for index, argument in enumerate(slots):
            action = bash_action(argument.values)
            if action:
                value_cases.append(f"        {shlex.quote(f'{path} @{index}')}) {action} ;;")
        if rest is not None and bash_action(rest.values):
            value_cases.append(
                f"        {shlex.quote(path + ' @')}*) {bash_action(rest.values)} ;;"
            )
    return (
        f"# {HEADER.format(shell='bash')}\n"
        "# Source it from ~/.bashrc or install it for bash-completion (completions/README.md).\n"
        "\n"
        '# Sets subcommands, options and value_options for the command whose words are "$1".\n'
        "__tvmc_spec() {\n"
        '    case "$1" in\n' + "\n".join(spec_cases) + "\n    esac\n}\n"
        "\n"
        '# Completes "$3" as the value of option "$2" (@N: the Nth argument) of command "$1".\n'
        "__tvmc_values() {\n"
        "    local cur=$3\n"
        "    COMPREPLY=()\n"
        '    case "$1 $2" in\n' + "\n".join(value_cases) + "\n    esac\n}\n" + BASH_LIBRARY
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
        "# Put it in a directory on $fpath, before compinit runs (completions/README.md).\n\n"
        + "\n\n".join(functions)
        + "\n"
        + ZSH_FOOTER
    )


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
                "# Copy it to ~/.config/fish/completions/tvmc.fish (completions/README.md).",
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
    from tvmc.cli.main import cli  # not at the top: main imports this module (for FileWithExt)

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
