"""tvmc.tune / extract_tasks / tune_tasks, and compile applying records: the --tasks grammar,
trial sharing, resume, Ctrl-C, records summaries; a fake measurer where timing does not matter
and one short real run."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tvmc.autotune import Record, append_records, read_records
from tvmc.autotune.measure import MeasureOptions, MeasureResult
from tvmc.autotune.records import Verdict
from tvmc.driver.records import summarize_records, write_best_records
from tvmc.driver.tune_options import select_tasks
from tvmc.driver.tuning import share_trials
from tvmc.driver.tuning_report import TuningInterrupted, TuningProgress
from tvmc.errors import UsageError
from tvmc.ops import run_reference


def conv_model() -> onnx.ModelProto:
    """Two convs of different shapes (two tasks), a bias and a fused Relu."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((16, 8, 1, 1)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "convs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def write_conv_model(directory: Path) -> Path:
    path = directory / "convs.onnx"
    onnx.save(conv_model(), path)
    return path


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_conv_model(tmp_path_factory.mktemp("tune"))


# ---- --tasks and trials --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, selected, listed",
    [
        ("0", [0], False),
        ("0,2", [0, 2], False),
        ("3-5", [3, 4, 5], False),
        ("-5", [0, 1, 2, 3, 4, 5], False),
        ("6-", [6, 7, 8, 9], False),
        ("all", list(range(10)), False),
        ("list", list(range(10)), True),
        ("1-2,list", [1, 2], True),
        ("2,0,2", [0, 2], False),
        (None, list(range(10)), False),
        ([4, 1], [1, 4], False),
    ],
)
def test_tasks_grammar(spec, selected, listed):
    assert select_tasks(spec, 10) == (selected, listed)


@pytest.mark.parametrize("spec", ["10", "x", "5-3", "1-2-3", "", "-", "0,,1", "-10"])
def test_tasks_grammar_errors(spec):
    with pytest.raises(UsageError, match="--tasks"):
        select_tasks(spec, 10)


class _Space:
    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


class _Task:
    def __init__(self, flops: int, size: int, weight: int = 1):
        self.flops, self.space, self.weight = flops, _Space(size), weight
        self.work = flops  # Task.work: FLOPs, or bytes x BYTE_FLOPS when it does none


def test_trials_are_shared_by_weight_and_flops_within_each_space():
    tasks = [_Task(1000, 10_000), _Task(100, 10_000, weight=5), _Task(1, 10_000), _Task(9, 5)]
    shares = share_trials(tasks, 1000)
    assert sum(shares) == 1000 and shares[3] == 5  # the tiny space is tuned exhaustively
    assert shares[0] > shares[1] > shares[2] >= 16  # every task gets the floor
    assert share_trials(tasks, 8) == [2, 2, 2, 2] and share_trials(tasks, 0) == [0] * 4
    assert share_trials([_Task(5, 3), _Task(5, 4)], 1000) == [3, 4]  # spaces cap the total


def test_the_cli_offers_every_tuner():
    from tvmc.autotune.tuners import TUNERS
    from tvmc.driver.tune_options import TUNER_NAMES

    assert sorted(TUNER_NAMES) == sorted(TUNERS) and TUNER_NAMES[0] == "xgb"


# ---- tuning with a fake measurer -----------------------------------------------------------------
class FakeMeasurer:
    """Costs from the config index (every 5th config fails with a runtime error); it can raise
    KeyboardInterrupt once `interrupt_after` configs are measured, as Ctrl-C would."""

    def __init__(self, interrupt_after: int | None = None):
        self.interrupt_after = interrupt_after
        self.measured: list[tuple[tuple[str, str], int]] = []

    def measure(self, inputs):
        if self.interrupt_after is not None and len(self.measured) >= self.interrupt_after:
            raise KeyboardInterrupt
        results = []
        for inp in inputs:
            index = getattr(inp.config, "index", None)
            if isinstance(index, int) and getattr(inp.config, "space", None) is inp.task.space:
                self.measured.append((inp.task.workload, index))
                failed = index % 5 == 0
            else:  # the default schedule
                index, failed = 50, False
            cost = [1e-5 * (1 + index % 7)] if not failed else [1e9]
            results.append(MeasureResult(cost, 4 if failed else 0, 0.01, time.time()))
        return results

    def close(self) -> None:
        pass

    def check_device(self) -> None:
        """As LocalMeasurer's: this fake always has its device."""


