# tvmc bash completion, generated from the Click app by `make completions`; do not edit.
# Source it from ~/.bashrc or install it for bash-completion (docs/completions.md).

# Sets subcommands, options and value_options for the command whose words are "$1".
__tvmc_spec() {
    case "$1" in
        tvmc)
            subcommands=(compile completion load records run tune worker)
            options=(--config --help --verbose --version -h -v)
            value_options=(--config)
            ;;
        'tvmc compile')
            subcommands=()
            options=(--cross-compiler --cross-compiler-options --disabled-pass --dump-code --force --format --help --input-dtypes --input-shapes --json --model-format --num-threads --opt-level --output --print-pass-times --target --target-llvm-mattr --target-llvm-mcpu --target-llvm-mtriple --tuning-records --verbose -O -h -o -v)
            value_options=(--cross-compiler --cross-compiler-options --disabled-pass --dump-code --format --input-dtypes --input-shapes --model-format --num-threads --opt-level --output --target --target-llvm-mattr --target-llvm-mcpu --target-llvm-mtriple --tuning-records -O -o)
            ;;
        'tvmc completion')
            subcommands=()
            options=(--help --verbose -h -v)
            value_options=()
            ;;
        'tvmc load')
            subcommands=()
            options=(--dump --force --format --help --input-dtypes --input-shapes --json --model-format --output --verbose -h -o -v)
            value_options=(--format --input-dtypes --input-shapes --model-format --output -o)
            ;;
        'tvmc records')
            subcommands=(best plot show)
            options=(--help --verbose -h -v)
            value_options=()
            ;;
        'tvmc records best')
            subcommands=()
            options=(--format --help --json --output --verbose -h -o -v)
            value_options=(--format --output -o)
            ;;
        'tvmc records plot')
            subcommands=()
            options=(--format --help --json --output --verbose -h -o -v)
            value_options=(--format --output -o)
            ;;
        'tvmc records show')
            subcommands=()
            options=(--format --help --json --verbose -h -v)
            value_options=(--format)
            ;;
        'tvmc run')
            subcommands=()
            options=(--device --device-key --duration --end-to-end --fill-mode --format --help --inputs --json --min-repeat-ms --num-threads --number --outputs --print-time --print-top --profile --profile-out --remote-timeout --repeat --rpc-key --rpc-tracker --scheduler --verbose --warmup -h -i -o -v)
            value_options=(--device --device-key --duration --fill-mode --format --inputs --min-repeat-ms --num-threads --number --outputs --print-top --profile-out --remote-timeout --repeat --rpc-key --rpc-tracker --scheduler --warmup -i -o)
            ;;
        'tvmc tune')
            subcommands=()
            options=(--device-key --early-stopping --flush-cache --format --help --input-dtypes --input-shapes --json --min-repeat-ms --model-format --number --output --paired-rounds --parallel --priority --repeat --scheduler --target --target-llvm-mattr --target-llvm-mcpu --tasks --timeout --trials --tuner --tuning-records --verbose -h -o -v)
            value_options=(--device-key --early-stopping --format --input-dtypes --input-shapes --min-repeat-ms --model-format --number --output --paired-rounds --parallel --priority --repeat --scheduler --target --target-llvm-mattr --target-llvm-mcpu --tasks --timeout --trials --tuner --tuning-records -o)
            ;;
        'tvmc worker')
            subcommands=()
            options=(--build --connect-timeout --device-key --help --name --nthreads --scheduler --verbose -h -v)
            value_options=(--connect-timeout --device-key --name --nthreads --scheduler)
            ;;
    esac
}

# Completes "$3" as the value of option "$2" (@N: the Nth argument) of command "$1".
__tvmc_values() {
    local cur=$3
    COMPREPLY=()
    case "$1 $2" in
        'tvmc --config') __tvmc_files "$cur" ;;
        'tvmc compile -o'|'tvmc compile --output') __tvmc_files "$cur" '*.tar' ;;
        'tvmc compile --target') __tvmc_words "$cur" cuda llvm ;;
        'tvmc compile --model-format') __tvmc_words "$cur" onnx tvmc ;;
        'tvmc compile --tuning-records') __tvmc_files "$cur" '*.json' '*.log' ;;
        'tvmc compile --dump-code') __tvmc_words "$cur" asm graph kernel ll ptx ;;
        'tvmc compile --format') __tvmc_words "$cur" json text ;;
        'tvmc compile @0') __tvmc_files "$cur" '*.onnx' '*.tvmc' ;;
        'tvmc completion @0') __tvmc_words "$cur" bash fish zsh ;;
        'tvmc load -o'|'tvmc load --output') __tvmc_files "$cur" ;;
        'tvmc load --model-format') __tvmc_words "$cur" onnx tvmc ;;
        'tvmc load --format') __tvmc_words "$cur" json text ;;
        'tvmc load @0') __tvmc_files "$cur" '*.onnx' '*.tvmc' ;;
        'tvmc records best -o'|'tvmc records best --output') __tvmc_files "$cur" '*.json' '*.log' ;;
        'tvmc records best --format') __tvmc_words "$cur" json text ;;
        'tvmc records best @0') __tvmc_files "$cur" '*.json' '*.log' ;;
        'tvmc records plot -o'|'tvmc records plot --output') __tvmc_files "$cur" '*.svg' ;;
        'tvmc records plot --format') __tvmc_words "$cur" json text ;;
        'tvmc records plot @0') __tvmc_files "$cur" '*.json' '*.log' ;;
        'tvmc records show --format') __tvmc_words "$cur" json text ;;
        'tvmc records show @0') __tvmc_files "$cur" '*.json' '*.log' ;;
        'tvmc run --device') __tvmc_words "$cur" cpu cuda ;;
        'tvmc run -i'|'tvmc run --inputs') __tvmc_files "$cur" '*.npz' ;;
        'tvmc run -o'|'tvmc run --outputs') __tvmc_files "$cur" '*.npz' ;;
        'tvmc run --fill-mode') __tvmc_words "$cur" ones random zeros ;;
        'tvmc run --profile-out') __tvmc_files "$cur" '*.json' '*.svg' ;;
        'tvmc run --format') __tvmc_words "$cur" json text ;;
        'tvmc run @0') __tvmc_files "$cur" '*.tar' ;;
        'tvmc tune -o'|'tvmc tune --output') __tvmc_files "$cur" '*.json' '*.log' ;;
        'tvmc tune --tuning-records') __tvmc_files "$cur" '*.json' '*.log' ;;
        'tvmc tune --target') __tvmc_words "$cur" cuda llvm ;;
        'tvmc tune --model-format') __tvmc_words "$cur" onnx tvmc ;;
        'tvmc tune --tuner') __tvmc_words "$cur" ga gridsearch random xgb ;;
        'tvmc tune --format') __tvmc_words "$cur" json text ;;
        'tvmc tune @0') __tvmc_files "$cur" '*.onnx' '*.tvmc' ;;
    esac
}

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
