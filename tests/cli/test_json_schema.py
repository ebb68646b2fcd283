"""Every `--format json` output validates against its schema in tvmc/schemas/.

Each case runs in-process through Click's CliRunner and as `python -m tvmc` in a subprocess;
stdout must be exactly one JSON document (logs and progress go to stderr). The schemas must be
strict: a document missing a required field or carrying a renamed one fails them.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from tests.cli.runners import SUBPROCESS_ENV, run_in_process, run_subprocess
from tests.driver.test_compile_run import write_tiny_model
from tests.driver.test_tuning import write_conv_model

SCHEMAS = Path(__file__).resolve().parents[2] / "tvmc" / "schemas"
TUNE = "--trials 2 --tuner random --repeat 1 --tasks 1"

# case -> (schema, the command line after `tvmc`, run in the work directory; a text stderr must
# hold or None)
CASES: dict[str, tuple[str, str, str | None]] = {
    "load": ("load", "load tiny.onnx --format json", None),
    "load saved": ("load", "load convs.onnx -o out.tvmc --json", "saved out.tvmc"),
    "compile": ("compile", "compile convs.onnx -o out.tar --json", None),
    "compile tuned": (
        "compile",
        "compile convs.onnx -o out.tar --tuning-records log.json --dump-code ll --json",
        None,
    ),
    "run": ("run", "run convs.tar --json", None),
    "run timed": (
        "run",
        "run convs.tar --json --print-time --repeat 2 --warmup 2 --duration 0.05 --profile "
        "--print-top 3 -o out.npz",
        "saved out.npz",
    ),
    "tune tasks list": ("tune-tasks", "tune convs.onnx --tasks list --json", None),
    "tune": ("tune", f"tune convs.onnx -o new.json {TUNE} --json", "task 1/1 #1"),
    "tune nothing": ("tune", "tune tiny.onnx -o new.json --json", "nothing to tune"),
    "records show": ("records-show", "records show log.json --json", None),
    "records best": ("records-best", "records best log.json -o best.json --json", None),
    "records plot": ("records-plot", "records plot log.json -o tuning.svg --json", None),
}


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Models, a package and a records file, made once."""
    directory = tmp_path_factory.mktemp("json_schema")
    write_tiny_model(directory)
    write_conv_model(directory)
    for args in (["compile", "convs.onnx", "-o", "convs.tar"],
                 ["tune", "convs.onnx", "-o", "log.json", *TUNE.split()[:-2]]):  # fmt: skip
        code, stdout, stderr = run_in_process(args, directory)
        assert code == 0, stderr
    return directory


@pytest.fixture
def workdir(source: Path, tmp_path: Path) -> Path:
    """A fresh copy of the source directory per test (commands write into it)."""
    shutil.copytree(source, tmp_path, dirs_exist_ok=True)
    return tmp_path


@pytest.mark.parametrize("runner", [run_in_process, run_subprocess], ids=["runner", "process"])
@pytest.mark.parametrize("case", list(CASES))
def test_json_output_matches_schema(
    case: str, runner: Callable[..., tuple[int, str, str]], workdir: Path
) -> None:
    name, args, on_stderr = CASES[case]
    code, stdout, stderr = runner(shlex.split(args), workdir)
    assert code == 0, stderr
    document = json.loads(stdout)  # the whole stdout: nothing but the document
    jsonschema.Draft202012Validator(schema(name)).validate(document)
    if on_stderr:
        assert on_stderr in stderr, stderr


def test_schemas_are_valid_and_all_used() -> None:
    names = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
    assert names == {name for name, _, _ in CASES.values()}
    for name in names:
        document = schema(name)
        jsonschema.Draft202012Validator.check_schema(document)
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert document["additionalProperties"] is False


# case -> the paths of nested objects in its document
NESTED = {
    "load": [("inputs", "x")],
    "compile tuned": [("tuning",)],
    "run timed": [("profile", 0), ("profile_nodes", 0), ("profile", 0, "sources", 0)],
    "tune": [("tasks", 0)],
    "records show": [("workloads", 0)],
    "records plot": [("tasks", 0)],
}


@pytest.mark.parametrize("case", list(NESTED))
def test_schemas_reject_missing_and_renamed_fields(case: str, workdir: Path) -> None:
    name, args, _ = CASES[case]
    code, stdout, stderr = run_in_process(shlex.split(args), workdir)
    assert code == 0, stderr
    document = json.loads(stdout)
    validator = jsonschema.Draft202012Validator(schema(name))
    required = schema(name)["required"]
    for key in document:
        renamed = {(f"{k}_renamed" if k == key else k): v for k, v in document.items()}
        assert not validator.is_valid(renamed), f"renamed {key!r} passes {name}"
        missing = {k: v for k, v in document.items() if k != key}
        assert validator.is_valid(missing) == (key not in required), key
    for path in NESTED[case]:
        broken = json.loads(stdout)
        nested = broken
        for step in path:
            nested = nested[step]
        nested.pop(next(iter(nested)))
        assert not validator.is_valid(broken), f"{path} missing a field passes {name}"


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_ci_pipeline_with_jq(workdir: Path) -> None:
    tvmc = f"{sys.executable} -m tvmc"
    command = (f"{tvmc} compile convs.onnx -o ci.tar && "
               f"{tvmc} run ci.tar --print-time --format json | jq -e .time.median_ms")  # fmt: skip
    shell = ["bash", "-o", "pipefail", "-c", command]
    done = subprocess.run(shell, cwd=workdir, env=SUBPROCESS_ENV, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.splitlines()[-1]) > 0  # after compile's summary: jq's number


def test_docs_explain_every_field() -> None:
    page = (SCHEMAS.parents[1] / "docs" / "json-output.md").read_text()
    for path in SCHEMAS.glob("*.schema.json"):
        assert f"(../tvmc/schemas/{path.name})" in page, path.name
        document = json.loads(path.read_text())
        for part in [document, *document.get("$defs", {}).values()]:
            for field in part.get("properties", {}):
                assert f"| `{field}`" in page, f"{path.name}: {field}"
