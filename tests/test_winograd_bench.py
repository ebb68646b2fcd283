"""benchmarks/winograd.py: it finds a model's Winograd-eligible convs and times and checks the
direct conv beside F2 and F4 as the compiler builds them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks")
sys.path.insert(0, BENCH)
import winograd  # noqa: E402

from tvmc.codegen import CPUTarget  # noqa: E402


@pytest.fixture(scope="module")
def squeezenet_convs():
    return winograd.eligible_convs(["light_squeezenet"])


def test_eligible_convs_are_the_3x3_stride_1_ones(squeezenet_convs):
    """squeezenet 1.1's expand3x3 convs (16->64 ... 64->256): its 1x1 and strided ones are not."""
    assert squeezenet_convs
    for model, geo, task in squeezenet_convs:
        assert model == "light_squeezenet" and task.op == "Conv"
        assert geo.kernel == (3, 3) and geo.strides == (1, 1) and geo.group == 1


def test_variants_run_and_stay_accurate(squeezenet_convs):
    _, _, task = min(squeezenet_convs, key=lambda c: c[1].channels * c[1].out_channels)
    target = CPUTarget.host()
    times = winograd.measure(task, 1, target)
    assert set(times) == set(winograd.VARIANTS) and all(len(t) == 5 for t in times.values())
    assert all(t > 0 for ts in times.values() for t in ts)
    knobs = winograd.configs(task, target)
    assert knobs["direct"]["schedule"] in ("pixels", "channels")
    assert winograd.max_error(task, knobs["winograd2"]) < 1e-5
    assert winograd.max_error(task, knobs["winograd4"]) < 5e-5


def test_rounds_must_be_positive():
    run = subprocess.run([sys.executable, os.path.join(BENCH, "winograd.py"), "--rounds", "0"],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 2 and "--rounds wants a positive count" in run.stderr


def test_cold_weights_runs_every_variant(squeezenet_convs):
    """`--cold-weights`: each run first writes the flush array (out of its timing)."""
    import numpy as np

    _, _, task = squeezenet_convs[0]
    flush = np.zeros(1 << 16, np.float32)
    times = winograd.measure(task, 1, CPUTarget.host(), flush)
    assert set(times) == set(winograd.VARIANTS)
    assert flush[0] == 3 * 6  # 3 variants, a warm-up and 5 runs each
