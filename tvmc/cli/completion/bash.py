"""The bash completion script."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import click

from tvmc.cli.completion.model import HEADER, Values, argument_slots, walk_commands

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
        "# Source it from ~/.bashrc or install it for bash-completion (docs/completions.md).\n"
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
