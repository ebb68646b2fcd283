"""`tvmc compile --target cuda` and `tvmc run --device cuda` through Click's runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_compile_run_cli import error, ok, tvmc
from tests.driver.test_compile_run import write_tiny_model
from tvmc.runtime import cuda_driver


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("cuda-cli")
    write_tiny_model(directory)
    return directory


def test_compile_for_cuda_with_ptx_dump(workdir: Path):
    out = workdir / "tiny-cuda.tar"
    result = ok(tvmc("compile", workdir / "tiny.onnx", "-o", out, "--target", "cuda -arch=sm_90",
                     "--dump-code", "ptx"))  # fmt: skip
    assert "target  cuda -arch=sm_90 (PTX for sm_90, runs with --device cuda)" in result.stdout
    assert "mod.ptx" in result.stdout
    assert ".entry" in Path(f"{out}.ptx").read_text()
    document = json.loads(ok(tvmc("compile", workdir / "tiny.onnx", "-o", out, "--target",
                                  "cuda -arch=sm_80", "--json")).stdout)  # fmt: skip
    assert (document["device"], document["target"]) == ("cuda", "cuda -arch=sm_80")


def test_bad_cuda_targets(workdir: Path):
    model = workdir / "tiny.onnx"
    error(tvmc("compile", model, "--target", "cuda -arch=sm_999"), 2,
          r"unknown CUDA architecture 'sm_999'.*valid: sm_XX")  # fmt: skip
    error(tvmc("compile", model, "--target", "cuda -mcpu=x"), 2, r"-arch=sm_XX")
    error(tvmc("compile", model, "--dump-code", "ptx"), 2, r"--dump-code ptx needs a cuda target")


def test_run_on_a_machine_without_a_gpu(workdir: Path):
    cuda_driver.device.cache_clear()
    if cuda_driver.present_arch() is not None:
        pytest.skip("a GPU is present")
    out = workdir / "run-cuda.tar"
    ok(tvmc("compile", workdir / "tiny.onnx", "-o", out, "--target", "cuda"))
    error(tvmc("run", out, "--device", "cuda", "--print-time", "--end-to-end"), 4,
          r"no NVIDIA driver here.*--target llvm|pip install 'tvmc\[cuda\]'")  # fmt: skip
    error(tvmc("run", out), 2, r"runs with --device cuda")


def test_end_to_end_on_the_cpu_changes_nothing(workdir: Path):
    out = workdir / "cpu.tar"
    ok(tvmc("compile", workdir / "tiny.onnx", "-o", out))
    result = ok(tvmc("run", out, "--print-time", "--end-to-end", "--repeat", "2"))
    assert "Execution time summary" in result.stdout
