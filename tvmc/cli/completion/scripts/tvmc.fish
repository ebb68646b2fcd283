# tvmc fish completion, generated from the Click app by `make completions`; do not edit.
# Copy it to ~/.config/fish/completions/tvmc.fish (docs/completions.md).
# Subcommands of the command $argv.
function __tvmc_subcommands
    switch "$argv"
        case 'tvmc'
            printf '%s\n' 'compile' 'completion' 'load' 'records' 'run' 'tune' 'worker'
        case 'tvmc records'
            printf '%s\n' 'best' 'plot' 'show'
    end
end

# Options of the command $argv that take a value.
function __tvmc_value_options
    switch "$argv"
        case 'tvmc'
            printf '%s\n' '--config'
        case 'tvmc compile'
            printf '%s\n' '--cross-compiler' '--cross-compiler-options' '--disabled-pass' '--dump-code' '--format' '--input-dtypes' '--input-shapes' '--model-format' '--num-threads' '--opt-level' '--output' '--target' '--target-llvm-mattr' '--target-llvm-mcpu' '--target-llvm-mtriple' '--tuning-records' '-O' '-o'
        case 'tvmc load'
            printf '%s\n' '--format' '--input-dtypes' '--input-shapes' '--model-format' '--output' '-o'
        case 'tvmc records best'
            printf '%s\n' '--format' '--output' '-o'
        case 'tvmc records plot'
            printf '%s\n' '--format' '--output' '-o'
        case 'tvmc records show'
            printf '%s\n' '--format'
        case 'tvmc run'
            printf '%s\n' '--device' '--device-key' '--duration' '--fill-mode' '--format' '--inputs' '--min-repeat-ms' '--num-threads' '--number' '--outputs' '--print-top' '--profile-out' '--remote-timeout' '--repeat' '--rpc-key' '--rpc-tracker' '--scheduler' '--warmup' '-i' '-o'
        case 'tvmc tune'
            printf '%s\n' '--device-key' '--early-stopping' '--format' '--input-dtypes' '--input-shapes' '--min-repeat-ms' '--model-format' '--number' '--output' '--paired-rounds' '--parallel' '--priority' '--repeat' '--scheduler' '--target' '--target-llvm-mattr' '--target-llvm-mcpu' '--tasks' '--timeout' '--trials' '--tuner' '--tuning-records' '-o'
        case 'tvmc worker'
            printf '%s\n' '--connect-timeout' '--device-key' '--name' '--nthreads' '--scheduler'
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
complete -c tvmc -n '__tvmc_argument 0 tvmc' -a 'compile' -d 'Compile MODEL_FILE (ONNX or .tvmc) for a target into a package (.tar) that...'
complete -c tvmc -n '__tvmc_argument 0 tvmc' -a 'completion' -d 'Print the completion script for bash, zsh or fish (to source or install).'
complete -c tvmc -n '__tvmc_argument 0 tvmc' -a 'load' -d 'Load MODEL_FILE (ONNX or .tvmc), fold its constants and show its inputs,...'
complete -c tvmc -n '__tvmc_argument 0 tvmc' -a 'records' -d 'Inspect and reduce tuning records files (AutoTVM v0.2 lines, as `tvmc tune`...'
complete -c tvmc -n '__tvmc_argument 0 tvmc' -a 'run' -d 'Run PACKAGE_FILE (made by `tvmc compile`) once, and time or profile it when...'
complete -c tvmc -n '__tvmc_argument 0 tvmc' -a 'tune' -d 'Tune the kernels of MODEL_FILE (ONNX or .tvmc), appending records for `tvmc...'
complete -c tvmc -n '__tvmc_argument 0 tvmc' -a 'worker' -d 'Serve a Dask scheduler for `tvmc tune --scheduler` and `tvmc run --scheduler`...'
complete -c tvmc -n '__tvmc_command tvmc' -l 'version' -d 'Show the version and exit.'
complete -c tvmc -n '__tvmc_command tvmc' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks.'
complete -c tvmc -n '__tvmc_command tvmc' -l 'config' -r -F -d 'JSON file whose keys set option defaults; flags on the command line win.'
complete -c tvmc -n '__tvmc_command tvmc' -s 'h' -l 'help' -d 'Show this message and exit.'

