"""`tvmc run --scheduler --device-key` (and TVMC's `--rpc-tracker`/`--rpc-key`): the same tables,
JSON and outputs file as a local run, the one-line errors, and a real `tvmc worker` killed by
SIGKILL mid-run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

pytest.importorskip("distributed")

from tests.cli.test_compile_run_cli import error, ok, tvmc  # noqa: E402
from tests.cli.test_worker import Cluster, free_port  # noqa: E402
from tests.driver.test_compile_run import TVMC_HEADER, write_tiny_model  # noqa: E402
from tests.driver.test_remote import local_cluster  # noqa: E402
from tvmc.driver import TVMCPackage, remote  # noqa: E402
from tvmc.driver.remote import Remote, run_remote  # noqa: E402
from tvmc.errors import RemoteError  # noqa: E402

SCHEMA = Path(__file__).resolve().parents[2] / "tvmc" / "schemas" / "run.schema.json"


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("remote_cli")
    ok(tvmc("compile", write_tiny_model(directory), "-o", directory / "tiny.tar"))
    return directory / "tiny.tar"


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    with local_cluster(box1="cpu0") as cluster:
        yield cluster.scheduler_address


def test_text_output_is_a_local_runs(package: Path, scheduler: str, tmp_path: Path):
    args = ["--print-time", "--print-top", "3", "--profile", "--fill-mode", "ones", "--repeat", "4"]
    here = ok(tvmc("run", package, *args, "-o", tmp_path / "here.npz"))
    there = ok(tvmc("run", package, *args, "-o", tmp_path / "there.npz", "--scheduler",
                    scheduler, "--device-key", "cpu0"))  # fmt: skip
    assert "ran on worker box1 (tcp://" in there.stderr
    before_profile = here.stdout.split("profile (median per call)")[0]
    assert there.stdout.startswith(before_profile), "outputs and top classes as a local run"
    assert there.stdout.count("Sigmoid") == here.stdout.count("Sigmoid") >= 1
    lines = there.stdout.splitlines()
    at = lines.index("Execution time summary:")
    assert lines[at + 1] == TVMC_HEADER and all(float(v) > 0 for v in lines[at + 2].split())
    with np.load(tmp_path / "here.npz") as a, np.load(tmp_path / "there.npz") as b:
        assert a.files == b.files
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name])


def test_json_and_the_tvmc_names(package: Path, scheduler: str):
    args = ["--json", "--print-time", "--repeat", "3", "--profile", "--num-threads", "1"]
    here = json.loads(ok(tvmc("run", package, *args)).stdout)
    tracker = scheduler.removeprefix("tcp://")  # TVMC's HOST:PORT form
    result = ok(tvmc("run", package, *args, "--rpc-tracker", tracker, "--rpc-key", "cpu0"))
    there = json.loads(result.stdout)
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(there)
    assert set(there) == set(here) and there["outputs"] == here["outputs"]
    assert len(there["time"]["results_ms"]) == 3 and there["time"]["mean_ms"] > 0
    assert [r["kernel"] for r in there["profile"]] == [r["kernel"] for r in here["profile"]]


def test_one_line_errors(package: Path, scheduler: str, monkeypatch):
    monkeypatch.setattr(remote, "DEVICE_WAIT", 0.5)
    no_key = tvmc("run", package, "--scheduler", scheduler, "--device-key", "h200")
    error(no_key, 2, r"advertises device key 'h200' \(device keys there: cpu0\)")
    error(tvmc("run", package, "--device-key", "cpu0"), 2, "--device-key needs --scheduler")
    error(tvmc("run", package, "--rpc-tracker", "127.0.0.1:1"), 2, "--scheduler needs")
    cuda = ["--scheduler", scheduler, "--device-key", "cpu0", "--device", "cuda"]
    error(tvmc("run", package, *cuda), 2, r"runs with --device cpu")  # checked before sending


def test_unreachable_scheduler_exits_2_within_seconds(package: Path):
    start = time.monotonic()
    result = tvmc("run", package, "--scheduler", f"tcp://127.0.0.1:{free_port()}",
                  "--device-key", "cpu0")  # fmt: skip
    error(result, 2, r"cannot reach the Dask scheduler .* within 5 s")
    assert time.monotonic() - start < 20


def test_a_killed_worker_is_a_clear_error(package: Path, tmp_path: Path):
    """A real `tvmc worker` process, SIGKILLed mid-run: the client says so, no hang."""
    cluster = Cluster(tmp_path)
    try:
        worker = cluster.worker("dev-a", "--device-key", "cpu0")
        log = (tmp_path / "dev-a.log").read_text
        assert _wait_until(cluster.address, 60, _has_worker), log()[-2000:]
        target = Remote(cluster.address, "cpu0", connect_timeout=20.0, device_wait=2.0)
        failure: list[BaseException] = []

        def run() -> None:
            try:
                run_remote(TVMCPackage(package), target, device="cpu", benchmark=True,
                           repeat=2, min_repeat_ms=4000)  # fmt: skip
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        assert _wait_until(cluster.address, 60, _running), log()[-2000:]
        time.sleep(1.0)  # the client sees where it runs
        worker.kill()
        worker.wait()
        thread.join(60)
        assert not thread.is_alive(), "the client hung after its worker died"
    finally:
        cluster.close()
    assert failure and isinstance(failure[0], RemoteError), failure
    assert "worker 'dev-a' left the cluster during the run" in str(failure[0])


def _wait_until(address: str, timeout: float, check: Callable[[Any], bool]) -> bool:
    """True once `check(client)` holds for a client of the scheduler at `address`."""
    import distributed

    deadline = time.monotonic() + timeout
    with distributed.Client(address, timeout=20, set_as_default=False) as client:
        while time.monotonic() < deadline:
            if check(client):
                return True
            time.sleep(0.2)
    return False


def _has_worker(client: Any) -> bool:
    return bool(client.scheduler_info(n_workers=-1)["workers"])


def _running(client: Any) -> bool:
    """A tvmc run task is processing on a worker."""
    keys = [k for ks in client.processing().values() for k in ks]
    return any(str(k).startswith("tvmc-run-") for k in keys)
