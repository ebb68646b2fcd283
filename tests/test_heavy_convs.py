"""benchmarks/heavy_convs.py's `--cold-weights`: which buffers it reads back into the caches."""

from __future__ import annotations

import os
import statistics
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


def conv_task(tmp_path, x_shape, w_shape, pads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    path = tmp_path / "conv.onnx"
    attrs = {"pads": pads, "kernel_shape": list(w_shape[2:])}
    onnx.save(single_node_model("Conv", {"x": x}, attrs, constants={"w": w}), path)
    (task,) = tvmc.extract_tasks(path, target="llvm")
    return task


def test_winograd_defaults_are_named_and_direct_times_the_direct_plan(tmp_path):
    """A 3x3 conv Winograd takes by default says so (its GFLOP/s are effective ones);
    `--direct` names and builds the direct conv's plan."""
    task = conv_task(tmp_path, (1, 32, 28, 28), (32, 32, 3, 3), [1, 1, 1, 1])
    host = heavy_convs.CPUTarget.host()
    assert heavy_convs.default_plan(task, host).startswith("winograd4 GEMM")
    direct = heavy_convs.default_plan(task, host, direct=True)
    assert direct.split()[0] in ("pixels", "channels")
    config = heavy_convs.direct_entity(task, host)
    assert config.values == {"schedule": direct.split()[0]}
    assert heavy_convs.other_order(task) is None  # Winograd's plan has no tile loop order


def test_other_order_flips_only_the_order(tmp_path):
    task = conv_task(tmp_path, (1, 32, 28, 28), (48, 32, 1, 1), [0, 0, 0, 0])
    default = tuple(task.space.get(task.space.default_index).values["plan"])
    other = tuple(heavy_convs.other_order(task).values["plan"])
    assert other[:3] == default[:3] and other[4:] == default[4:] and other[3] != default[3]


def _runs(*blocks_per_run: list[float]):
    """Fake timed runs: a warm-up call, then each block's time five times."""

    def run(blocks):
        values = iter([99.0] + [b for b in blocks for _ in range(5)])
        return lambda: next(values)

    return [run(blocks) for blocks in blocks_per_run]


class _Bursts:
    """Fake peak bursts: the given GFLOP/s in turn, keeping the best as PeakBursts does."""

    def __init__(self, values):
        self.values, self.best = iter(values), 0.0

    def __call__(self) -> float:
        value = next(self.values)
        self.best = max(self.best, value)
        return value


def test_only_blocks_between_quiet_bursts_count_and_rounds_go_on_to_find_them():
    """A block counts where the peak bursts just before and after it reached 90% of the
    core's peak; rounds go on until each run has its rounds of quiet blocks, and a run that
    never met one (within MAX_ROUNDS_FACTOR x rounds) keeps its fastest block. Each block's
    seconds times the bursts around it give the conv's share of the core's rate then."""
    # round 1: burst 100, a's block, burst 100 (a quiet), b's block, burst 50 (b slow);
    # round 2: burst 50, a's block (slow), burst 100, b's block, burst 100 (b quiet)
    gate = heavy_convs.QuietGate(_Bursts([100, 100, 50, 50, 100, 100]), core_peak=100)
    runs = _runs([3.0, 1.0], [0.5, 2.0])
    assert heavy_convs.cpu_seconds(runs, 1, gate) == [3.0, 2.0]  # not a's 1.0 nor b's 0.5
    assert gate.counted == [1, 1] and gate.quiet_blocks == 2 and gate.blocks == 4
    assert gate.paced == [[3.0 * 100, 1.0 * 75], [0.5 * 75, 2.0 * 100]]
    assert gate.share_of_bursts(0, 1.5e11) == 1.5e11 / 1e9 / statistics.median([300, 75])

    # a burst beyond the cached peak raises the bar: 90% of 120, not of 100
    gate = heavy_convs.QuietGate(_Bursts([120, 110] + [100] * 20), core_peak=100)
    rounds = heavy_convs.MAX_ROUNDS_FACTOR
    assert heavy_convs.cpu_seconds(_runs([1.0] * rounds, [1.0] * rounds), 1, gate) == [1.0, 1.0]
    assert gate.counted == [1, 0]

    slow = heavy_convs.QuietGate(_Bursts([50.0] * 100), core_peak=100)
    rounds = 2 * heavy_convs.MAX_ROUNDS_FACTOR
    runs = _runs([7.0 - i / 10 for i in range(rounds)], [8.0] * rounds)
    assert heavy_convs.cpu_seconds(runs, 2, slow) == [7.0 - (rounds - 1) / 10, 8.0]
    assert slow.counted == [0, 0] and slow.blocks == 2 * rounds

    assert heavy_convs.cpu_seconds(_runs([4.0], [5.0]), 1) == [4.0, 5.0]  # no gate: every block