# tvmc compile
complete -c tvmc -n '__tvmc_command tvmc compile' -s 'o' -l 'output' -x -a '(__tvmc_files .tar)' -d 'The package to write (a .tar).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'target' -x -a 'cuda llvm' -d 'Target string: \'llvm\' (this CPU), \'llvm -mcpu=skylake-avx512\', \'llvm -mtriple=aarch64-linux-gnu -mattr=+neon\', \'cuda\' (this GPU, else sm_90), \'cuda -arch=sm_90\'.'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'target-llvm-mcpu' -x -d 'LLVM CPU name (default: this CPU).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'target-llvm-mattr' -x -d 'LLVM features, e.g. \'+avx2,-avx512f\'.'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'target-llvm-mtriple' -x -d 'LLVM target triple (cross-compile).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'cross-compiler' -x -d 'C compiler that links mod.so for a cross target, e.g. aarch64-linux-gnu-gcc (without it such a package holds mod.o only).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'cross-compiler-options' -x -d 'Options for --cross-compiler, one quoted string, e.g. \'--sysroot=/opt/arm64\'.'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'num-threads' -x -d 'Threads the package\'s runs will use (the machine that runs it): the kernels\' default schedules and whether a batch\'s images run side by side are chosen for them (default: $TVMC_NUM_THREADS, else this machine\'s physical cores).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'input-shapes' -x -d 'Static input shapes, e.g. \'data:[1,3,224,224] mask:[1,128]\' (default: the model\'s).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'input-dtypes' -x -d 'Input dtypes, e.g. \'input_ids:int64 mask:int32\' (default: as in the model).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'model-format' -x -a 'onnx tvmc' -d 'Model format; guessed from the extension (.onnx, .tvmc) when omitted.'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'tuning-records' -x -a '(__tvmc_files .json .log)' -d 'Records from `tvmc tune`: the best config per workload is applied; tasks without one keep the default schedule.'
complete -c tvmc -n '__tvmc_command tvmc compile' -s 'O' -l 'opt-level' -x -d 'Optimization level: 0 no fusion, 3 everything.'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'disabled-pass' -x -d 'A pass to skip (repeatable, or comma-separated), e.g. fuse, fold-batch-norm.'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'dump-code' -x -a 'asm graph kernel ll ptx' -d 'Also write code as text to OUTPUT.FMT (repeatable, or comma-separated): kernel (kernel IR), ll (LLVM IR), asm (assembly), ptx (cuda targets), graph (the optimized graph).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'print-pass-times' -d 'Also print the time of every pass (import through code generation and link).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'force' -d 'Replace the output even if it is not a tvmc package (by default only a package is replaced, never the model or another file).'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'format' -x -a 'json text' -d 'Output format: human text, or one JSON document on stdout for pipelines.'
complete -c tvmc -n '__tvmc_command tvmc compile' -l 'json' -d 'Shorthand for --format json.'
complete -c tvmc -n '__tvmc_command tvmc compile' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc compile' -s 'h' -l 'help' -d 'Show this message and exit.'
complete -c tvmc -n '__tvmc_argument 0 tvmc compile' -a '(__tvmc_files .onnx .tvmc)'

# tvmc completion
complete -c tvmc -n '__tvmc_command tvmc completion' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc completion' -s 'h' -l 'help' -d 'Show this message and exit.'
complete -c tvmc -n '__tvmc_argument 0 tvmc completion' -a 'bash fish zsh'

