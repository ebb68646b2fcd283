"""Remote runs (`tvmc.run(..., scheduler=, device_key=)`) on an in-process Dask cluster: the same
outputs, times and profile as a local run; the package verified again on the worker; a crash,
a hang, a lost worker and a missing key each one clear error."""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")  # a dependency of distributed

import tvmc  # noqa: E402
from tests.driver.test_compile_run import write_tiny_model  # noqa: E402
from tests.runtime.forge import flip_byte, rewrite  # noqa: E402
from tvmc.driver import remote  # noqa: E402
from tvmc.driver.remote import Remote, run_remote, run_task  # noqa: E402
from tvmc.errors import InputError, PackageError, RemoteError, UsageError  # noqa: E402
from tvmc.runtime import cuda_driver  # noqa: E402
from tvmc.runtime.cuda_driver import CUDAError  # noqa: E402

DEVICE = "cpu0"


def local_cluster(**devices: str) -> distributed.SpecCluster:
    """A scheduler and one single-threaded device worker per name -> key, in this process."""
    spec = {
        name: {"cls": distributed.Worker,
               "options": {"nthreads": 1, "resources": {key: 1}, "dashboard": False}}
        for name, key in devices.items()
    }  # fmt: skip
    options = {"dashboard": False, "dashboard_address": ":0"}
    return distributed.SpecCluster(
        workers=spec, scheduler={"cls": distributed.Scheduler, "options": options}
    )


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    with local_cluster(device=DEVICE, other="rtx4090") as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> tvmc.TVMCPackage:
    directory = tmp_path_factory.mktemp("remote")
    return tvmc.compile(write_tiny_model(directory), package_path=directory / "tiny.tar")


def test_outputs_times_and_profile_as_a_local_run(scheduler: str, package):
    options = dict(benchmark=True, repeat=4, profile=True)
    here = tvmc.run(package, **options)
    there = tvmc.run(package.package_path, scheduler=scheduler, device_key=DEVICE, **options)
    assert there.worker is not None and there.worker.startswith("device (tcp://")
    assert here.worker is None
    assert there.output_names == here.output_names
    for name in here.outputs:
        np.testing.assert_array_equal(there.outputs[name], here.outputs[name])
    assert there.times is not None and len(there.times.results) == 4 and there.times.min > 0
    assert [(r["node"], r["kernel"]) for r in there.profile] == [
        (r["node"], r["kernel"]) for r in here.profile
    ]
    assert sum(r["share_percent"] for r in there.profile) == pytest.approx(100.0)
    assert "Execution time summary" in there.format_times()


def test_given_inputs_fill_modes_and_threads(scheduler: str, package):
    rng = np.random.default_rng(5)
    given = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    for fill_mode in ("ones", "zeros"):
        here = tvmc.run(package, inputs=given, fill_mode=fill_mode)
        there = tvmc.run(package, inputs=given, fill_mode=fill_mode, num_threads=1,
                         scheduler=scheduler, device_key=DEVICE)  # fmt: skip
        for name in here.outputs:
            np.testing.assert_array_equal(there.outputs[name], here.outputs[name])
    with pytest.raises(InputError, match="unknown input 'z'"):  # checked here, before sending
        tvmc.run(package, inputs={"z": given["x"]}, scheduler=scheduler, device_key=DEVICE)


def test_no_worker_with_the_key_lists_the_keys(scheduler: str, package, monkeypatch):
    monkeypatch.setattr(remote, "DEVICE_WAIT", 0.5)
    pattern = r"'h200' \(device keys there: cpu0, rtx4090\).*tvmc worker .* --device-key h200"
    with pytest.raises(UsageError, match=pattern):
        tvmc.run(package, scheduler=scheduler, device_key="h200")


def test_remote_options_come_in_pairs(package):
    with pytest.raises(UsageError, match="--device-key needs --scheduler"):
        tvmc.run(package, device_key=DEVICE)
    with pytest.raises(UsageError, match="--scheduler needs --device-key"):
        tvmc.run(package, scheduler="tcp://127.0.0.1:1")
    with pytest.raises(UsageError, match="must name a device"):
        tvmc.run(package, scheduler="tcp://127.0.0.1:1", device_key="build")


