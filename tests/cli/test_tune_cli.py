"""`tvmc tune`, `tvmc records` and `tvmc compile --tuning-records` through Click's runner, and
once as a real subprocess."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tests.cli.test_compile_run_cli import error, ok, tvmc
from tests.driver.test_tuning import FakeMeasurer, write_conv_model
from tvmc.autotune import read_records
from tvmc.driver import tuning


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_conv_model(tmp_path_factory.mktemp("tune_cli"))


class FakeMeasurers:
    """Stands in for LocalMeasurer: makes FakeMeasurers and keeps them."""

    def __init__(self) -> None:
        self.made: list[FakeMeasurer] = []
        self.interrupt_after: int | None = None

    def __call__(self, options=None, target: str = "llvm") -> FakeMeasurer:
        self.made.append(FakeMeasurer(self.interrupt_after))
        return self.made[-1]


@pytest.fixture
def fake_measurers(monkeypatch: pytest.MonkeyPatch) -> FakeMeasurers:
    fakes = FakeMeasurers()
    monkeypatch.setattr(tuning, "LocalMeasurer", fakes)
    return fakes


def test_tasks_list_text_and_json(model: Path):
    text = ok(tvmc("tune", model, "--tasks", "list")).stdout
    assert "conv.llvm" in text and "configs" in text and "1x3x16x16, 8x3x3x3, 8" in text
    document = json.loads(ok(tvmc("tune", model, "--tasks", "1,list", "--format", "json")).stdout)
    (task,) = document["tasks"]
    assert task["index"] == 1 and task["op"] == "Conv" and task["configs"] > 1
    assert task["args"][0] == ["TENSOR", [1, 8, 16, 16], "float32"] and task["flops"] == 65536


def test_user_errors_are_one_line(model: Path, tmp_path: Path):
    error(tvmc("tune", model), 2, r"needs -o PATH \(or --tuning-records PATH\)")
    error(tvmc("tune", model, "-o", tmp_path / "l.json", "--tasks", "7"), 2, "task 7 out of range")
    error(tvmc("tune", model, "-o", tmp_path / "l.json", "--tasks", "x-"), 2, "--tasks: 'x-'")
    error(tvmc("compile", model, "--tuning-records", tmp_path / "none.json"), 2, "does not exist")
    error(tvmc("records", "show", tmp_path / "none.json"), 2, "does not exist")
    missing_dir = tmp_path / "no" / "l.json"
    error(tvmc("tune", model, "-o", missing_dir, "--trials", "2"), 2, "cannot write")
    error(
        tvmc("tune", model, "-o", tmp_path / "l.json", "--paired-rounds", "3"),
        2,
        "paired_rounds must be 0 \\(no check\\) or at least 5",
    )


def test_short_real_tune_then_compile_and_records(model: Path, tmp_path: Path):
    log, best = tmp_path / "log.json", tmp_path / "best.json"
    args = ["tune", model, "--tuning-records", log, "--trials", "4", "--tuner", "random"]
    result = ok(tvmc(*args, "--repeat", "1", "--paired-rounds", "5"))
    for setting in (
        "tuning settings",
        "early stopping",
        "min_repeat_ms",
        "parallel builds",
        "resumed records",
        "(new)",
        "tuning summary",
        "speedup",
        "paired check",
        "applied",
    ):
        assert setting in result.stdout, setting
    assert (
        "task 1/2 #0 Conv 3x3 3->8 @16x16: 2 trials" in result.stderr
        and "next: tvmc compile" in result.stderr
    )
    verdicts = [r for r in read_records(str(log)) if r.verdict is not None]
    assert len(list(read_records(str(log)))) == 4 + len(verdicts) and len(verdicts) <= 2

    document = json.loads(
        ok(tvmc(*args, "--trials", "6", "--paired-rounds", "0", "--format", "json")).stdout
    )
    assert (
        document["settings"]["tuner"] == "random" and document["settings"]["resumed_records"] == 4
    )
    assert document["new_records"] == 2 and [t["resumed"] for t in document["tasks"]] == [2, 2]
    assert document["settings"]["paired_rounds"] == 0
    assert [t["verdict"] for t in document["tasks"]] == [None, None]
    assert all(t["best_gflops"] and t["speedup"] for t in document["tasks"])

    compiled = ok(tvmc("compile", model, "--tuning-records", log, "-o", tmp_path / "m.tar"))
    assert "tuning  2 of 2 tasks tuned" in compiled.stdout

    shown = ok(tvmc("records", "show", log)).stdout
    total = 6 + len(verdicts)
    assert "conv.llvm" in shown and "6 record(s), 2 workload(s)" in shown  # verdicts: no trials
    assert "applied" in shown
    workloads = json.loads(ok(tvmc("records", "show", log, "--json")).stdout)["workloads"]
    assert [w["trials"] for w in workloads] == [3, 3] and workloads[0]["best_gflops"] > 0
    assert f"kept 2 of {total}" in ok(tvmc("records", "best", log, "-o", best)).stdout
    assert len(list(read_records(str(best)))) == 2


def test_ctrl_c_exits_130_with_the_records_on_disk(model, tmp_path, fake_measurers):
    log = tmp_path / "log.json"
    fake_measurers.interrupt_after = 3  # one build at a time: batches go 2 configs at a time
    result = tvmc(
        "tune", model, "-o", log, "--trials", "10", "--tuner", "random", "--parallel", "1"
    )
    assert result.exit_code == 130, (result.stdout, result.stderr)
    assert "Interrupted: 4 record(s) of this run are in" in result.stderr
    assert "interrupted" in result.stdout  # the summary of what was done
    assert len(list(read_records(str(log)))) == len(fake_measurers.made[0].measured) == 4


def test_progress_bars_on_a_terminal(model, tmp_path, monkeypatch, fake_measurers):
    screen = io.StringIO()
    monkeypatch.setattr("tvmc.cli.tune.err", Console(file=screen, force_terminal=True, width=120))
    shown = ok(tvmc("tune", model, "-o", tmp_path / "log.json", "--trials", "6", "--tuner",
                    "random")).stdout  # fmt: skip
    assert "#0 Conv 3x3 3->8 @16x16" in screen.getvalue() and "GFLOP/s" in screen.getvalue()
    measured = fake_measurers.made[0].measured
    assert len(set(measured)) == 6  # and the paired checks re-time some of them
    assert "applied" in shown and "8 rounds of the best config" in shown


def test_tasks_list_in_a_subprocess(model: Path):
    command = [sys.executable, "-m", "tvmc", "tune", str(model), "--tasks", "list", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert [t["index"] for t in json.loads(done.stdout)["tasks"]] == [0, 1]


def test_tvmc_form_prior_records_are_read_and_out_is_written(model, tmp_path, fake_measurers):
    """`--tuning-records PRIOR -o OUT`: PRIOR's configs are skipped and seed the tuners, OUT
    gets only this run's records, PRIOR is left as it was."""
    prior, out = tmp_path / "prior.json", tmp_path / "new.json"
    ok(tvmc("tune", model, "-o", prior, "--trials", "6", "--tuner", "random"))
    before = prior.read_bytes()
    seen = {(r.workload, r.config["index"]) for r in read_records(str(prior))}
    args = ["tune", model, "--tuning-records", prior, "-o", out, "--trials", "6"]
    args += ["--paired-rounds", "0"]  # a check could re-time a prior config
    document = json.loads(ok(tvmc(*args, "--tuner", "random", "--format", "json")).stdout)
    assert document["settings"]["prior_records"] == str(prior)
    assert prior.read_bytes() == before  # only read
    new = list(read_records(str(out)))
    assert len(new) == 6  # prior configs do not count toward the trials
    measured = set(fake_measurers.made[-1].measured)
    assert not measured & seen  # nothing measured twice
    assert {(r.workload, r.config["index"]) for r in new} == measured


def test_prior_records_must_exist(model, tmp_path, fake_measurers):
    missing = tmp_path / "nope.json"
    error(tvmc("tune", model, "--tuning-records", missing, "-o", tmp_path / "o.json"), 2,
          "does not exist")  # fmt: skip
