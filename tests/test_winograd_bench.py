"""benchmarks/winograd.py: its Winograd stages compute the 3x3 conv numpy computes."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))
import winograd  # noqa: E402


@pytest.mark.parametrize("m", sorted(winograd.MATRICES))
@pytest.mark.parametrize(
    "shape",
    [
        winograd.Shape(channels=3, out_channels=8, height=5, width=7),  # fewer tiles than lanes
        winograd.Shape(channels=16, out_channels=24, height=18, width=18),  # a tail vector
        winograd.Shape(channels=8, out_channels=8, height=6, width=66),  # rows of tile vectors
    ],
)
def test_stages_match_the_direct_conv(shape, m):
    error = winograd.check(shape, m)  # asserts rtol 1e-4 itself

    assert error < 1e-4


def test_a_wrong_weight_transform_is_caught():
    shape = winograd.Shape(channels=4, out_channels=8, height=6, width=6)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4, 3, 3), dtype=np.float32)
    wino = winograd.Winograd(shape, 2, w)
    wino.u *= 1.001  # a scaled U: the check must notice

    with pytest.raises(AssertionError):
        winograd.error_of(wino, w, rng)