# tvmc load
complete -c tvmc -n '__tvmc_command tvmc load' -s 'o' -l 'output' -r -F -d 'Save the loaded model (.tvmc).'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'force' -d 'With -o: replace the file even if it is not a saved tvmc model (by default only a saved model is replaced, never the model read or another file).'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'dump' -d 'Print the whole graph IR.'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'input-shapes' -x -d 'Static input shapes, e.g. \'data:[1,3,224,224] mask:[1,128]\' (default: the model\'s).'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'input-dtypes' -x -d 'Input dtypes, e.g. \'input_ids:int64 mask:int32\' (default: as in the model).'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'model-format' -x -a 'onnx tvmc' -d 'Model format; guessed from the extension (.onnx, .tvmc) when omitted.'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'format' -x -a 'json text' -d 'Output format: human text, or one JSON document on stdout for pipelines.'
complete -c tvmc -n '__tvmc_command tvmc load' -l 'json' -d 'Shorthand for --format json.'
complete -c tvmc -n '__tvmc_command tvmc load' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc load' -s 'h' -l 'help' -d 'Show this message and exit.'
complete -c tvmc -n '__tvmc_argument 0 tvmc load' -a '(__tvmc_files .onnx .tvmc)'

# tvmc records
complete -c tvmc -n '__tvmc_argument 0 tvmc records' -a 'best' -d 'Keep only the best error-free record per workload and target of RECORDS_FILE.'
complete -c tvmc -n '__tvmc_argument 0 tvmc records' -a 'plot' -d 'Draw best GFLOP/s so far against trials, one line per task of RECORDS_FILE,...'
complete -c tvmc -n '__tvmc_argument 0 tvmc records' -a 'show' -d 'Per workload of RECORDS_FILE: trials, the best time and GFLOP/s, what compile...'
complete -c tvmc -n '__tvmc_command tvmc records' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc records' -s 'h' -l 'help' -d 'Show this message and exit.'

# tvmc records best
complete -c tvmc -n '__tvmc_command tvmc records best' -s 'o' -l 'output' -x -a '(__tvmc_files .json .log)' -d 'The file to write (replaced; it may be RECORDS_FILE itself).'
complete -c tvmc -n '__tvmc_command tvmc records best' -l 'format' -x -a 'json text' -d 'Output format: human text, or one JSON document on stdout for pipelines.'
complete -c tvmc -n '__tvmc_command tvmc records best' -l 'json' -d 'Shorthand for --format json.'
complete -c tvmc -n '__tvmc_command tvmc records best' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc records best' -s 'h' -l 'help' -d 'Show this message and exit.'
complete -c tvmc -n '__tvmc_argument 0 tvmc records best' -a '(__tvmc_files .json .log)'

# tvmc records plot
complete -c tvmc -n '__tvmc_command tvmc records plot' -s 'o' -l 'output' -x -a '(__tvmc_files .svg)' -d 'The SVG file to write (replaces only an SVG).'
complete -c tvmc -n '__tvmc_command tvmc records plot' -l 'format' -x -a 'json text' -d 'Output format: human text, or one JSON document on stdout for pipelines.'
complete -c tvmc -n '__tvmc_command tvmc records plot' -l 'json' -d 'Shorthand for --format json.'
complete -c tvmc -n '__tvmc_command tvmc records plot' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc records plot' -s 'h' -l 'help' -d 'Show this message and exit.'
complete -c tvmc -n '__tvmc_argument 0 tvmc records plot' -a '(__tvmc_files .json .log)'

# tvmc records show
complete -c tvmc -n '__tvmc_command tvmc records show' -l 'format' -x -a 'json text' -d 'Output format: human text, or one JSON document on stdout for pipelines.'
complete -c tvmc -n '__tvmc_command tvmc records show' -l 'json' -d 'Shorthand for --format json.'
complete -c tvmc -n '__tvmc_command tvmc records show' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc records show' -s 'h' -l 'help' -d 'Show this message and exit.'
complete -c tvmc -n '__tvmc_argument 0 tvmc records show' -a '(__tvmc_files .json .log)'

