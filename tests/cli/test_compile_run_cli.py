"""`tvmc compile` and `tvmc run` through Click's runner, and once as a real subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result
from onnx import TensorProto, helper, numpy_helper

import tvmc as tvmc_api
from tests.driver.test_compile_run import TVMC_HEADER, write_tiny_model
from tvmc.cli.compile import size
from tvmc.cli.main import cli
from tvmc.codegen.program import heap_scratch_bytes
from tvmc.driver.compiler import CompileOptions, build


def tvmc(*args: str) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="tvmc")


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def error(result: Result, exit_code: int, pattern: str) -> str:
    """The one `Error:` line of a failed command, checked against `pattern`."""
    assert result.exit_code == exit_code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, result.stderr
    assert re.search(pattern, lines[0]), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("cli")
    write_tiny_model(directory)
    ok(tvmc("compile", directory / "tiny.onnx", "-o", directory / "tiny.tar"))
    return directory


def test_compile_json(workdir: Path, tmp_path: Path):
    out = tmp_path / "m.tar"
    document = json.loads(ok(tvmc("compile", workdir / "tiny.onnx", "-o", out, "--json")).stdout)
    assert document["package"] == str(out) and out.is_file()
    assert document["target"] == "llvm" and document["kernels"] >= 1
    assert document["inputs"]["x"] == {"shape": [2, 3, 4], "dtype": "float32"}
    assert set(document["outputs"]) == {"cat", "s"}
    assert {"workspace_bytes", "naive_bytes", "param_bytes", "compile_seconds"} <= set(document)
    assert document["heap_scratch_bytes"] == 0 and document["heap_scratch_threads"] >= 1
    assert document["images"] == 1 and document["image_workspace_bytes"] is None
    assert document["shared_library"] is True and document["dumps"] == {}


def test_compile_for_other_threads(workdir: Path, tmp_path: Path):
    out = tmp_path / "m.tar"
    args = ["compile", workdir / "tiny.onnx", "-o", out, "--num-threads", "5"]
    assert json.loads(ok(tvmc(*args, "--json")).stdout)["heap_scratch_threads"] == 5
    assert ", planned for 5 threads)" in ok(tvmc(*args)).stdout
    error(tvmc(*args[:-1], "0"), 2, r"--num-threads.*0 is not in the range x>=1")
    error(tvmc(*args, "--target", "cuda -arch=sm_90"), 2, r"--num-threads plans CPU code")


def test_compile_reports_heap_scratch(tmp_path: Path):
    """A 3x3 conv on a 160x160 plane: its Winograd scratch is too large for a thread's stack."""
    weights = numpy_helper.from_array(np.zeros((32, 32, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 160, 160])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 160, 160])], [weights],
    )  # fmt: skip
    model = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    document = json.loads(ok(tvmc("compile", model, "-o", tmp_path / "m.tar", "--json")).stdout)
    threads = document["heap_scratch_threads"]
    program = build(tvmc_api.load(str(model)).graph, CompileOptions()).lowered.program
    assert document["heap_scratch_bytes"] == heap_scratch_bytes(program, threads)
    text = ok(tvmc("compile", model, "-o", tmp_path / "m.tar")).stdout
    scratch = document["heap_scratch_bytes"]
    assert (f"heap scratch {size(scratch)} on {threads} threads" in text) == (scratch > 0)


def test_compile_text_and_dump_code(workdir: Path, tmp_path: Path):
    out = tmp_path / "m.tar"
    args = ["--dump-code", "ll,asm", "--dump-code", "kernel", "--dump-code", "graph", "-O", "0"]
    result = ok(tvmc("compile", workdir / "tiny.onnx", "-o", out, *args))
    assert result.stdout.startswith(f"compiled {workdir / 'tiny.onnx'} -> {out}")
    assert "kernels" in result.stdout and "workspace" in result.stdout
    for fmt in ("ll", "asm", "kernel", "graph"):
        assert Path(f"{out}.{fmt}").stat().st_size > 0
        assert f"{out}.{fmt}" in result.stderr


def test_compile_saved_model_and_default_output(workdir: Path, tmp_path: Path):
    ok(tvmc("load", workdir / "tiny.onnx", "-o", tmp_path / "tiny.tvmc"))
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        ok(tvmc("compile", "tiny.tvmc", "--target", "llvm", "--disabled-pass", "fuse"))
    finally:
        os.chdir(old)
    assert (tmp_path / "module.tar").is_file()  # TVMC's default name


def test_run_json(workdir: Path, tmp_path: Path):
    args = ["--json", "--print-time", "--repeat", "3", "--print-top", "2", "--profile"]
    result = ok(tvmc("run", workdir / "tiny.tar", *args, "-o", tmp_path / "y.npz"))
    document = json.loads(result.stdout)
    assert document["outputs"]["cat"] == {"shape": [2, 24], "dtype": "float32", "alias": "output_0"}
    assert len(document["time"]["results_ms"]) == 3 and document["time"]["mean_ms"] > 0
    assert len(document["top"]) == 2 and document["profile"][0]["kernel"]
    assert document["saved"] == str(tmp_path / "y.npz")
    with np.load(tmp_path / "y.npz") as saved:
        assert {"cat", "s", "output_0", "output_1"} == set(saved.files)


