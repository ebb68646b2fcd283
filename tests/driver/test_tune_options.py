"""TuneOptions: the checks every entry (CLI flags, keywords, the dataclass) shares, the keyword
form `tvmc.tune(model, trials=...)` built on it, and the --tasks syntax checked before a model
is read."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import tvmc
from tests.driver.test_tuning import Events, FakeMeasurer, write_conv_model
from tvmc.autotune import read_records
from tvmc.driver import tuning
from tvmc.driver.tune_options import TuneOptions, parse_tasks, tune_options
from tvmc.errors import UsageError


def test_defaults_are_tvmcs_and_measure_options_follow():
    options = TuneOptions()
    assert (options.target, options.tuner, options.trials) == ("llvm", "xgb", 1000)
    measure = TuneOptions(number=2, repeat=5, min_repeat_ms=7.5, parallel=3).measure_options()
    assert (measure.number, measure.repeat, measure.min_repeat_ms, measure.n_parallel) == (
        2, 5, 7.5, 3,
    )  # fmt: skip
    assert TuneOptions(tasks=[2, 0]).tasks == (2, 0)  # frozen: a tuple


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"trials": -1}, "--trials must be at least 0"),
        ({"tuner": "rnadom"}, "unknown tuner 'rnadom'.*Did you mean 'random'"),
        ({"early_stopping": 0}, "early_stopping must be an integer of at least 1"),
        ({"number": 0}, "number must be"),
        ({"repeat": 0}, "repeat must be"),
        ({"parallel": 0}, "parallel must be"),
        ({"min_repeat_ms": math.nan}, "min_repeat_ms must be a finite number"),
        ({"min_repeat_ms": -1.0}, "min_repeat_ms must be a finite number at least 0"),
        ({"timeout": math.inf}, "timeout must be a finite number greater than 0"),
        ({"timeout": 0}, "timeout must be a finite number greater than 0"),
        ({"target": "llvn -mcpu=znver4"}, "unknown target 'llvn'.*Did you mean 'llvm'"),
        ({"tasks": "lst"}, "--tasks: 'lst'.*Did you mean 'list'"),
        ({"tasks": "5-3"}, "--tasks: empty range '5-3'"),
        ({"device_key": "gpu"}, "--device-key needs --scheduler"),
        ({"scheduler": "tcp://h:8786"}, "--scheduler needs --device-key"),
    ],
)
def test_bad_options_are_usage_errors(fields, message):
    with pytest.raises(UsageError, match=message):
        TuneOptions(**fields)


def test_keywords_build_on_options():
    base = TuneOptions(trials=8, tuner="random")
    assert tune_options(base, trials=4, number=None) == TuneOptions(trials=4, tuner="random")
    assert tune_options(None, target="llvm -mcpu=znver4").target == "llvm -mcpu=znver4"
    with pytest.raises(TypeError, match=r"unknown tuning option\(s\) 'trails'.*'trials'"):
        tune_options(None, trails=3)
    with pytest.raises(UsageError, match="--trials"):
        tune_options(base, trials=-2)  # replace checks as construction does


def test_tasks_syntax_apart_from_the_task_count():
    assert parse_tasks("0,3-5,-2,6-,list") == (((0, 0), (3, 5), (None, 2), (6, None)), False, True)
    assert parse_tasks("all") == ((), True, False) and parse_tasks(None) == ((), True, False)
    assert TuneOptions(tasks="1,list").lists_tasks and not TuneOptions(tasks="1").lists_tasks


def test_tune_takes_options_or_keywords_alike(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(tuning, "LocalMeasurer", lambda *args: FakeMeasurer())
    model = tvmc.load(str(write_conv_model(tmp_path)))
    by_options = tvmc.tune(
        model,
        tuning_records=tmp_path / "a.json",
        progress=Events(),
        options=TuneOptions(trials=6, tuner="random", tasks="1", seed=0),
    )
    by_keywords = model.tune("llvm", tmp_path / "b.json", 6, tuner="random", tasks="1", seed=0,
                             progress=Events())  # fmt: skip
    a, b = ([r for r in read_records(path) if r.verdict is None]
            for path in (by_options, by_keywords))  # fmt: skip
    assert len(a) == len(b) == 6 and {r.task_name for r in a} == {"conv.llvm"}
    assert [r.config["index"] for r in a] == [r.config["index"] for r in b]
    with pytest.raises(TypeError, match="unknown tuning option"):
        tvmc.tune(model, tuning_records=tmp_path / "c.json", trails=6)
    with pytest.raises(UsageError, match="task 5 out of range"):
        tvmc.tune(model, tuning_records=tmp_path / "c.json", tasks="5", progress=Events())
