"""Tuning tasks of the GPU-only spaces (pools, reductions, softmax): extracted for `cuda` targets
and never for `llvm`, weighed by their bytes (they do no FLOPs), reported in GB/s, and tuned
through a whole space on a fake GPU: every config built for real (lowering, launch checks, PTX,
ptxas when installed) and run by the kernel IR interpreter against the op's reference."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tests.runtime.fake_cuda import FakeDriver
from tvmc.autotune.measure import MeasureInput, MeasureOptions, MeasureResult, TaskOp
from tvmc.autotune.measure_cuda import build_cuda, run_cuda
from tvmc.autotune.records import FAILED_COST, read_records
from tvmc.autotune.task import BYTE_FLOPS, Task
from tvmc.autotune.tuner import GridSearchTuner
from tvmc.driver.tuning import share_trials, tune_tasks
from tvmc.driver.tuning_report import TaskStats, TuningProgress, TuningSummary, task_rows
from tvmc.ops.lowering import LowerContext, LoweringTarget
from tvmc.runtime import cuda_driver

SCHEMAS = Path(__file__).resolve().parents[2] / "tvmc" / "schemas"


def write_model(path: Path) -> Path:
    """Conv, Relu, MaxPool, GlobalAveragePool, Flatten, Gemm, Softmax on a 1x3x16x16 input."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "g"),
    ]
    pads = [1, 1, 1, 1]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=pads),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], pads=pads, strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["f"]),
        helper.make_node("Gemm", ["f", "g"], ["y"], transB=1),
        helper.make_node("Softmax", ["y"], ["out"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "pools",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 10])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path / "pools.onnx")
    return path / "pools.onnx"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model(tmp_path_factory.mktemp("gpu_tasks"))


@pytest.fixture(scope="module")
def cuda_tasks(model: Path) -> list[Task]:
    return tvmc.extract_tasks(model, target="cuda -arch=sm_90")


def by_op(tasks: list[Task]) -> dict[str, Task]:
    return {t.op: t for t in tasks}


def test_pool_and_reduction_tasks_on_cuda_only(model, cuda_tasks):
    cpu = tvmc.extract_tasks(model, target="llvm")
    assert [t.op for t in cpu] == ["Conv", "Gemm"]  # as before: the CPU tunes no pool
    ops = by_op(cuda_tasks)
    assert set(ops) == {"Conv", "MaxPool", "GlobalAveragePool", "Softmax", "Gemm"}
    assert all(t.target == "cuda -arch=sm_90" for t in cuda_tasks)
    pool = ops["MaxPool"]
    assert pool.name == "maxpool.cuda" and pool.flops == 0
    assert pool.bytes == (8 * 16 * 16 + 8 * 8 * 8) * 4  # its input and output
    assert [k.name for k in pool.space.knobs] == ["block"]
    assert [k.name for k in ops["Softmax"].space.knobs] == ["reduce_threads"]
    for t in (pool, ops["GlobalAveragePool"], ops["Softmax"]):
        assert t.space.default_index is not None  # the first trial is the untuned schedule
        assert t.work == t.bytes * BYTE_FLOPS > 0


def test_heaviest_first_and_every_task_gets_trials(cuda_tasks):
    works = [t.work * t.weight for t in cuda_tasks]
    assert works == sorted(works, reverse=True)
    assert cuda_tasks[0].op == "Conv" and cuda_tasks[1].op == "MaxPool"  # 110 kFLOP, 10 kB
    shares = share_trials(cuda_tasks, 64)
    assert sum(shares) <= 64 and all(shares)
    assert all(n <= len(t.space) for n, t in zip(shares, cuda_tasks))


def test_reports_show_bytes_per_second_for_tasks_without_flops(cuda_tasks):
    pool, conv = by_op(cuda_tasks)["MaxPool"], by_op(cuda_tasks)["Conv"]
    stats = TaskStats.begin(pool, 1, 0, 1, 0, 0.0, [])
    stats.add([[1e-6]], [0])
    assert stats.best_gflops is None and stats.peak_share is None
    assert stats.best_gbps == pytest.approx(pool.bytes / 1e-6 / 1e9)
    assert f"best {pool.bytes / 1e3:.1f} GB/s" in stats.line()
    assert "GFLOP/s" not in stats.line()
    conv_stats = TaskStats.begin(conv, 0, 0, 1, 0, 100.0, [])
    conv_stats.add([[1e-6]], [0])
    assert f"best {conv.flops / 1e3:.1f} GFLOP/s" in conv_stats.line()
    tune_schema = json.loads((SCHEMAS / "tune.schema.json").read_text())
    task_schema = {**tune_schema["$defs"]["task"], "$defs": tune_schema["$defs"]}
    for s in (stats, conv_stats):
        jsonschema.validate(s.to_json(), task_schema)
    listing = {"model": "pools.onnx", "target": "cuda", "tasks": task_rows(cuda_tasks, range(5))}
    jsonschema.validate(listing, json.loads((SCHEMAS / "tune-tasks.schema.json").read_text()))