def test_run_text(workdir: Path):
    args = ["--print-time", "--print-top", "3", "--profile", "--fill-mode", "ones"]
    stdout = ok(tvmc("run", workdir / "tiny.tar", *args, "--num-threads", "1")).stdout
    assert "output_0" in stdout and "float32[2,24]" in stdout
    assert "top 3 of cat" in stdout and "GFLOP/s" in stdout and "total" in stdout
    lines = stdout.splitlines()
    at = lines.index("Execution time summary:")
    assert lines[at + 1] == TVMC_HEADER
    assert len(lines[at + 2].split()) == 5


def test_run_benchmark_options(workdir: Path):
    args = ["--print-time", "--repeat", "2", "--warmup", "3", "--duration", "0.05", "--json"]
    time = json.loads(ok(tvmc("run", workdir / "tiny.tar", *args)).stdout)["time"]
    assert time["warmup"] == 3 and time["seconds"] >= 0.05 and len(time["results_ms"]) > 2
    assert time["p50_ms"] <= time["p90_ms"] <= time["p95_ms"] <= time["p99_ms"]
    assert time["throughput_per_s"] > 0 and time["load_ms"] > 0 and time["first_inference_ms"] > 0
    text = ok(tvmc("run", workdir / "tiny.tar", "--print-time", "--warmup", "0")).stdout
    assert ", 0 warm-up runs, " in text and "inferences/s" in text
    for bad in (["--warmup", "-1"], ["--duration", "nan"], ["--duration", "-1"]):
        error(tvmc("run", workdir / "tiny.tar", "--print-time", *bad), 2, bad[0])


def test_run_inputs_file(workdir: Path, tmp_path: Path, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, y=np.ones_like(x))
    result = ok(tvmc("run", workdir / "tiny.tar", "-i", tmp_path / "in.npz", "--json",
                     "-o", tmp_path / "out.npz"))  # fmt: skip
    assert json.loads(result.stdout)["time"] is None
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_array_equal(saved["cat"][:, 12:], x.reshape(2, 12))
    np.savez(tmp_path / "bad.npz", z=x)
    error(tvmc("run", workdir / "tiny.tar", "-i", tmp_path / "bad.npz"), 2, r"unknown input 'z'")
    np.savez(tmp_path / "bad.npz", x=x.astype(np.float64))
    error(tvmc("run", workdir / "tiny.tar", "-i", tmp_path / "bad.npz"), 2, r"'x' is float64")


@pytest.mark.parametrize(
    ("args", "exit_code", "pattern"),
    [
        (["run", "missing.tar"], 4, r"'missing.tar' does not exist"),
        (["run", "{dir}/tiny.onnx"], 4, r"not a readable package"),
        (["run", "{dir}/tiny.tar", "--device", "cuda"], 2, r"runs with --device cpu.*cuda"),
        (["run", "{dir}/tiny.tar", "--device", "gpu"], 2, r"'gpu' is not one of 'cpu', 'cuda'"),
        (["run", "{dir}/tiny.tar", "--fill-mode", "zero"], 2, r"'zero' is not one of"),
        (["run", "{dir}/tiny.tar", "--repeat", "0"], 2, r"--repeat"),
        (["compile", "{dir}/tiny.onnx", "--target", "cuda -arch=sm_1"], 2, r"CUDA architecture"),
        (["compile", "{dir}/tiny.onnx", "--target", "llvm -mfoo=1"], 2, r"'-mfoo=1'"),
        (["compile", "{dir}/tiny.onnx", "--dump-code", "lll"], 2, r"'lll'.*Did you mean 'll'\?"),
        (["compile", "{dir}/tiny.onnx", "-O", "5"], 2, r"--opt-level"),
        (["compile", "{dir}/tiny.onnx", "--disabled-pass", "fusee"], 2, r"'fusee'.*'fuse'\?"),
        (["compile", "missing.onnx"], 4, r"'missing.onnx' does not exist"),
        (["compile", "{dir}/tiny.onnx", "-o", "{dir}/tiny.onnx/x.tar"], 2, r"cannot write the"),
    ],
)
def test_user_errors(workdir: Path, tmp_path: Path, args: list[str], exit_code: int, pattern):
    args = [a.replace("{dir}", str(workdir)) for a in args]
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        error(tvmc(*args), exit_code, pattern)
    finally:
        os.chdir(old)
    assert not (tmp_path / "module.tar").exists()


def test_foreign_package(workdir: Path, tmp_path: Path):
    out = tmp_path / "arm.tar"
    ok(
        tvmc(
            "compile",
            workdir / "tiny.onnx",
            "-o",
            out,
            "--target-llvm-mtriple",
            "aarch64-linux-gnu",
        )
    )
    error(tvmc("run", out), 4, r"compiled for aarch64-linux-gnu.*--target llvm")


def test_real_process(workdir: Path, tmp_path: Path):
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}

    def tvmc_process(*args: object) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tvmc", *map(str, args)], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)  # fmt: skip

    done = tvmc_process("compile", workdir / "tiny.onnx", "-o", "p.tar", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["package"] == "p.tar"
    done = tvmc_process("run", "p.tar", "--print-time", "--repeat", "2")
    assert done.returncode == 0, done.stderr
    assert TVMC_HEADER in done.stdout.splitlines()
    done = tvmc_process("run", "p.tar", "--device", "cuda")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith("Error: 'p.tar' was compiled for llvm")
