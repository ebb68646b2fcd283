"""The fuzz suite: structured mutators (Hypothesis) for models, packages, npz inputs, records
lines and command lines; each case runs `tvmc` in a process of its own (harness, forkserver) and
ends as a clean error, accepted, an internal error, a crash or a hang.

`test_quick` runs a few dozen cases in `make test`; `campaign` runs `make fuzz` (docs/fuzzing.md);
`test_regressions` keeps what the fuzzer found.
"""