class FakeGPUMeasurer:
    """Builds each config as a GPU measurement does (`build_cuda`) and runs it with `run_cuda` on
    a fake GPU that interprets the config's kernels, so wrong numbers are error 5."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.seen: list[int] = []

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        out = []
        for inp in inputs:
            self.seen.append(inp.config.index)
            built = build_cuda(inp)
            if built.error_no:
                out.append(MeasureResult([FAILED_COST], built.error_no, built.seconds,
                                         time.time(), built.error_msg))  # fmt: skip
                continue
            ctx = LowerContext(LoweringTarget(kind="cuda"), inp.config.values, "k")
            drv = FakeDriver(TaskOp.of(inp.task).lower(ctx))
            self.monkeypatch.setattr(cuda_driver, "driver", lambda drv=drv: drv)
            cuda_driver.device.cache_clear()
            out.append(run_cuda(built, MeasureOptions(repeat=1, min_repeat_ms=0)))
        return out

    def close(self) -> None:
        pass


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch):
    measurer = FakeGPUMeasurer(monkeypatch)
    yield measurer
    cuda_driver.device.cache_clear()


@pytest.mark.parametrize("op", ["MaxPool", "GlobalAveragePool", "Softmax"])
def test_a_tuner_measures_the_whole_space_on_a_fake_gpu(op, cuda_tasks, fake_gpu):
    task = by_op(cuda_tasks)[op]
    tuner = GridSearchTuner(task, seed=0)
    results: list[MeasureResult] = []
    tuner.tune(len(task.space), fake_gpu, callbacks=[lambda t, i, r: results.extend(r)])
    assert fake_gpu.seen[0] == task.space.default_index  # the untuned schedule first
    assert sorted(fake_gpu.seen) == list(range(len(task.space)))
    assert [r.error_no for r in results] == [0] * len(task.space), [r.error_msg for r in results]


class Keep(TuningProgress):
    def finish(self, summary: TuningSummary) -> None:
        self.summary = summary


def test_tune_tasks_records_and_summarises_gpu_tasks(cuda_tasks, fake_gpu, tmp_path):
    tasks = [t for t in cuda_tasks if t.op in ("MaxPool", "Softmax")]
    progress = Keep()
    log = tmp_path / "log.json"
    tune_tasks(tasks, log, "random", trials=[4, 2], progress=progress, measurer=fake_gpu)
    records = list(read_records(str(log)))
    assert len(records) == 6 and all(r.error_no == 0 for r in records)
    assert {r.target for r in records} == {"cuda -arch=sm_90"}
    summary = progress.summary.to_json()
    for row in summary["tasks"]:
        assert row["best_gflops"] is None and row["best_gbps"] > 0 and row["bytes"] > 0
        assert row["default_seconds"] is not None
    tune_schema = json.loads((SCHEMAS / "tune.schema.json").read_text())
    task_schema = {**tune_schema["$defs"]["task"], "$defs": tune_schema["$defs"]}
    for row in summary["tasks"]:
        jsonschema.validate(row, task_schema)


def test_cli_lists_and_summarises_gpu_tasks(model, cuda_tasks, fake_gpu, tmp_path):
    from rich.console import Console

    from tests.cli.test_compile_run_cli import ok, tvmc
    from tvmc.cli.tune import print_summary

    listed = ok(tvmc("tune", model, "--target", "cuda", "--tasks", "list")).stdout
    assert "maxpool" in listed and "MB" in listed  # (80 columns: names are cut)
    assert "MB" not in ok(tvmc("tune", model, "--tasks", "list")).stdout  # CPU: as before
    document = json.loads(ok(tvmc("tune", model, "--target", "cuda", "--tasks", "list",
                                  "--json")).stdout)  # fmt: skip
    jsonschema.validate(document, json.loads((SCHEMAS / "tune-tasks.schema.json").read_text()))
    assert {"maxpool.cuda", "softmax.cuda"} <= {t["name"] for t in document["tasks"]}
    progress = Keep()
    tasks = [t for t in cuda_tasks if t.op in ("Softmax",)]
    tune_tasks(tasks, tmp_path / "l.json", "gridsearch", trials=2, progress=progress,
               measurer=fake_gpu)  # fmt: skip
    screen = Console(width=200, record=True)
    print_summary(progress.summary, screen)
    text = screen.export_text()
    assert "GB/s" in text and "Softmax 1x10" in text and "done" in text  # the task's label


def test_compile_applies_the_best_gpu_pool_and_softmax_records(model, cuda_tasks, tmp_path):
    import tarfile

    from tvmc.autotune.records import Record, append_records

    log = tmp_path / "log.json"
    chosen = {"MaxPool": {"block": 64}, "Softmax": {"reduce_threads": 32}}
    for op, values in chosen.items():
        task = by_op(cuda_tasks)[op]
        index = task.space.index_of(values)
        assert index is not None and index != task.space.default_index
        config = task.space.get(index).to_json()
        append_records(str(log), [Record(task.target, task.name, task.args, config, [1e-6], 0)])
    tvmc.compile(model, target="cuda -arch=sm_90", tuning_records=log,
                 package_path=tmp_path / "m.tar")  # fmt: skip
    with tarfile.open(tmp_path / "m.tar") as tar:
        metadata = json.load(tar.extractfile("metadata.json"))
        launches = {launch["kernel"]: launch for launch in json.load(tar.extractfile("mod.json"))[
            "launches"]}  # fmt: skip
    configs = metadata["configs"]
    assert configs["MaxPool_maxpool"] == chosen["MaxPool"]
    assert configs["Softmax_softmax"] == chosen["Softmax"]
    assert metadata["tuning"]["tuned"] == 2
    assert launches["Softmax_softmax"]["block"][0] == 32  # untuned: a thread per row of 10
    assert launches["MaxPool_maxpool"]["block"][0] == 64
