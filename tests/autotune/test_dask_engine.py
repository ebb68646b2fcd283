"""DaskMeasurer on an in-process cluster (one build worker, one device worker, threads of this
process): results in order, every error code as local tuning, records through tune_tasks, and the
clear errors (no scheduler, no device, no extra)."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator

import pytest

distributed = pytest.importorskip("distributed")

from tests.autotune.test_measure import (  # noqa: E402  (after the skip)
    FAST,
    MODES,
    PROBE,
    _probe_rule,
    _probe_space,
    _probe_template,
    conv_task,
    probe,
    probe_task,
)
from tvmc.autotune import read_records  # noqa: E402
from tvmc.autotune.dask_engine import DaskMeasurer, Span, import_distributed  # noqa: E402
from tvmc.autotune.measure import MeasureInput  # noqa: E402
from tvmc.driver.tuning import tune_tasks  # noqa: E402
from tvmc.driver.tuning_report import TuningProgress  # noqa: E402
from tvmc.errors import UsageError  # noqa: E402
from tvmc.ops import OPS  # noqa: E402
from tvmc.ops.lowering import Template  # noqa: E402
from tvmc.ops.registry import OPAQUE, OpDef, register  # noqa: E402

DEVICE = "cpu0"


@pytest.fixture(scope="module", autouse=True)
def _probe_registered() -> Iterator[None]:
    """test_measure unregisters its probe op when its own tests end; the driver needs it here.
    Registered again here, it goes again at the end (test_measure, if it runs later, has its
    own registration from its import)."""
    mine = PROBE not in OPS
    if mine:
        lowering = Template(_probe_template, _probe_space)
        register(OpDef(PROBE, _probe_rule, lambda attrs, x: x,
                       {"cpu": lowering, "cuda": lowering}, kind=OPAQUE))  # fmt: skip
    yield
    if mine:
        OPS.pop(PROBE, None)


def local_cluster() -> distributed.SpecCluster:
    """A scheduler, a build worker (2 builds at once) and a device worker, in this process."""
    worker = {"cls": distributed.Worker, "options": {"dashboard": False}}
    spec = {
        "builder": {**worker, "options": {"nthreads": 2, "resources": {"build": 2}}},
        "device": {**worker, "options": {"nthreads": 1, "resources": {DEVICE: 1}}},
    }
    options = {"dashboard": False, "dashboard_address": ":0"}
    return distributed.SpecCluster(
        workers=spec, scheduler={"cls": distributed.Scheduler, "options": options}
    )


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    with local_cluster() as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def measurer(scheduler: str) -> Iterator[DaskMeasurer]:
    with DaskMeasurer(FAST, scheduler=scheduler, device_key=DEVICE) as m:
        yield m


def assert_serial(spans: list[Span]) -> None:
    """No two runs overlapped on one device worker."""
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for address, start, end in spans:
        assert start <= end
        by_worker.setdefault(address, []).append((start, end))
    for runs in by_worker.values():
        runs.sort()
        for (_, end), (start, _) in zip(runs, runs[1:]):
            assert end <= start, "two measurements overlapped on one device"


def test_conv_configs_in_order_one_run_at_a_time(measurer):
    task = conv_task()
    configs = [task.space.get(i) for i in (0, 3, 7, len(task.space) - 1)]
    before = len(measurer.spans)
    results = measurer.measure([MeasureInput(task, c) for c in configs])
    assert [r.error_no for r in results] == [0] * 4, [r.error_msg for r in results]
    for result in results:
        assert len(result.costs) == FAST.repeat and min(result.costs) > 0
        assert result.all_cost >= sum(result.costs)
    assert len(measurer.spans) == before + 4
    assert_serial(measurer.spans)


def test_every_failure_is_told_apart_as_in_local_tuning(measurer):
    task = probe_task()
    modes = ["ok", "raise", "wrong", "crash", "hang", "sleep", "ok"]
    results = measurer.measure([probe(task, m) for m in modes])
    assert [r.error_no for r in results] == [0, 1, 5, 4, 7, 6, 0], {
        m: (r.error_no, r.error_msg[-200:]) for m, r in zip(modes, results)
    }
    assert "SIGSEGV" in results[3].error_msg or "signal" in results[3].error_msg
    assert FAST.timeout <= results[4].all_cost < FAST.timeout + 5, "run time, not queue time"
    assert set(MODES) >= set(modes)
    assert_serial(measurer.spans)


def test_stream_yields_each_input_once(measurer):
    task = probe_task()
    inputs = [probe(task, "ok"), probe(task, "wrong"), probe(task, "raise")]
    seen = dict(measurer.stream(inputs))
    assert sorted(seen) == [0, 1, 2]
    assert [seen[i].error_no for i in range(3)] == [0, 5, 1]
    assert list(measurer.stream([])) == []


def test_an_abandoned_stream_cancels_what_is_queued(measurer):
    """Ctrl-C mid-batch: the queued builds and runs go, nothing keeps the workers busy."""
    task = conv_task()
    stream = measurer.stream([MeasureInput(task, task.space.get(i)) for i in range(8)])
    next(stream)
    stream.close()

    def tasks_left(dask_scheduler) -> int:
        return len(dask_scheduler.tasks)

    deadline = time.monotonic() + 10
    while measurer.client.run_on_scheduler(tasks_left) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert measurer.client.run_on_scheduler(tasks_left) == 0


def test_describe_names_the_cluster(measurer, scheduler):
    rows = dict(measurer.describe())
    assert rows["scheduler"] == scheduler
    assert rows["device key"].startswith(DEVICE)
    assert "1 build (2 builds at once), 1 device" in rows["workers"]
    assert rows["devices seen"] == "device"
    assert set(measurer.in_flight()) == {"device"}


class Summary(TuningProgress):
    def finish(self, summary):
        self.summary = summary


def test_tune_tasks_writes_every_result_and_resumes(measurer, tmp_path):
    path = tmp_path / "records.json"
    task = conv_task()
    progress = Summary()
    tune_tasks([task], path, "random", [6], measurer=measurer, progress=progress, seed=1)
    records = list(read_records(path))
    trials = [r for r in records if r.verdict is None]
    assert len(trials) == 6 and len({r.config["index"] for r in trials}) == 6
    assert all(r.error_no == 0 for r in records)
    # the paired check ran on the cluster too, unless the default was the best found
    stats = progress.summary.tasks[0]
    verdicts = [r for r in records if r.verdict is not None]
    if stats.verdict == "default best":
        assert verdicts == []
    else:
        assert stats.verdict in ("kept", "default won") and len(verdicts) == 1
        assert len(verdicts[0].costs) == len(verdicts[0].verdict.default_costs) == 8
    tune_tasks([task], path, "random", [8], measurer=measurer, progress=TuningProgress(), seed=1)
    again = [r for r in read_records(path) if r.verdict is None]
    assert len(again) == 8 and len({r.config["index"] for r in again}) == 8
    assert_serial(measurer.spans)


def test_tune_tasks_connects_by_itself(scheduler, tmp_path):
    path = tmp_path / "records.json"
    progress = TuningProgress()
    tune_tasks([conv_task()], path, "random", [2], scheduler=scheduler, device_key=DEVICE,
               priority=1, progress=progress, seed=2, paired_rounds=0)  # fmt: skip
    assert [r.error_no for r in read_records(path)] == [0, 0]


def test_no_worker_with_the_device_key_is_a_clear_error(scheduler):
    with pytest.raises(UsageError, match=r"advertises 'h200'.*tvmc worker .*--device-key h200"):
        DaskMeasurer(FAST, scheduler=scheduler, device_key="h200", device_wait=0.5)
    with pytest.raises(UsageError, match="must name a device"):
        DaskMeasurer(FAST, scheduler=scheduler, device_key="build")


def test_unreachable_scheduler_is_a_clear_error():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UsageError, match="cannot reach the Dask scheduler"):
        DaskMeasurer(FAST, scheduler=f"tcp://127.0.0.1:{port}", device_key=DEVICE,
                     connect_timeout=1.0)  # fmt: skip


def test_device_key_needs_a_scheduler(tmp_path):
    with pytest.raises(UsageError, match="--scheduler"):
        tune_tasks([conv_task()], tmp_path / "r.json", trials=1, device_key=DEVICE)
    with pytest.raises(UsageError, match="--device-key"):
        tune_tasks([conv_task()], tmp_path / "r.json", trials=1, scheduler="tcp://127.0.0.1:1")


def test_missing_extra_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    with pytest.raises(UsageError, match=r"pip install 'tvmc\[dist\]'"):
        import_distributed()
    with pytest.raises(UsageError, match=r"tvmc\[dist\]"):
        DaskMeasurer(FAST, scheduler="tcp://127.0.0.1:1", device_key=DEVICE)


def test_a_lost_device_ends_the_waiting_measurements_as_errors():
    task = conv_task()
    inputs = [MeasureInput(task, task.space.get(i)) for i in range(10)]
    with local_cluster() as cluster:
        with DaskMeasurer(FAST, scheduler=cluster.scheduler_address, device_key=DEVICE,
                          device_wait=1.0) as measurer:  # fmt: skip
            results = {}
            for i, result in measurer.stream(inputs):
                results[i] = result
                if len(results) == 1:  # the only device goes away mid-batch
                    cluster.sync(cluster.workers["device"].close)
            assert sorted(results) == list(range(10))
            codes = [r.error_no for r in results.values()]
            assert codes.count(0) >= 1 and set(codes) <= {0, 4}
            lost = [r for r in results.values() if r.error_no]
            assert lost and all("no worker with device key" in r.error_msg for r in lost)
            with pytest.raises(UsageError, match="advertises 'cpu0'"):
                measurer.measure(inputs[:1])


def test_builds_and_cpu_measurements_on_one_host_take_turns(tmp_path, monkeypatch):
    """A measurement waits for the build in flight; a build asked for meanwhile waits for it."""
    import threading

    from tvmc.autotune import dask_engine

    monkeypatch.setattr(dask_engine, "HOST_LOCK", str(tmp_path / "host.lock"))
    log: list[str] = []
    building, measuring_asked = threading.Event(), threading.Event()

    def first_build() -> None:
        with dask_engine.host_turn(exclusive=False):
            log.append("build 1 starts")
            building.set()
            measuring_asked.wait(10)
            time.sleep(0.2)  # the measurement (and the second build) queue behind this build
            log.append("build 1 ends")

    def measurement() -> None:
        building.wait(10)
        measuring_asked.set()
        with dask_engine.host_turn(exclusive=True):
            log.append("measure starts")
            time.sleep(1.0)  # the second build asks meanwhile
            log.append("measure ends")

    def second_build() -> None:
        measuring_asked.wait(10)
        time.sleep(0.5)  # asked while the measurement waits or runs
        with dask_engine.host_turn(exclusive=False):
            log.append("build 2 starts")

    threads = [threading.Thread(target=f) for f in (first_build, measurement, second_build)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert log == ["build 1 starts", "build 1 ends", "measure starts", "measure ends",
                   "build 2 starts"]  # fmt: skip
