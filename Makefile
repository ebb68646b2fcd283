# Every target sets up .venv by itself; a fresh machine needs only Python >= 3.10 and a C compiler.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST := $(BIN)/python -m pytest
DEMO := demo-out

.PHONY: help setup demo test wheel-check test-fast fuzz bench bench-tuned bench-noisy bench-tune gpu-check completions docs docs-check conformance lint check clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,dist,cuda]'
	touch $(STAMP)

setup: $(STAMP)  ## create .venv with tvmc and its test tools

demo: $(STAMP)  ## load, tune briefly, compile and run a model that ships with the onnx wheel
	@mkdir -p $(DEMO)
	$(BIN)/python -m tvmc.demo $(DEMO)

test: $(STAMP) wheel-check  ## the wheel check, then the whole test suite
	$(PYTEST) -n 2 -q

wheel-check: $(STAMP)  ## build the wheel, install it in a fresh venv, compile and run a model with it
	bash .ci/wheel-check $(VENV)

test-fast: $(STAMP)  ## the test suite without slow model-level tests
	$(PYTEST) -n 2 -q -m "not slow"

# Not in `make test`: FUZZ_CASES cases (default 10000) over FUZZ_JOBS workers (default: the cores).
fuzz: $(STAMP)  ## a long fuzz campaign of tvmc commands; summary and findings in fuzz-out/
	$(BIN)/python -m tests.fuzz.campaign

# BENCH_ARGS: e.g. "--models light", "--repeat 60", "--seconds 4" (each runtime's timed span), or names.
bench: $(STAMP)  ## tvmc beside onnxruntime and OpenVINO on the light and zoo models: ratios, targets
	$(BIN)/python benchmarks/models.py $(BENCH_ARGS)

# TUNED: the records folder (kept: a second run resumes and adds TUNE_TRIALS per task).
# TUNE_MODELS: names, or --models light|zoo|all (both scripts take either).
TUNED ?= bench-records
TUNE_MODELS ?= light_squeezenet light_shufflenet light_inception_v1
TUNE_TRIALS ?= 16
bench-tuned: $(STAMP)  ## tune TUNE_MODELS briefly into TUNED, then tuned vs untuned vs the baselines
	$(BIN)/python benchmarks/tune_models.py $(TUNED) $(TUNE_MODELS) --trials-per-task $(TUNE_TRIALS)
	$(BIN)/python benchmarks/models.py --tuned $(TUNED) $(TUNE_MODELS)

bench-noisy: $(STAMP)  ## slowdowns beside busy neighbours (one core, all cores, mixed load); ~12 min
	$(BIN)/python benchmarks/noisy.py $(NOISY_ARGS)

bench-tune: $(STAMP)  ## best GFLOP/s after 64/128/256 trials on resnet50's heaviest convs
	$(BIN)/python benchmarks/tune.py

# No $(STAMP): the lent GPU machine has the packages but no network; nothing is installed.
gpu-check:  ## on a GPU machine: ops, nine models, ResNet-50 vs PyTorch (GPU_CHECK_ARGS=--tune)
	PYTHONPATH=. $(PYTHON) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

COMPLETIONS := tvmc/cli/completion/scripts

completions: $(STAMP)  ## regenerate the completion scripts (shipped in the wheel) from the Click app
	$(BIN)/python -m tvmc.cli.completion $(COMPLETIONS)

docs: $(STAMP)  ## regenerate docs/cli.md from the Click app and docs/ops.md's op tables
	$(BIN)/python -m tvmc.cli.docgen docs/cli.md
	$(BIN)/python -m tests.backend.ops_doc docs/ops.md

conformance: $(STAMP)  ## run the ONNX node tests (reference and compiled) into docs/ops.md (slow)
	$(BIN)/python -m tests.backend.ops_doc docs/ops.md --conformance

docs-check: $(STAMP)  ## fail if docs/cli.md or the completion scripts are out of date
	$(BIN)/python -m tvmc.cli.docgen --check docs/cli.md
	$(BIN)/python -m tvmc.cli.completion --check $(COMPLETIONS)
	$(BIN)/python -m tests.backend.ops_doc docs/ops.md --check

lint: $(STAMP)  ## ruff check and format check
	$(BIN)/ruff check tvmc tests
	$(BIN)/ruff format --check tvmc tests

check: lint docs-check test-fast  ## the fast dev loop

clean:
	rm -rf $(VENV) $(DEMO) bench-records fuzz-out .pytest_cache .ruff_cache