def test_unreachable_scheduler_fails_within_the_timeout(package):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(UsageError, match="cannot reach the Dask scheduler"):
        run_remote(package, Remote(f"tcp://127.0.0.1:{port}", DEVICE, connect_timeout=1.0),
                   device="cpu")  # fmt: skip
    assert time.monotonic() - start < 15


def test_the_payload_is_bounded(scheduler: str, package, monkeypatch):
    monkeypatch.setenv("TVMC_REMOTE_MAX_BYTES", "1000")
    with pytest.raises(UsageError, match=r"more than a remote run sends \(1,000\)"):
        tvmc.run(package, scheduler=scheduler, device_key=DEVICE)
    payload = Path(package.package_path).read_bytes()
    status, (error_class, message), _ = run_task(
        payload, "0" * 64, "tiny.tar", {"device": "cpu", "inputs": {}}, 30.0
    )
    assert status == "error" and error_class is RemoteError and "at most 1,000 bytes" in message


def test_the_worker_verifies_the_package(package, tmp_path: Path):
    """Bytes changed on the way, or a package that fails read_package there: the same errors."""
    payload = Path(package.package_path).read_bytes()
    options = {"device": "cpu", "inputs": {}}
    status, (error_class, message), worker = run_task(payload, "0" * 64, "a.tar", options, 60.0)
    assert (status, error_class) == ("error", RemoteError) and "arrived damaged" in message
    forged = Path(rewrite(package.package_path, tmp_path / "bad.tar", flip_byte("mod.o"),
                          digests=False)).read_bytes()  # fmt: skip
    digest = hashlib.sha256(forged).hexdigest()
    status, (error_class, message), _ = run_task(forged, digest, "mine/bad.tar", options, 60.0)
    assert status == "error" and error_class is PackageError, message
    assert "'mine/bad.tar'" in message and "mod.o" in message and "on worker" in message
    assert "tvmc-remote-" not in message, "the worker's temporary path is not the user's"
    status, (error_class, message), _ = run_task(forged, digest, "b.tar", options, 60.0, "0.0.1")
    assert error_class is UsageError and "this client 0.0.1: install the same version" in message


def test_a_hung_run_is_stopped_at_the_timeout(scheduler: str, package):
    start = time.monotonic()
    with pytest.raises(RemoteError, match=r"did not finish within 1 s on worker device"):
        tvmc.run(package, scheduler=scheduler, device_key=DEVICE, benchmark=True,
                 min_repeat_ms=60_000, remote_timeout=1.0)  # fmt: skip
    assert time.monotonic() - start < 30
    again = tvmc.run(package, scheduler=scheduler, device_key=DEVICE)  # the worker goes on
    assert again.worker is not None


def _busy_children() -> list[psutil.Process]:
    """This process's worker children (the in-process workers' isolated runs) using a core;
    others (zombies of earlier tests, processes that just ended) are skipped."""
    busy = []
    for child in psutil.Process().children():
        try:
            if "tvmc.autotune.worker" in " ".join(child.cmdline()) and child.cpu_percent(0.2) > 20:
                busy.append(child)
        except psutil.Error:
            continue
    return busy


def test_a_crashing_package_costs_the_run_not_the_worker(scheduler: str, package):
    """A child killed by SIGSEGV mid-run, as a crash of the package's code would."""
    tvmc.run(package, scheduler=scheduler, device_key=DEVICE)  # the child is ready: not importing
    failure: list[BaseException] = []

    def run() -> None:
        try:
            tvmc.run(package, scheduler=scheduler, device_key=DEVICE, benchmark=True,
                     min_repeat_ms=60_000, remote_timeout=20)  # fmt: skip
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        busy = _busy_children()
        if busy:
            for child in busy:
                child.send_signal(11)
            break
    thread.join(30)
    assert not thread.is_alive() and failure, "the run did not end"
    assert isinstance(failure[0], RemoteError), failure[0]
    assert "crashed on worker device" in str(failure[0]) and "SIGSEGV" in str(failure[0])
    assert tvmc.run(package, scheduler=scheduler, device_key=DEVICE).worker is not None


