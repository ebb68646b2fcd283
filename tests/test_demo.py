"""`make demo` end to end (slow: tunes, compiles twice, runs), with fewer trials and runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tvmc import demo
from tvmc.autotune import read_records
from tvmc.driver.objects import TVMCResult, format_more_times
from tvmc.runtime.timing import Timings


@pytest.mark.slow
def test_demo_tunes_compiles_runs_and_compares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "TRIALS_PER_TASK", 4)
    monkeypatch.setattr(demo, "REPEAT", 3)
    monkeypatch.setattr(demo, "ROUND_SECONDS", 0.0)
    (tmp_path / "tuning.json").write_text("stale\n")  # replaced: each demo tunes afresh
    demo.main(str(tmp_path))
    lines = capsys.readouterr().out.splitlines()
    for step in ("[1/5]", "[2/5]", "[3/5] tvmc.tune_tasks: 3 heaviest", "[4/5]", "[5/5]"):
        assert any(line.startswith(step) for line in lines), step
    assert sum(line == "Execution time summary:" for line in lines) == 2
    ratio = next(line for line in lines if line.startswith("tuned vs untuned: "))
    applied = int(ratio.split(" tasks, ")[1].split(" applied")[0])
    assert sum("applied: kept" in line for line in lines) == applied
    assert any("the same code" in line for line in lines) == (applied == 0)
    assert any(line.startswith("onnxruntime: ") for line in lines)
    records = [r for r in read_records(str(tmp_path / "tuning.json")) if r.verdict is None]
    assert len({r.workload for r in records}) == 3 and len(records) == 12
    assert sum("applied: " in line for line in lines) == 3  # each task's paired check
    assert (tmp_path / "light_squeezenet-tuned.tar").is_file()


def test_packages_alternate_in_rounds_with_the_order_flipped(monkeypatch: pytest.MonkeyPatch):
    """A slow spell hits both packages: rounds alternate, each round's order flipped, and
    each result holds all its rounds' runs."""
    calls: list[str] = []

    def fake_run(
        package: str, inputs: dict, benchmark: bool, repeat: int, duration: float
    ) -> TVMCResult:
        calls.append(package)
        runs = (float(len(calls)),) * repeat
        times = Timings(runs, repeat, 0.5, 1, thread_runs=((2, repeat + 1),))
        return TVMCResult({"y": np.zeros(1)}, times)

    monkeypatch.setattr(demo.tvmc, "run", fake_run)
    monkeypatch.setattr(demo, "REPEAT", 6)
    monkeypatch.setattr(demo, "ROUNDS", 3)
    plain, tuned = demo.run_alternating(["untuned", "tuned"], {})
    assert calls == ["untuned", "tuned", "tuned", "untuned", "untuned", "tuned"]
    assert plain.times.results == (1.0, 1.0, 4.0, 4.0, 5.0, 5.0)
    assert tuned.times.results == (2.0, 2.0, 3.0, 3.0, 6.0, 6.0)
    assert (plain.times.runs, plain.times.seconds, plain.times.warmup) == (6, 1.5, 3)
    assert plain.times.thread_runs == ((2, 9),)


def test_merged_rounds_keep_the_full_thread_count_first():
    """The time table names the first count the full one ("runs on 2 threads N, M on 1")."""
    rounds = [Timings((1.0,), 1, 0.1, 1, thread_runs=((2, 5), (1, 3))),
              Timings((1.0,), 1, 0.1, 1, thread_runs=((1, 4),))]  # fmt: skip
    merged = demo.merged_timings(rounds)
    assert merged.thread_runs == ((2, 5), (1, 7))
    assert "runs on 2 threads 5, 7 on 1" in format_more_times(merged)