class Events(TuningProgress):
    def __init__(self):
        self.names: list[str] = []
        self.summary = None

    def start(self, plan):
        self.names.append("start")
        self.plan = plan

    def task_start(self, stats):
        self.names.append("task_start")

    def update(self, stats):
        self.names.append("update")

    def task_end(self, stats):
        self.names.append("task_end")

    def finish(self, summary):
        self.names.append("finish")
        self.summary = summary


def measured_keys(path: Path) -> list[tuple[str, int]]:
    return [(r.workload[1], r.config["index"]) for r in read_records(str(path))]


def test_tune_tasks_appends_records_and_resumes_without_measuring_twice(model_path, tmp_path):
    log = tmp_path / "log.json"
    tasks = tvmc.extract_tasks(str(model_path))
    assert len(tasks) == 2 and all(t.op == "Conv" and len(t.space) > 8 for t in tasks)
    measurer, events = FakeMeasurer(), Events()
    path = tvmc.tune_tasks(tasks, log, "random", [4, 4], measurer=measurer, progress=events,
                           paired_rounds=0)  # fmt: skip
    assert path == str(log) and len(measurer.measured) == 8
    assert events.names[0] == "start" and events.names[-1] == "finish"
    assert events.names.count("task_start") == 2 and "update" in events.names
    records = list(read_records(str(log)))
    assert len(records) == 8 and {r.target for r in records} == {"llvm"}
    assert all(r.config["code_hash"] == tasks[0].space.code_hash() for r in records[:4])
    first = events.summary.tasks[0]
    default = tasks[0].space.default_index  # measured first, as a trial of the task
    assert default is not None and measurer.measured[0] == (tasks[0].workload, default)
    if default % 5:  # else FakeMeasurer fails it, and no speedup can be told
        assert first.default_cost == pytest.approx(1e-5 * (1 + default % 7))
        assert first.speedup is not None

    again = FakeMeasurer()
    tvmc.tune_tasks(tasks, log, "random", [4, 4], measurer=again, progress=Events())
    assert again.measured == []  # all planned trials were in the file: no search, no check
    more, events = FakeMeasurer(), Events()
    tvmc.tune_tasks(tasks, log, "xgb", [10, 6], measurer=more, progress=events, paired_rounds=0)
    assert len(more.measured) == 8 and events.plan.resumed == [4, 4]
    keys = measured_keys(log)
    assert len(keys) == 16 and len(set(keys)) == 16  # nothing measured twice


def test_ctrl_c_leaves_every_finished_measurement_on_disk(model_path, tmp_path):
    log = tmp_path / "log.json"
    tasks = tvmc.extract_tasks(str(model_path))
    measurer = FakeMeasurer(interrupt_after=3)
    one_builder = MeasureOptions(n_parallel=1)  # batches go to the measurer 2 configs at a time
    with pytest.raises(TuningInterrupted) as stop:
        tvmc.tune_tasks(
            tasks,
            log,
            "random",
            [5, 5],
            measure_options=one_builder,
            measurer=measurer,
            progress=Events(),
        )
    assert len(measurer.measured) == 4 and measured_keys(log) == [
        (w[1], i) for w, i in measurer.measured
    ]
    summary = stop.value.summary
    assert summary.interrupted and summary.new_records == 4
    assert [s.state for s in summary.tasks] == ["interrupted", "waiting"]
    resumed = FakeMeasurer()
    tvmc.tune_tasks(tasks, log, "random", [5, 5], measurer=resumed, progress=Events(),
                    paired_rounds=0)  # fmt: skip
    assert len(resumed.measured) == 6 and len(set(measured_keys(log))) == 10


