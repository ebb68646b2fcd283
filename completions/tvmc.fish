# tvmc fish completion, generated from the Click app by `make completions`; do not edit.
# Copy it to ~/.config/fish/completions/tvmc.fish (completions/README.md).
# Subcommands of the command $argv.
function __tvmc_subcommands
    switch "$argv"
        case 'tvmc'
            printf '%s\n' 'load'
    end
end

# Options of the command $argv that take a value.
function __tvmc_value_options
    switch "$argv"
        case 'tvmc'
            printf '%s\n' '--config'
        case 'tvmc load'
            printf '%s\n' '--format' '--input-dtypes' '--input-shapes' '--model-format' '--output' '-o'
    end
end

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

complete -c tvmc -f  # no file names unless a completion below asks for them

# tvmc
complete -c tvmc -n '__tvmc_argument 0 tvmc' -a 'load' -d 'Load MODEL_FILE (ONNX or .tvmc), fold its constants and show its inputs,...'
complete -c tvmc -n '__tvmc_command tvmc' -l 'version' -d 'Show the version and exit.'
complete -c tvmc -n '__tvmc_command tvmc' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks.'
complete -c tvmc -n '__tvmc_command tvmc' -l 'config' -r -F -d 'JSON file whose keys set option defaults; flags on the command line win.'
complete -c tvmc -n '__tvmc_command tvmc' -s 'h' -l 'help' -d 'Show this message and exit.'

# tvmc load
complete -c tvmc -n '__tvmc_command tvmc load' -s 'o' -l 'output' -r -F -d 'Save the loaded model (.tvmc).'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'dump' -d 'Print the whole graph IR.'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'input-shapes' -x -d 'Static input shapes, e.g. \'data:[1,3,224,224] mask:[1,128]\' (default: the model\'s).'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'input-dtypes' -x -d 'Input dtypes, e.g. \'input_ids:int64 mask:int32\' (default: as in the model).'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'model-format' -x -a 'onnx tvmc' -d 'Model format; guessed from the extension (.onnx, .tvmc) when omitted.'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'format' -x -a 'json text' -d 'Output format: human text, or one JSON document on stdout for pipelines.'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'json' -d 'Shorthand for --format json.'
complete -c tvmc -n '__tvmc_command tvmc load' -s 'h' -l 'help' -d 'Show this message and exit.'
complete -c tvmc -n '__tvmc_argument 0 tvmc load' -a '(__tvmc_files .onnx .tvmc)'