# tvmc run
complete -c tvmc -n '__tvmc_command tvmc run' -l 'device' -x -a 'cpu cuda' -d 'Where to run the package.'
complete -c tvmc -n '__tvmc_command tvmc run' -s 'i' -l 'inputs' -x -a '(__tvmc_files .npz)' -d 'Inputs by name (.npz); inputs it lacks are filled by --fill-mode.'
complete -c tvmc -n '__tvmc_command tvmc run' -s 'o' -l 'outputs' -x -a '(__tvmc_files .npz)' -d 'Save the outputs (.npz, by the model\'s names and as output_0, output_1, ...).'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'fill-mode' -x -a 'ones random zeros' -d 'Fill for inputs not given: seeded random (normal floats, 0/1 integers), zeros, ones.'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'print-time' -d 'Time the model and print TVMC\'s time table.'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'print-top' -x -d 'Print the N largest classes of the first output.'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'repeat' -x -d 'Timed measurements (each the mean of --number runs).'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'number' -x -d 'Runs per measurement.'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'min-repeat-ms' -x -d 'Raise --number until one measurement lasts this long.'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'warmup' -x -d 'Untimed runs before --print-time measures (they page code in, start the threads).'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'duration' -x -d 'With --print-time, keep measuring until S seconds have passed (at least --repeat measurements; 0: exactly --repeat).'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'profile' -d 'Time each kernel call; print the time per model node (ONNX name, op, shapes).'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'profile-out' -x -a '(__tvmc_files .json .svg)' -d 'Write the profile (implies --profile): .json a Chrome trace (Perfetto, chrome://tracing), .svg a bar chart of time per node and op type. Repeatable.'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'end-to-end' -d 'With --device cuda, time copying inputs in and outputs out too (on the CPU nothing is copied: no change).'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'num-threads' -x -d 'Worker threads (default: $TVMC_NUM_THREADS, else the physical cores), at most: runs take fewer while that has lately been faster (TVMC_ADAPTIVE_THREADS=0: always N).'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'scheduler' -l 'rpc-tracker' -x -d 'Run on a Dask worker of this scheduler (tcp://host:8786; TVMC\'s --rpc-tracker HOST:PORT names it too), one with --device-key; see docs/distributed.md.'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'device-key' -l 'rpc-key' -x -d 'With --scheduler: the device key of the worker to run on (`tvmc worker --device-key`).'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'remote-timeout' -x -d 'With --scheduler: stop the run on the worker past this many seconds.'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'format' -x -a 'json text' -d 'Output format: human text, or one JSON document on stdout for pipelines.'
complete -c tvmc -n '__tvmc_command tvmc run' -l 'json' -d 'Shorthand for --format json.'
complete -c tvmc -n '__tvmc_command tvmc run' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc run' -s 'h' -l 'help' -d 'Show this message and exit.'
complete -c tvmc -n '__tvmc_argument 0 tvmc run' -a '(__tvmc_files .tar)'

