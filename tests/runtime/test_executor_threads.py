"""Two executors running at once from two Python threads share the thread pool safely."""

from __future__ import annotations

import threading

import numpy as np
import onnx

import tvmc
from tests.onnx_helpers import run_onnxruntime, single_node_model
from tvmc.codegen import set_num_threads


def _conv_package(tmp_path) -> tuple[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 24, 24), dtype=np.float32)
    w = rng.standard_normal((32, 16, 3, 3), dtype=np.float32)
    model = single_node_model("Conv", {"x": x}, {"pads": [1, 1, 1, 1]}, constants={"w": w})
    path = str(tmp_path / "conv.onnx")
    onnx.save(model, path)
    package = str(tmp_path / "conv.tar")
    tvmc.compile(path, package_path=package)
    return package, {"x": x, "expected": run_onnxruntime(model, {"x": x})[0]}


def test_two_executors_on_two_python_threads(tmp_path):
    package, data = _conv_package(tmp_path)
    set_num_threads(2)
    executors = [tvmc.TVMCPackage(package).executor() for _ in range(2)]
    failures: list[str] = []

    def serve(executor, seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(40):
            scale = np.float32(rng.uniform(0.5, 2))
            executor.set_inputs([data["x"] * scale])
            out = executor.run()[0]
            if not np.allclose(out, data["expected"] * scale, rtol=1e-3, atol=1e-3):
                failures.append(f"thread {seed}: wrong output")

    threads = [threading.Thread(target=serve, args=(e, i)) for i, e in enumerate(executors)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "an executor hung"
    assert not failures, failures
    set_num_threads(None)