def test_compile_applies_the_best_record_per_workload(model_path, tmp_path, caplog):
    log = tmp_path / "log.json"
    tasks = tvmc.extract_tasks(str(model_path))
    tvmc.tune_tasks(tasks[:1], log, "random", 6, measurer=FakeMeasurer(), progress=Events())
    best = min((r for r in read_records(str(log)) if r.error_no == 0), key=lambda r: r.mean_cost)
    with caplog.at_level(logging.WARNING, logger="tvmc"):
        package = tvmc.compile(str(model_path), tuning_records=log, package_path=tmp_path / "m.tar")
    assert "1 of 2 tasks have no usable record" in caplog.text
    assert package.metadata["tuning"] == {
        "records": str(log),
        "tasks": 2,
        "tuned": 1,
        "untuned": 1,
        "stale": 0,
    }
    values = {name: value for name, _kind, value in best.config["entity"]}
    configs = package.metadata["configs"]
    assert values in configs.values() and {} in configs.values()
    assert [n for n, c in configs.items() if c] and package.summary()["tuning"]["tuned"] == 1
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    expected = run_reference(tvmc.load(str(model_path)).graph, {"x": x})["y"]
    np.testing.assert_allclose(package.run(inputs={"x": x}).outputs["y"], expected, 1e-4, 1e-4)


class LuckyMeasurer:
    """The default schedule costs 10 us; the first other config measured costs `first` the
    first time (the machine's fast mode) and `after` ever after; every other config 20 us."""

    def __init__(self, first: float, after: float):
        self.first, self.after = first, after
        self.lucky: tuple | None = None
        self.seen = 0

    def measure(self, inputs):
        results = []
        for inp in inputs:
            key = (inp.task.workload, json.dumps(inp.config.entity))
            if inp.config.index == inp.task.space.default_index:
                cost = 1e-5
            elif self.lucky in (None, key):
                cost = self.first if self.lucky is None else self.after
                self.lucky = key
            else:
                cost = 2e-5
            results.append(MeasureResult([cost], 0, 0.01, time.time()))
        return results

    def close(self) -> None:
        pass

    def check_device(self) -> None:
        pass


@pytest.mark.parametrize(
    "after, verdict, shown",
    [(1.2e-5, "default won", "default 0.83x"), (5e-6, "kept", "kept 2.00x")],
)
def test_the_paired_check_decides_what_compile_applies(model_path, tmp_path, after, verdict,
                                                       shown):  # fmt: skip
    log = tmp_path / "log.json"
    task = tvmc.extract_tasks(str(model_path))[0]
    measurer, events = LuckyMeasurer(5e-6, after), Events()
    tvmc.tune_tasks([task], log, "random", [4], measurer=measurer, progress=events)
    stats = events.summary.tasks[0]
    assert stats.speedup == pytest.approx(2.0)  # the search saw the lucky measurement
    assert stats.verdict == verdict and stats.verdict_text() == shown
    check = stats.to_json()["paired_check"]
    assert check["rounds"] == 8 and check["wins"] == (8 if verdict == "kept" else 0)
    schema = json.loads((Path(tvmc.__file__).parent / "schemas/tune.schema.json").read_text())
    jsonschema.validate(stats.to_json(), {**schema["$defs"]["task"], "$defs": schema["$defs"]})
    records = list(read_records(str(log)))
    assert len(records) == 5 and records[-1].verdict is not None  # 4 trials, then the verdict
    lucky = min(records[:4], key=lambda r: r.mean_cost)
    assert records[-1].config == lucky.config and lucky.mean_cost == 5e-6
    package = tvmc.compile(str(model_path), tuning_records=log, package_path=tmp_path / "m.tar")
    configs = list(package.metadata["configs"].values())  # the other task: untuned, {}
    values = {name: value for name, _kind, value in lucky.config["entity"]}
    assert (values in configs) == (verdict == "kept")
    assert all(c in ({}, values) for c in configs)
    assert package.metadata["tuning"]["tuned"] == 1
    shown = [g for g in summarize_records(log) if g.verdict is not None]
    assert len(shown) == 1 and shown[0].trials == 4  # the verdict is no trial
    assert shown[0].to_json()["verdict"] == {
        "kept": verdict == "kept",
        "speedup": check["speedup"],
        "config_index": lucky.config["index"],
    }
    # `records best` keeps the verdict, so the reduced file compiles the same
    best = tmp_path / "best.json"
    write_best_records(log, best)
    assert [r.verdict for r in read_records(str(best))] == [records[-1].verdict]