# tvmc tune
complete -c tvmc -n '__tvmc_command tvmc tune' -s 'o' -l 'output' -x -a '(__tvmc_files .json .log)' -d 'Records file (AutoTVM v0.2 lines): appended to as results arrive; an existing one resumes (its configs are not measured again). Required unless --tasks list.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'tuning-records' -x -a '(__tvmc_files .json .log)' -d 'Without -o: the records file, as -o. With -o (as TVMC): prior records, only read: their configs are not measured again and seed the tuners.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'target' -x -a 'cuda llvm' -d 'Target string: \'llvm\' (this CPU), \'llvm -mcpu=skylake-avx512\'.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'target-llvm-mcpu' -x -d 'LLVM CPU name (default: this CPU).'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'target-llvm-mattr' -x -d 'LLVM features, e.g. \'+avx2,-avx512f\'.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'input-shapes' -x -d 'Static input shapes, e.g. \'data:[1,3,224,224] mask:[1,128]\' (default: the model\'s).'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'input-dtypes' -x -d 'Input dtypes, e.g. \'input_ids:int64 mask:int32\' (default: as in the model).'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'model-format' -x -a 'onnx tvmc' -d 'Model format; guessed from the extension (.onnx, .tvmc) when omitted.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'trials' -x -d 'Configs to measure in total, shared among the tasks by weight x FLOPs (resumed records count toward it).'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'tuner' -x -a 'ga gridsearch random xgb' -d 'Search: xgb (a cost model), ga (genetic), random, gridsearch.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'early-stopping' -x -d 'Stop a task after N trials without a better config (default: off).'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'number' -x -d 'Runs per measurement (their mean is one cost).'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'repeat' -x -d 'Measurements per config that must agree: taken until this many lie within 3% of each other (at most 12), those kept.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'min-repeat-ms' -x -d 'Raise --number until one measurement lasts this long.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'timeout' -x -d 'Seconds one config may run before it counts as a run timeout.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'parallel' -x -d 'Builds at once (default: the physical cores); runs are one at a time.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'flush-cache' -d 'Flush the CPU caches before each run.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'paired-rounds' -x -d 'After each task\'s search, time its best config and the default schedule alternately N times (0 or at least 5); compile keeps the config only if it wins by 3% (median) in too many rounds for chance: 7 of 8 (0: no check, the lowest cost wins).'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'tasks' -x -d 'Tasks to tune, as TVMC: \'0\', \'0,2\', \'3-5\', \'-5\' (0 to 5), \'6-\' (6 on), \'all\'; \'list\' prints the tasks and tunes nothing.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'scheduler' -x -d 'Measure on a Dask cluster: its scheduler, e.g. tcp://host:8786 (needs tvmc[dist]; see docs/distributed.md). Records stay on this machine.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'device-key' -x -d 'With --scheduler: the device resource to measure on (tvmc worker --device-key KEY).'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'priority' -x -d 'With --scheduler: runs of a higher priority go first on shared workers.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'format' -x -a 'json text' -d 'Output format: human text, or one JSON document on stdout for pipelines.'
complete -c tvmc -n '__tvmc_command tvmc tune' -l 'json' -d 'Shorthand for --format json.'
complete -c tvmc -n '__tvmc_command tvmc tune' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc tune' -s 'h' -l 'help' -d 'Show this message and exit.'
complete -c tvmc -n '__tvmc_argument 0 tvmc tune' -a '(__tvmc_files .onnx .tvmc)'

# tvmc worker
complete -c tvmc -n '__tvmc_command tvmc worker' -l 'scheduler' -x -d 'The Dask scheduler to join, e.g. tcp://host:8786 (start one with `dask scheduler`).'
complete -c tvmc -n '__tvmc_command tvmc worker' -l 'device-key' -x -d 'Be a device: measure one config at a time here, advertising KEY (e.g. h200, rpi4).'
complete -c tvmc -n '__tvmc_command tvmc worker' -l 'build' -d 'Be a builder: compile configs, --nthreads at once (advertises the \'build\' resource).'
complete -c tvmc -n '__tvmc_command tvmc worker' -l 'nthreads' -x -d 'With --build: builds at once (default: 1).'
complete -c tvmc -n '__tvmc_command tvmc worker' -l 'name' -x -d 'Worker name shown by `tvmc tune` and `tvmc run` (default: address).'
complete -c tvmc -n '__tvmc_command tvmc worker' -l 'connect-timeout' -x -d 'Seconds to reach the scheduler before giving up.'
complete -c tvmc -n '__tvmc_command tvmc worker' -s 'v' -l 'verbose' -d 'More logging (-v info, -vv debug); tracebacks. Same as before the command.'
complete -c tvmc -n '__tvmc_command tvmc worker' -s 'h' -l 'help' -d 'Show this message and exit.'
