"""benchmarks/models.py: the tuned-against-untuned verdict uses an identical executor as its
control, so that two copies of the same code differing on a shared VM flag nothing."""

from __future__ import annotations

import os
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks")
sys.path.insert(0, BENCH)
import models  # noqa: E402


def rounds(*medians: float) -> list[list[float]]:
    return [[m, m, m] for m in medians]


def test_tuned_slower_than_both_untuned_copies_in_every_round_is_flagged():
    verdict = models.tuned_comparison(
        untuned=rounds(10, 11, 10), tuned=rounds(12, 13, 12.5), control=rounds(10.5, 10, 11)
    )
    assert verdict["slower"]
    assert abs(verdict["noise"] - 0.1) < 1e-9  # the control strayed 10% at most (round 2, 3)


def test_tuned_within_what_identical_code_strayed_is_not_flagged():
    """Slower than untuned in every round, but the control was slower still in one round."""
    verdict = models.tuned_comparison(
        untuned=rounds(10, 10, 10), tuned=rounds(11, 11, 11), control=rounds(12, 10, 10)
    )
    assert not verdict["slower"]
    assert abs(verdict["noise"] - 0.2) < 1e-9


def test_tuned_faster_is_not_flagged():
    verdict = models.tuned_comparison(
        untuned=rounds(10, 10), tuned=rounds(9, 9), control=rounds(10, 10)
    )
    assert not verdict["slower"] and verdict["noise"] == 0
