"""`make gpu-check` where there is no GPU (CI): it builds what a CPU can, says so, exits 2.

Also: what the lent GPU machine lacks (pytest, xgboost) is not needed to compile for CUDA.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tvmc.runtime import cuda_driver

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_smoke_without_a_gpu(tmp_path):
    cuda_driver.device.cache_clear()
    if cuda_driver.present_arch() is not None:
        pytest.skip("a GPU is present: run make gpu-check")
    out = tmp_path / "results.jsonl"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--smoke", "--dir", str(tmp_path),
         "--out", str(out)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()
    assert "NO GPU PRESENT" in last[-2] and last[-1].startswith("results: ")
    assert any(line.startswith("GPU      none: no NVIDIA driver") for line in last)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    ops = {r["case"]: r["status"] for r in rows if r["stage"] == "ops"}
    assert ops == {"relu": "built", "conv3x3": "built", "softmax": "built"}, rows


NO_XGBOOST = """
import sys
sys.modules["xgboost"] = None  # as on the GPU machine
sys.modules["pytest"] = None
import numpy as np, onnx, tvmc
from tvmc.autotune.tuners import TUNERS
from tvmc.autotune.local import LocalMeasurer
import tvmc.cli.main
from benchmarks.gpu_cases import OP_CASES
model, inputs = OP_CASES[0].build()
onnx.save(model, sys.argv[1])
package = tvmc.compile(sys.argv[1], target="cuda -arch=sm_90", package_path=sys.argv[1] + ".tar")
assert ".entry" in package._contents.ptx
try:
    TUNERS["xgb"](None)
except tvmc.errors.UsageError as exc:
    print("xgb:", exc)
"""


def test_compiling_for_cuda_needs_neither_xgboost_nor_pytest(tmp_path):
    done = subprocess.run([sys.executable, "-c", NO_XGBOOST, str(tmp_path / "m.onnx")], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "xgb: the xgb tuner needs xgboost" in done.stdout and "--tuner ga" in done.stdout


def test_gpu_mode_on_a_fake_gpu(tmp_path, monkeypatch):
    """The stages' GPU branch (run, compare with onnxruntime) with a fake driver as the GPU."""
    from benchmarks import gpu_stages
    from tests.runtime.fake_cuda import FakeDriver
    from tvmc.driver import pipeline

    drv = FakeDriver([])
    emit = pipeline.emit_cuda_program

    def emit_and_teach_the_fake(program, target=None):
        drv.kernels.update({k.name: k for k in program.kernels})
        return emit(program, target)

    monkeypatch.setattr(cuda_driver, "driver", lambda: drv)
    monkeypatch.setattr(pipeline, "emit_cuda_program", emit_and_teach_the_fake)
    out = tmp_path / "r.jsonl"
    try:
        for name in ("env", "ops"):
            stage = gpu_stages.Stage(name, str(out), time.time() + 120, str(tmp_path), smoke=True)
            gpu_stages.STAGES[name](stage)
    finally:
        cuda_driver.device.cache_clear()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["status"] == "ok" and rows[0]["arch"] == "sm_90"
    ops = {r["case"]: (r["status"], r["error"]) for r in rows[1:]}
    assert set(ops) == {"relu", "conv3x3", "softmax"}
    assert all(status == "ok" and error < 1e-5 for status, error in ops.values()), ops


def test_summary_table_is_last_and_has_the_figures():
    from benchmarks.gpu_check import summary

    rows = [
        {"stage": "env", "case": "gpu", "status": "ok", "detail": "H200 (sm_90)",
         "peak_gflops": 66900.0},
        {"stage": "ops", "case": "relu", "status": "ok", "detail": ""},
        {"stage": "ops", "case": "conv3x3", "status": "fail", "detail": "max rel error 1"},
        {"stage": "bench", "case": "tvmc untuned", "status": "ok", "detail": "", "median_ms": 4.5,
         "e2e_median_ms": 4.9, "heaviest": [{"kernel": "n7_conv", "time_ms": 0.2,
                                             "gflops": 1150.0, "of_peak": 0.017}]},
        {"stage": "torch", "case": "torch.compile", "status": "ok", "detail": "", "median_ms": 2.5},
    ]  # fmt: skip
    lines = summary(rows, ["stage tune killed after 170 s"], gpu=True)
    text = "\n".join(lines)
    assert "GPU      H200 (sm_90), fp32 peak 66.9 TFLOP/s" in text
    assert "ops         1      0     1     0  conv3x3" in text
    assert "tvmc untuned 4.500, torch.compile 2.500" in text
    assert "n7_conv 0.200 ms, 1150 GFLOP/s = 1.7% of peak" in text
    assert lines[-1] == "problem: stage tune killed after 170 s"
