"""Worker processes die with their parent however it dies: `tvmc compile` and `tvmc tune`
killed by SIGKILL (as a CI timeout kills them) leave no code-generation or measurement worker
behind. Linux only: processes are found through /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.cli.runners import SUBPROCESS_ENV
from tests.driver.test_tuning import write_conv_model

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
LAYERS = 24  # MatMul+Relu kernels: well above the 8 that make codegen start workers
GRACE_SECONDS = 5.0  # how long dead parents' workers may take to go


def write_chain_model(directory: Path) -> Path:
    """x[1, 64] through LAYERS of MatMul and Relu, each its own kernel."""
    rng = np.random.default_rng(0)
    nodes, inits, last = [], [], "x"
    for i in range(LAYERS):
        inits.append(numpy_helper.from_array(rng.standard_normal((64, 64), np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [last, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"]))
        last = f"r{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [1, 64])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    path = directory / "chain.onnx"
    onnx.save(model, path)
    return path


def parents() -> dict[int, int]:
    """Every live process's parent, by pid."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":  # a zombie is dead already, waiting to be reaped
                found[int(entry)] = int(fields[1])
    return found


def descendants(pid: int) -> set[int]:
    """The live processes below `pid`."""
    links = parents()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in links.items() if parent in frontier} - found
        found |= frontier
    return found


def command_line(pid: int) -> str:
    """The process's arguments joined by spaces ('' once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_when_workers_run(
    args: list[str], tmp_path: Path, env: dict[str, str], marker: str
) -> set[int]:
    """Start `tvmc ARGS`, SIGKILL it once it runs a worker (a process whose command line holds
    `marker`; not a passing `ldconfig` or `cc`); returns the pids of all its descendants."""
    process = subprocess.Popen([sys.executable, "-m", "tvmc", *args], cwd=tmp_path, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 300
    workers: set[int] = set()
    try:
        while not any(marker in command_line(pid) for pid in workers):
            if process.poll() is not None:
                pytest.fail(f"tvmc exited before it started workers: {process.stderr.read()}")
            if time.monotonic() > deadline:
                pytest.fail("no worker process started within 300 s")
            time.sleep(0.05)
            workers = descendants(process.pid)
        time.sleep(0.5)  # let every worker start (and set itself up)
        workers = descendants(process.pid)
    finally:
        process.kill()
        process.wait()
        process.stderr.close()
    return workers


def assert_all_gone(workers: set[int]) -> None:
    """Within GRACE_SECONDS, none of `workers` is alive (killed here if one is, then failed)."""
    deadline = time.monotonic() + GRACE_SECONDS
    alive = workers
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = workers & set(parents())
    for pid in alive:
        os.kill(pid, signal.SIGKILL)  # ours: the workers of the tvmc this test started
    assert not alive, f"{len(alive)} of {len(workers)} workers outlived their killed parent"


def test_codegen_workers_die_with_a_killed_compile(tmp_path: Path):
    model = write_chain_model(tmp_path)
    env = {**SUBPROCESS_ENV, "TVMC_CODEGEN_JOBS": "4"}
    args = ["compile", str(model), "-o", "m.tar"]
    workers = kill_when_workers_run(args, tmp_path, env, marker="tvmc compile")  # forks of it
    assert_all_gone(workers)


def test_measurement_workers_die_with_a_killed_tune(tmp_path: Path):
    model = write_conv_model(tmp_path)
    args = ["tune", str(model), "-o", "log.json", "--trials", "10000", "--tuner", "random"]
    workers = kill_when_workers_run(args, tmp_path, SUBPROCESS_ENV, marker="tvmc.autotune.worker")
    assert_all_gone(workers)