def test_without_the_check_the_lowest_cost_wins(model_path, tmp_path):
    log = tmp_path / "log.json"
    task = tvmc.extract_tasks(str(model_path))[0]
    tvmc.tune_tasks([task], log, "random", [4], measurer=LuckyMeasurer(5e-6, 1.2e-5),
                    progress=Events(), paired_rounds=0)  # fmt: skip
    records = list(read_records(str(log)))
    assert len(records) == 4 and all(r.verdict is None for r in records)
    package = tvmc.compile(str(model_path), tuning_records=log, package_path=tmp_path / "m.tar")
    values = {name: value for name, _kind, value in records[1].config["entity"]}
    assert values in package.metadata["configs"].values()  # the lucky config, unchecked


def test_records_of_another_template_version_are_ignored_with_one_warning(
    model_path, tmp_path, caplog
):
    task = tvmc.extract_tasks(str(model_path))[0]
    config = task.space.get(3).to_json()
    log = tmp_path / "log.json"
    append_records(
        str(log),
        [
            Record(
                task.target,
                task.name,
                task.args,
                {**config, "code_hash": "0123456789abcdef"},
                [1e-5],
            )
        ],
    )
    with caplog.at_level(logging.WARNING, logger="tvmc"):
        package = tvmc.compile(str(model_path), tuning_records=log)
    assert "another version of their template" in caplog.text
    assert "2 of 2 tasks have no usable record" in caplog.text
    assert package.metadata["tuning"]["stale"] == 1 and package.metadata["tuning"]["tuned"] == 0