def test_a_lost_worker_is_a_clear_error(package):
    with local_cluster(device=DEVICE) as cluster:
        failure: list[BaseException] = []
        target = Remote(cluster.scheduler_address, DEVICE, device_wait=1.0)

        def run() -> None:
            try:
                run_remote(package, target, device="cpu", benchmark=True, repeat=2,
                           min_repeat_ms=1500)  # fmt: skip
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        worker = cluster.workers["device"]
        deadline = time.monotonic() + 30
        while not worker.state.executing and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.state.executing, "the run never started"
        time.sleep(1.0)  # the client polls twice a second for where its run is
        cluster.sync(worker.close, executor_wait=False)  # mid-run: the run's result is lost
        thread.join(30)
    assert not thread.is_alive() and failure, "the run did not end"
    assert isinstance(failure[0], RemoteError), failure[0]
    assert "'device' left the cluster during the run" in str(failure[0])
    assert "no worker advertises device key 'cpu0'" in str(failure[0])


def test_a_cuda_package_runs_on_the_gpu_of_the_worker(scheduler: str, tmp_path: Path):
    """On the worker's GPU where it has one (outputs as a local run); else the CUDA error a
    local run gives, naming the worker."""
    cuda = tvmc.compile(write_tiny_model(tmp_path), target="cuda", package_path=tmp_path / "g.tar")
    options = dict(device="cuda", benchmark=True, repeat=3, profile=True, end_to_end=True)
    cuda_driver.device.cache_clear()
    try:
        has_gpu = cuda_driver.present_arch() is not None
    finally:
        cuda_driver.device.cache_clear()
    if not has_gpu:
        with pytest.raises(CUDAError, match=r"\(on worker device \(tcp://"):
            tvmc.run(cuda, scheduler=scheduler, device_key=DEVICE, **options)
        return
    here = tvmc.run(cuda, **options)
    there = tvmc.run(cuda, scheduler=scheduler, device_key=DEVICE, **options)
    for name in here.outputs:
        np.testing.assert_array_equal(there.outputs[name], here.outputs[name])
    assert there.times is not None and len(there.times.results) == 3 and there.profile


def test_a_lost_worker_with_another_holding_the_key_costs_a_rerun(package, caplog):
    with local_cluster(dev1=DEVICE, dev2=DEVICE) as cluster:
        results: list[tvmc.TVMCResult] = []
        target = Remote(cluster.scheduler_address, DEVICE, device_wait=1.0)
        options = dict(device="cpu", benchmark=True, repeat=2, min_repeat_ms=1000)
        thread = threading.Thread(
            target=lambda: results.append(run_remote(package, target, **options))
        )
        thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            busy = [w for w in cluster.workers.values() if w.state.executing]
            if busy:
                break
            time.sleep(0.05)
        assert busy, "the run never started"
        time.sleep(1.0)  # the client sees where it runs
        first = busy[0].name
        cluster.sync(busy[0].close, executor_wait=False)
        thread.join(60)
    assert results, "the run did not finish on the other worker"
    assert results[0].worker is not None and not results[0].worker.startswith(first)
    assert f"worker '{first}" in caplog.text and "runs it again on another" in caplog.text


def test_a_worker_leaving_between_two_scheduler_questions_is_asked_again(monkeypatch):
    """The scheduler answers `processing` with a KeyError for a worker that left after it was
    listed (seen in CI); the wait asks again instead of failing with that KeyError."""

    class Future:
        key, status = "tvmc-run-1", "finished"
        polls = 0

        def done(self) -> bool:
            self.polls += 1
            return self.polls > 3

        def result(self):
            return "ok", None, "device"

    class Client:
        questions = 0

        def as_current(self):
            return contextlib.nullcontext()

        def processing(self, workers):
            self.questions += 1
            if self.questions == 1:
                raise KeyError("tcp://192.0.2.2:34537")
            return {w: ["tvmc-run-1"] for w in workers}

    def wait(futures, timeout):
        raise TimeoutError

    fake = types.SimpleNamespace(wait=wait, TimeoutError=TimeoutError)
    monkeypatch.setattr(remote, "import_distributed", lambda: fake)
    monkeypatch.setattr(remote, "_device_workers", lambda client, key: {"tcp://a:1": "device"})
    client = Client()
    assert remote._await(client, Future(), Remote("tcp://s:1", DEVICE)) == ("ok", None, "device")
    assert client.questions == 3  # one per poll; the first one failed
