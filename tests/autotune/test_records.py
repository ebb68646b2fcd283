"""Tuning records (AutoTVM v0.2 lines) and knob spaces."""

from __future__ import annotations

import json
import logging
import multiprocessing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tvmc.autotune import Record, append_records, best_records, read_records
from tvmc.autotune.records import Verdict
from tvmc.errors import UsageError
from tvmc.ops.space import ConfigSpace, factor_splits

# Written by hand from the format's description, as AutoTVM writes it.
LINE = (
    '{"input": ["llvm -mcpu=znver4", "conv2d.llvm", [["TENSOR", [1, 64, 56, 56], "float32"], '
    '["TENSOR", [64, 64, 3, 3], "float32"], ["ATTRS", {"group": 1}]], {}], '
    '"config": {"index": 5, "code_hash": null, "entity": [["tile_x", "split", [2, 8]], '
    '["order", "other", "b"]]}, "result": [[0.00123, 0.00125], 0, 0.8, 1764460000.5], '
    '"version": 0.2, "tvm_version": "0.1.0"}'
)


def test_decode_a_hand_written_line_and_encode_back():
    record = Record.decode(LINE)
    assert record.target == "llvm -mcpu=znver4" and record.task_name == "conv2d.llvm"
    assert record.config["index"] == 5 and record.costs == [0.00123, 0.00125]
    assert record.error_no == 0 and record.timestamp == 1764460000.5
    assert json.loads(record.encode()) == json.loads(LINE)
    assert Record.decode(record.encode()) == record


def test_a_workload_on_a_fixed_thread_count_is_its_own():
    """An image's kernel of a batch side by side runs on one thread: its args say so, and it
    is another workload than the same op run on every thread."""
    line = _changed('["ATTRS", {"group": 1}]', '["ATTRS", {"group": 1}], ["THREADS", 1]')
    record = Record.decode(line)
    assert record.args[-1] == ["THREADS", 1] and Record.decode(record.encode()) == record
    assert record.workload != Record.decode(LINE).workload


