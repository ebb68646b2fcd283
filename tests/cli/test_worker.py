"""`tvmc worker` and `tvmc tune --scheduler`: argument errors through Click's runner, and one real
cluster on loopback (a `dask scheduler`, a build worker, a device worker that is killed mid-run
and replaced) tuning a small conv task."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from tests.autotune.test_dask_engine import assert_serial, local_cluster  # noqa: E402
from tests.autotune.test_measure import FAST, conv_task  # noqa: E402
from tests.cli.test_compile_run_cli import error, ok, tvmc  # noqa: E402
from tests.driver.test_tuning import write_conv_model  # noqa: E402
from tvmc.autotune import read_records  # noqa: E402
from tvmc.autotune.dask_engine import DaskMeasurer  # noqa: E402
from tvmc.cli.tune import in_flight_text  # noqa: E402
from tvmc.driver.tuning import tune_tasks  # noqa: E402
from tvmc.driver.tuning_report import TuningProgress  # noqa: E402

TRIALS = 14
KILL_AFTER = 3  # records in the file when the device worker is killed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_worker_needs_one_role():
    error(tvmc("worker", "--scheduler", "tcp://127.0.0.1:1"), 2, "exactly one of --device-key")
    both = tvmc("worker", "--scheduler", "tcp://127.0.0.1:1", "--build", "--device-key", "gpu")
    error(both, 2, "exactly one of")
    error(
        tvmc("worker", "--scheduler", "x:1", "--device-key", "g", "--nthreads", "2"), 2, "--build"
    )


def test_worker_with_an_unreachable_scheduler_fails_fast():
    start = time.monotonic()
    address = f"tcp://127.0.0.1:{free_port()}"
    result = tvmc("worker", "--scheduler", address, "--build", "--connect-timeout", "1")
    error(result, 2, "cannot reach the Dask scheduler")
    assert time.monotonic() - start < 30


def test_tune_device_key_needs_scheduler(tmp_path: Path):
    model = write_conv_model(tmp_path)
    result = tvmc("tune", model, "-o", tmp_path / "r.json", "--device-key", "gpu")
    error(result, 2, "--device-key needs --scheduler")
    result = tvmc("tune", model, "-o", tmp_path / "r.json", "--scheduler", "tcp://127.0.0.1:1")
    error(result, 2, "--scheduler needs --device-key")


def trials(path):
    """The measurements of a records file (a paired check's verdicts left out)."""
    return [r for r in read_records(path) if r.verdict is None]


def test_tune_on_an_in_process_cluster_shows_it(tmp_path: Path):
    model, path = write_conv_model(tmp_path), tmp_path / "r.json"
    with local_cluster() as cluster:
        address = cluster.scheduler_address
        args = ["--tasks", "0", "--trials", "3", "--tuner", "random", "--repeat", "1"]
        result = ok(tvmc("tune", model, "-o", path, "--scheduler", address, "--device-key",
                         "cpu0", "--priority", "2", *args))  # fmt: skip
    assert address in result.stdout and "cpu0 (priority 2)" in result.stdout
    assert "1 build (2 builds at once), 1 device" in result.stdout
    assert "devices seen" in result.stdout and "3 new record(s)" in result.stdout
    assert len(trials(path)) == 3 and "applied" in result.stdout  # the paired check ran there
    with local_cluster() as cluster:  # --format json: the cluster beside the summary
        address = cluster.scheduler_address
        result = ok(tvmc("tune", model, "-o", path, "--scheduler", address, "--device-key",
                         "cpu0", "--format", "json", "--tasks", "0", "--trials", "5",
                         "--tuner", "random", "--repeat", "1"))  # fmt: skip
    cluster_json = json.loads(result.stdout)["cluster"]
    assert cluster_json["scheduler"] == address and cluster_json["device_key"] == "cpu0"
    assert cluster_json["build_workers"] == 1 and len(cluster_json["devices"]) == 1
    assert len(trials(path)) == 5


def test_in_flight_text_per_device():
    class Engine:
        def in_flight(self) -> dict[str, int]:
            return {"dev1": 0, "dev0": 2}

    assert in_flight_text(None) == ""
    assert in_flight_text(Engine()) == "; in flight: dev0 2, dev1 0"


# ---- a real cluster ------------------------------------------------------------------------------
class Cluster:
    """Subprocesses on loopback, each killed by its own pid at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []
        port = self.address.rsplit(":", 1)[1]
        self.spawn("scheduler", "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", port,
                   "--no-dashboard")  # fmt: skip

    def spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115  (closed with the process)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        proc = subprocess.Popen([sys.executable, *args], stdout=log, stderr=log, env=env)
        log.close()
        self.procs.append(proc)
        return proc

    def worker(self, name: str, *role: str) -> subprocess.Popen:
        return self.spawn(name, "-m", "tvmc", "worker", "--scheduler", self.address, "--name",
                          name, *role)  # fmt: skip

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def test_real_cluster_survives_a_dead_device_worker(cluster: Cluster, tmp_path: Path):
    cluster.worker("builder", "--build", "--nthreads", "2")
    first = cluster.worker("dev-a", "--device-key", "cpu0")
    path = tmp_path / "records.json"
    measurer = DaskMeasurer(FAST, scheduler=cluster.address, device_key="cpu0",
                            connect_timeout=20.0, device_wait=60.0)  # fmt: skip
    failure: list[BaseException] = []

    def tune() -> None:
        try:
            tune_tasks([conv_task()], path, "random", [TRIALS], measurer=measurer,
                       progress=TuningProgress(), seed=3)  # fmt: skip
        except BaseException as exc:
            failure.append(exc)

    try:
        tuning = threading.Thread(target=tune)
        tuning.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and tuning.is_alive():
            if path.exists() and len(path.read_text().splitlines()) >= KILL_AFTER:
                break
            time.sleep(0.05)
        first.kill()  # SIGKILL mid-run: its measurement in flight is retried on the next device
        first.wait()
        cluster.worker("dev-b", "--device-key", "cpu0")
        tuning.join(timeout=120)
        assert not tuning.is_alive(), "tuning did not finish after the device worker died"
        assert not failure, failure
        spans = list(measurer.spans)
    finally:
        measurer.close()
    records = trials(path)
    assert len(records) == TRIALS, "every measurement is in the file"
    assert len({r.config["index"] for r in records}) == TRIALS
    assert {r.error_no for r in records} <= {0, 4}, [r.error_no for r in records]
    assert sum(r.error_no == 0 for r in records) >= TRIALS - 1
    assert_serial(spans)
    assert len({address for address, _, _ in spans}) == 2, "both device workers measured"
