"""The final paired check: a searched best config against the default, timed alternately on a
machine whose speed mode changes (fake measurers), and its verdict record."""

from __future__ import annotations

import itertools
import math
import time

import pytest

from tvmc.autotune.measure import MeasureResult
from tvmc.autotune.records import Record, Verdict, wins_needed
from tvmc.autotune.task import Task
from tvmc.autotune.verify import decide, default_config, paired_check
from tvmc.ops.space import ConfigSpace

DEFAULT, CANDIDATE = 0, 3


def task(default_index: int | None = DEFAULT) -> Task:
    space = ConfigSpace().other("tile", [1, 2, 4, 8])
    space.default_index = default_index
    return Task("dense.llvm", "Gemm", [["TENSOR", [1, 8], "float32"]], "llvm", space, ["y"])


class ModeMachine:
    """Costs of a config's own speed times the machine's mode: `modes` gives the factor of
    each successive measurement (a slow mode lasts several measurements, as on the VM)."""

    def __init__(self, speeds: dict[int | None, float], modes, fail: set[int] = frozenset()):
        self.speeds, self.modes, self.fail = speeds, iter(modes), fail
        self.order: list[int | None] = []

    def measure(self, inputs):
        results = []
        for inp in inputs:
            index = inp.config.index if inp.config.space is inp.task.space else None
            self.order.append(index)
            cost = self.speeds[index] * next(self.modes)
            error = 4 if index in self.fail else 0
            results.append(MeasureResult([cost, cost], error, 0.01, time.time()))
        return results

    def close(self) -> None:
        pass


def blocks(*factors: float, length: int = 3):
    """Modes that hold for `length` measurements each, cycling through `factors`."""
    return itertools.cycle([f for f in factors for _ in range(length)])


def test_rounds_alternate_which_side_goes_first():
    machine = ModeMachine({DEFAULT: 1.0, CANDIDATE: 0.5}, itertools.repeat(1.0))
    t = task()
    check = paired_check(t, t.space.get(CANDIDATE), machine, rounds=6)
    assert machine.order == [CANDIDATE, DEFAULT, DEFAULT, CANDIDATE] * 3
    assert check.kept and check.wins == 6 and check.speedup == pytest.approx(2.0)


@pytest.mark.parametrize("speed, kept", [(0.9, True), (0.99, False), (1.0, False), (1.3, False)])
def test_a_config_is_kept_only_when_it_wins_beyond_noise_despite_speed_modes(speed, kept):
    # a 2x slow mode that switches every 5 measurements: within most rounds both sides share
    # a mode, so the median ratio sees the configs, not the machine (the 10% faster config
    # loses the one round where it ran in the slow mode and the default in the fast one)
    machine = ModeMachine({DEFAULT: 1.0, CANDIDATE: speed}, blocks(1.0, 2.0, length=5))
    t = task()
    check = paired_check(t, t.space.get(CANDIDATE), machine)
    assert check.kept is kept and len(check.costs) == 8
    assert check.wins == 7 or speed >= 0.99
    assert check.ratio == pytest.approx(speed)


def test_rounds_where_a_side_failed_are_left_out():
    t = task()
    machine = ModeMachine({DEFAULT: 1.0, CANDIDATE: 0.5}, itertools.repeat(1.0), fail={DEFAULT})
    assert paired_check(t, t.space.get(CANDIDATE), machine) is None


def test_the_default_of_a_space_without_a_default_index_is_no_knobs():
    t = task(default_index=None)
    machine = ModeMachine({None: 1.0, CANDIDATE: 1.2}, itertools.repeat(1.0))
    check = paired_check(t, t.space.get(CANDIDATE), machine, rounds=2)
    assert default_config(t).values == {} and machine.order == [CANDIDATE, None, None, CANDIDATE]
    assert not check.kept


def test_the_verdict_record_round_trips():
    t = task()
    machine = ModeMachine({DEFAULT: 1.0, CANDIDATE: 0.8}, itertools.repeat(1.0))
    check = paired_check(t, t.space.get(CANDIDATE), machine, rounds=3)
    record = check.record(t)
    again = Record.decode(record.encode())
    assert again == record and again.config["index"] == CANDIDATE
    assert again.costs == [0.8] * 3 and again.verdict.default_costs == (1.0,) * 3


def test_wins_beyond_chance_and_margin_both_count():
    defaults = (1.0,) * 8
    assert decide((0.5,) * 7 + (2.0,), defaults, 0.97)
    assert not decide((0.5,) * 6 + (2.0,) * 2, defaults, 0.97)  # 6 of 8: chance does it 14%
    assert not decide((0.98,) * 8, defaults, 0.97)  # within the margin
    assert not decide((0.5,) * 4, (1.0,) * 4, 0.97)  # 4 rounds cannot rule out chance


@pytest.mark.parametrize("rounds, needed", [(1, None), (4, None), (5, 5), (6, 6), (8, 7),
                                            (10, 9), (12, 10), (20, 15)])  # fmt: skip
def test_wins_needed_is_a_one_sided_sign_test_at_5_percent(rounds, needed):
    assert wins_needed(rounds) == needed
    if needed is not None:  # the tail from `needed` is within 5%, one more win below is not
        tail = sum(math.comb(rounds, w) for w in range(needed, rounds + 1)) / 2**rounds
        wider = tail + math.comb(rounds, needed - 1) / 2**rounds
        assert tail <= 0.05 < wider


def test_a_verdict_kept_on_a_majority_by_an_older_tvmc_applies_the_default():
    """light_squeezenet's records of the seventh session: a config kept on 4 of 6 rounds."""
    t = task()
    old = Record(t.target, t.name, t.args, t.space.get(CANDIDATE).to_json(),
                 [1.42, 0.9, 0.89, 1.02, 0.81, 0.88],
                 verdict=Verdict(True, (1.0,) * 6))  # fmt: skip
    again = Record.decode(old.encode())  # still a valid line
    assert again.verdict.kept and not again.won_clearly and again.applies_default
    clear = Record(t.target, t.name, t.args, t.space.get(CANDIDATE).to_json(), [0.9] * 6,
                   verdict=Verdict(True, (1.0,) * 6))  # fmt: skip
    assert clear.won_clearly and not clear.applies_default
