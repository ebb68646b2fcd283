"""`make demo` end to end (slow: tunes, compiles twice, runs), with fewer trials and runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tvmc import demo
from tvmc.autotune import read_records


@pytest.mark.slow
def test_demo_tunes_compiles_runs_and_compares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "TRIALS_PER_TASK", 4)
    monkeypatch.setattr(demo, "REPEAT", 3)
    (tmp_path / "tuning.json").write_text("stale\n")  # replaced: each demo tunes afresh
    demo.main(str(tmp_path))
    lines = capsys.readouterr().out.splitlines()
    for step in ("[1/5]", "[2/5]", "[3/5] tvmc.tune_tasks: 3 heaviest", "[4/5]", "[5/5]"):
        assert any(line.startswith(step) for line in lines), step
    assert sum(line == "Execution time summary:" for line in lines) == 2
    assert any(line.startswith("tuned vs untuned: ") for line in lines)
    assert any(line.startswith("onnxruntime: ") for line in lines)
    records = [r for r in read_records(str(tmp_path / "tuning.json")) if r.verdict is None]
    assert len({r.workload for r in records}) == 3 and len(records) == 12
    assert sum("applied: " in line for line in lines) == 3  # each task's paired check
    assert (tmp_path / "light_squeezenet-tuned.tar").is_file()
