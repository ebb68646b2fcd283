"""benchmarks/heavy_convs.py's `--cold-weights`: which buffers it reads back into the caches."""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx

import tvmc
from tests.onnx_helpers import single_node_model
from tvmc.autotune.measure import MeasureInput, default_entity
from tvmc.autotune.measure_cpu import allocate_buffers, build

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))
import heavy_convs  # noqa: E402


def test_cold_weights_reads_back_the_activations_not_the_weights(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    w = rng.standard_normal((16, 8, 1, 1)).astype(np.float32)
    path = tmp_path / "conv.onnx"
    onnx.save(single_node_model("Conv", {"x": x}, constants={"w": w}), path)
    (task,) = tvmc.extract_tasks(path, target="llvm")
    built = build(MeasureInput(task, default_entity()), check_correctness=False, threads=1)
    arrays = allocate_buffers(built)

    read_back = heavy_convs.activation_arrays(built, arrays)

    sizes = sorted(a.size for a in read_back)
    assert x.size in sizes and 16 * 6 * 6 in sizes  # the input and the output
    packed = [arrays[name] for name in built.params]
    assert packed and max(a.size for a in packed) >= w.size  # the packed (padded) weights
    assert not any(a is p for a in read_back for p in packed)