def test_corrupt_and_truncated_lines_are_skipped_with_their_line_number(tmp_path, caplog):
    path = tmp_path / "log.json"
    path.write_text(LINE + "\n" + "{not json\n" + "\n" + LINE[: len(LINE) // 2])
    with caplog.at_level(logging.WARNING, logger="tvmc.autotune"):
        records = list(read_records(str(path)))
    assert len(records) == 1
    assert ":2: skipping" in caplog.text and ":4: skipping" in caplog.text


def _changed(old: str, new: str) -> str:
    assert old in LINE
    return LINE.replace(old, new, 1)


# Lines a fuzzer or an attacker wrote: each is corrupt, not a crash.
INSANE = {
    "error_no 1e999": _changed("], 0, 0.8", "], 1e999, 0.8"),
    "cost 1e400": _changed("[0.00123, 0.00125]", "[1e400, 0.00125]"),
    "cost NaN": _changed("[0.00123, 0.00125]", "[NaN, 0.00125]"),
    "negative cost": _changed("[0.00123, 0.00125]", "[-1, 0.00125]"),
    "huge int cost": _changed("[0.00123, 0.00125]", "[" + "9" * 400 + "]"),
    "error_no 99": _changed("], 0, 0.8", "], 99, 0.8"),
    "error_no true": _changed("], 0, 0.8", "], true, 0.8"),
    "timestamp inf": _changed("1764460000.5", "Infinity"),
    "nested deep": "[" * 100_000 + "]" * 100_000,
    "nested 40": LINE.replace('{"group": 1}', '{"group": ' + "[" * 40 + "]" * 40 + "}"),
    "args a string": LINE.replace(
        '[["TENSOR", [1, 64, 56, 56]', '"x", [["TENSOR", [1, 64, 56, 56]'
    ),
    "shape of floats": _changed("[1, 64, 56, 56]", "[1.5, 64, 56, 56]"),
    "unknown arg kind": _changed('["ATTRS", {"group": 1}]', '["PICKLE", "x"]'),
    "threads 0": _changed('["ATTRS", {"group": 1}]', '["ATTRS", {"group": 1}], ["THREADS", 0]'),
    "threads a string": _changed('{"group": 1}]', '{"group": 1}], ["THREADS", "1"]'),
    "threads twice over": _changed('{"group": 1}]', '{"group": 1}], ["THREADS", 1, 2]'),
    "too long": LINE.replace('"code_hash": null', '"code_hash": "' + "x" * (1 << 20) + '"'),
}


@pytest.mark.parametrize("case", list(INSANE))
def test_insane_lines_are_corrupt(case):
    with pytest.raises(ValueError, match="not a tuning record"):
        Record.decode(INSANE[case])


def test_insane_lines_are_skipped_with_their_line_number(tmp_path, caplog):
    path = tmp_path / "log.json"
    lines = [LINE, INSANE["error_no 1e999"], INSANE["cost 1e400"], INSANE["nested deep"], LINE]
    path.write_text("\n".join(lines) + "\n" + "y" * (3 << 20) + "\n" + LINE + "\n")
    with caplog.at_level(logging.WARNING, logger="tvmc.autotune"):
        records = list(read_records(str(path)))
    assert len(records) == 3
    for number in (2, 3, 4):
        assert f":{number}: skipping a corrupt" in caplog.text
    assert ":6: skipping a line longer than 1048576 characters" in caplog.text


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        list(read_records(str(tmp_path / "none.json")))
    assert list(read_records(str(tmp_path / "none.json"), must_exist=False)) == []


def _record(index, cost, error_no=0, task="dense.llvm", target="llvm"):
    config = {"index": index, "code_hash": None, "entity": [["k", "other", index]]}
    return Record(target, task, [["TENSOR", [1, 8], "float32"]], config, [cost], error_no)


def test_best_record_per_workload_ignores_errors_and_other_targets():
    records = [
        _record(0, 3.0), _record(1, 1.0, error_no=4), _record(2, 2.0),
        _record(3, 0.5, target="cuda -arch=sm_90"), _record(4, 9.0, task="conv2d.llvm"),
    ]  # fmt: skip
    best = best_records(records, "llvm")
    assert {w[0]: r.config["index"] for w, r in best.items()} == {"dense.llvm": 2, "conv2d.llvm": 4}


def _append_many(path, start):
    for i in range(start, start + 200):
        append_records(path, [_record(i, float(i))])


def test_two_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "log.json")
    procs = [multiprocessing.Process(target=_append_many, args=(path, s)) for s in (0, 1000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    indices = sorted(r.config["index"] for r in read_records(path))
    assert indices == list(range(200)) + list(range(1000, 1200))


def test_factor_splits():
    assert factor_splits(8) == [(8, 1), (4, 2), (2, 4), (1, 8)]
    assert (2, 2, 2) in factor_splits(8, 3)
    assert all(f[-1] <= 4 for f in factor_splits(64, 2, max_factor=4))


SPACE = ConfigSpace().split("tile", 12).other("order", ["a", "b", "c"]).annotate("unroll", [0, 1])


@given(st.integers(0, len(SPACE) - 1))
def test_index_and_entity_round_trip(index):
    config = SPACE.get(index)
    assert config.index == index
    assert SPACE.from_entity(json.loads(json.dumps(config.entity))).index == index


def test_first_knob_is_least_significant():
    assert SPACE.get(1).values["tile"] == SPACE.knobs[0].candidates[1]
    assert SPACE.get(len(SPACE.knobs[0].candidates)).values["order"] == "b"


def test_sigkill_mid_run_leaves_only_loadable_lines(tmp_path):
    """A writer killed at a random point: every complete line loads, a torn one is skipped."""
    import os
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "log.json"
    script = (
        "import sys\n"
        "from tests.autotune.test_records import _record\n"
        "from tvmc.autotune import append_records\n"
        "i = 0\n"
        "while True:\n"
        "    append_records(sys.argv[1], [_record(i, float(i))])\n"
        "    i += 1\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], cwd=root)
    deadline = time.time() + 30
    while (not path.exists() or path.stat().st_size < 20_000) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lines = path.read_text().splitlines()
    records = list(read_records(str(path)))
    complete = [line for line in lines if line.endswith("}")]
    assert len(records) == len(complete) >= 50
    assert [r.config["index"] for r in records] == list(range(len(records)))


# ---- verdicts: the paired check's record -----------------------------------------------------
def _verdict(index, costs, default_costs, kept, task="dense.llvm"):
    record = _record(index, 0.0, task=task)
    record.costs = list(costs)
    record.verdict = Verdict(kept, tuple(default_costs))
    return record


def test_a_verdict_round_trips_and_old_readers_see_a_plain_record(tmp_path):
    path = str(tmp_path / "log.json")
    verdict = _verdict(2, [1.0, 1.1, 0.9, 1.0, 1.0], [1.2, 1.3, 1.2, 1.2, 1.2], kept=True)
    append_records(path, [_record(2, 0.5), verdict])
    again = list(read_records(path))
    assert again[1] == verdict and again[0].verdict is None
    assert not again[1].applies_default
    doc = json.loads(verdict.encode())  # AutoTVM's keys as ever, one more beside them
    assert doc["verdict"] == {"kept": True, "default_costs": [1.2, 1.3, 1.2, 1.2, 1.2]}
    assert set(doc) == {"input", "config", "result", "version", "tvm_version", "verdict"}
    del doc["verdict"]  # what a reader that ignores the key sees: a record of that config
    assert Record.decode(json.dumps(doc)).config["index"] == 2


def test_the_last_verdict_decides_over_lower_costs():
    lucky = _record(1, 0.5)  # measured once in the machine's fast mode
    lost = _verdict(1, [2.0, 2.1, 1.9], [1.0, 1.0, 1.0], kept=False)
    later = _record(3, 0.1)  # measured after the check: never compared with the default
    best = best_records([_record(0, 1.0), lucky, lost, later], "llvm")
    assert best[lucky.workload] is lost and best[lucky.workload].applies_default
    kept = _verdict(3, [0.5, 0.6, 0.5, 0.5, 0.5], [1.0] * 5, kept=True)
    best = best_records([_record(0, 1.0), lucky, lost, later, kept], "llvm")
    assert best[lucky.workload] is kept and not kept.applies_default
    # without verdicts (older files): the lowest mean cost, as before
    assert best_records([_record(0, 1.0), lucky, later], "llvm")[lucky.workload] is later


FORGED = {
    "kept but lost": {"kept": True, "default_costs": [0.001, 0.001]},
    "kept on a tie": {"kept": True, "default_costs": [0.00123, 0.00125]},
    "one round short": {"kept": False, "default_costs": [0.002]},
    "kept not a bool": {"kept": 1, "default_costs": [0.002, 0.002]},
    "zero cost": {"kept": False, "default_costs": [0, 0.002]},
    "no default costs": {"kept": False},
    "not an object": [True, [0.002, 0.002]],
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_or_corrupt_verdict_is_a_corrupt_record(name, tmp_path, caplog):
    line = json.loads(LINE)
    line["verdict"] = FORGED[name]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(line) + "\n" + LINE + "\n")
    with caplog.at_level(logging.WARNING, logger="tvmc.autotune"):
        records = list(read_records(str(path)))
    assert len(records) == 1 and records[0].verdict is None
    assert ":1: skipping a corrupt" in caplog.text and "verdict" in caplog.text


def test_a_verdict_of_a_failed_measurement_is_corrupt():
    line = json.loads(LINE)
    line["verdict"] = {"kept": False, "default_costs": [0.002, 0.002]}
    line["result"][1] = 4
    with pytest.raises(ValueError, match="verdict"):
        Record.decode(json.dumps(line))
    line["result"][1] = 0
    assert Record.decode(json.dumps(line)).applies_default