def test_compile_with_a_missing_records_file_is_an_error(model_path, tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        tvmc.compile(str(model_path), tuning_records=tmp_path / "none.json")


def test_records_summary_and_best(model_path, tmp_path):
    task = tvmc.extract_tasks(str(model_path))[0]
    log, best = tmp_path / "log.json", tmp_path / "best.json"

    def record(index: int, cost: float, error_no: int = 0, target: str = "llvm") -> Record:
        return Record(
            target, task.name, task.args, task.space.get(index).to_json(), [cost], error_no
        )

    append_records(
        str(log),
        [
            record(1, 2e-5),
            record(2, 1e-5),
            record(3, 1e9, 4),
            record(4, 1e9, 7),
            record(5, 3e-5, target="llvm -mcpu=x"),
        ],
    )
    groups = summarize_records(log)
    assert [(g.target, g.trials) for g in groups] == [("llvm", 4), ("llvm -mcpu=x", 1)]
    first = groups[0].to_json()
    assert first["best_config"]["index"] == 2 and first["flops"] == task.flops
    assert first["best_gflops"] == pytest.approx(task.flops / 1e-5 / 1e9, rel=1e-3)
    assert first["errors"] == {"runtime error": 1, "run timeout": 1}
    assert write_best_records(log, best) == (1, 5)  # one target kind: one workload
    assert [r.config["index"] for r in read_records(str(best))] == [2]
    assert write_best_records(best, best) == (1, 1)  # in place


# ---- the real thing ------------------------------------------------------------------------------
def test_a_short_real_tune_then_compile(model_path, tmp_path):
    log = tmp_path / "log.json"
    model = tvmc.load(str(model_path))
    path = model.tune(tuning_records=str(log), trials=8, tuner="random", repeat=1, seed=0)
    records = [r for r in read_records(path) if r.verdict is None]
    assert len(records) == 8 and sum(r.error_no == 0 for r in records) >= 6
    assert all(0 < min(r.costs) < 1 for r in records if r.error_no == 0)
    assert len({(r.workload, r.config["index"]) for r in records}) == 8
    verdicts = [r for r in read_records(path) if r.verdict is not None]
    assert len(verdicts) <= 2  # a paired check per task whose search beat the default
    assert all(len(r.costs) == len(r.verdict.default_costs) == 8 for r in verdicts)
    assert tvmc.tune(model, tuning_records=path, trials=8, tuner="random") == path
    assert len(list(read_records(path))) == 8 + len(verdicts)  # resumed: nothing to measure
    package = tvmc.compile(model, tuning_records=path)
    assert package.metadata["tuning"]["tuned"] == 2
    x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
    expected = run_reference(model.graph, {"x": x})["y"]
    np.testing.assert_allclose(package.run(inputs={"x": x}).outputs["y"], expected, 1e-4, 1e-4)


def test_records_json_lines_are_autotvm_v02(model_path, tmp_path):
    task = tvmc.extract_tasks(str(model_path))[0]
    log = tmp_path / "log.json"
    append_records(
        str(log),
        [
            Record(
                task.target, task.name, task.args, task.space.get(1).to_json(), [1e-5], 0, 0.5, 1.0
            )
        ],
    )
    doc = json.loads(log.read_text())
    assert doc["input"][:2] == ["llvm", "conv.llvm"] and doc["version"] == 0.2
    assert doc["input"][2][0] == ["TENSOR", [1, 3, 16, 16], "float32"]
    assert doc["result"] == [[1e-5], 0, 0.5, 1.0]


def test_tuning_for_cuda_without_a_gpu_is_one_clear_error(model_path, tmp_path):
    from tvmc.runtime.cuda_driver import present_arch

    if present_arch() is not None:
        pytest.skip("a GPU is present: tuning for cuda would run")
    tasks = tvmc.extract_tasks(str(model_path), "cuda")
    assert tasks and all(t.target == "cuda -arch=sm_90" for t in tasks)
    log = tmp_path / "log.json"
    with pytest.raises(UsageError, match=r"cannot measure 'cuda -arch=sm_90' configs here: "):
        tvmc.tune_tasks(tasks, log, "random", 4, progress=Events())
    assert list(read_records(str(log), must_exist=False)) == []


def test_records_naming_a_config_the_space_lacks_are_ignored_with_their_own_warning(
    model_path, tmp_path, caplog
):
    """A record with today's code_hash but a config no candidate of the space (an edited file)
    is ignored, and the warning says so rather than blaming a template version."""
    task = tvmc.extract_tasks(str(model_path))[0]
    config = task.space.get(3).to_json()
    entity = [[name, kind, "no such value"] for name, kind, _value in config["entity"]]
    log = tmp_path / "log.json"
    append_records(
        str(log), [Record(task.target, task.name, task.args, {**config, "entity": entity}, [1e-5])]
    )
    with caplog.at_level(logging.WARNING, logger="tvmc"):
        package = tvmc.compile(str(model_path), tuning_records=log)
    assert "name a config their template does not offer" in caplog.text
    assert "another version of their template" not in caplog.text
    assert package.metadata["tuning"]["stale"] == 1 and package.metadata["tuning"]["tuned"] == 0


def test_a_verdict_kept_on_a_mere_majority_compiles_the_default_with_a_warning(
    model_path, tmp_path, caplog
):
    """An older tvmc kept a config that won 4 of 6 paired rounds (light_squeezenet's records,
    3-5% slower end to end): compile applies the default schedule, says why, and `records show`
    reads the verdict as not kept."""
    task = tvmc.extract_tasks(str(model_path))[0]
    config = task.space.get(3).to_json()
    verdict = Verdict(True, (1.0e-5,) * 6)
    costs = [1.42e-5, 0.9e-5, 0.89e-5, 1.02e-5, 0.81e-5, 0.88e-5]  # median 0.89, 4 of 6 won
    log = tmp_path / "log.json"
    append_records(str(log), [Record(task.target, task.name, task.args, config, costs,
                                     verdict=verdict)])  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="tvmc"):
        package = tvmc.compile(str(model_path), tuning_records=log)
    assert "kept a config on too few won rounds" in caplog.text
    assert all(c == {} for c in package.metadata["configs"].values())
    shown = [g for g in summarize_records(log) if g.verdict is not None]
    assert shown[0].to_json()["verdict"]["kept"] is False
    # the same config winning all 6 rounds is applied
    clear = tmp_path / "clear.json"
    append_records(str(clear), [Record(task.target, task.name, task.args, config, [0.9e-5] * 6,
                                       verdict=verdict)])  # fmt: skip
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tvmc"):
        package = tvmc.compile(str(model_path), tuning_records=clear)
    assert "too few won rounds" not in caplog.text
    values = {name: value for name, _kind, value in config["entity"]}
    assert values in package.metadata["configs"].values()
