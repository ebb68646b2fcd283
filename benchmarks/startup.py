"""Start-up: the wall time of `python -m tvmc --help` and of `python -m tvmc run tiny.tar
--print-time` (medians of --runs processes), and what each spends importing (`python -X
importtime`: the total and the biggest modules by their own time).

`--tree NAME=PATH` (repeatable) runs the commands with PATH first on PYTHONPATH, e.g. a
`git archive` of an older commit, alternating between trees run by run so a noisy machine
affects all alike; without it, the tvmc this Python imports. The package is compiled once, by
the tvmc this script imports (the format must be one every tree reads).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx
from onnx import TensorProto, helper

import tvmc

IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def tiny_onnx(path: Path) -> Path:
    """y = relu(x + b) on float32[2,16]: a model whose run is all start-up."""
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor("b", TensorProto.FLOAT, [16], [0.5] * 16)],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def environment(tree: str | None) -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1"}
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, env.get("PYTHONPATH")) if p)
    return env


def wall_seconds(args: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tvmc", *args], env=env, cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"tvmc {' '.join(args)} failed:\n{done.stderr.decode(errors='replace')}")
    return elapsed


def import_costs(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, list[tuple]]:
    """(total import ms, [(self ms, module), ...] biggest first) of one `tvmc ARGS`."""
    command = [sys.executable, "-X", "importtime", "-m", "tvmc", *args]
    done = subprocess.run(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)  # fmt: skip
    rows = [IMPORT_LINE.match(line) for line in done.stderr.splitlines()]
    found = [(int(m[1]) / 1e3, m[4]) for m in rows if m]
    return sum(ms for ms, _ in found), sorted(found, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="processes per command and tree")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--top", type=int, default=8, help="modules listed by own import time")
    options = parser.parse_args()
    trees = dict(t.split("=", 1) for t in options.tree) or {"this": ""}
    commands = {"--help": ["--help"], "run": ["run", "tiny.tar", "--print-time"]}

    with tempfile.TemporaryDirectory(prefix="tvmc-startup-") as tmp:
        cwd = Path(tmp)
        tvmc.compile(str(tiny_onnx(cwd / "tiny.onnx")), package_path=str(cwd / "tiny.tar"))
        for tree in trees.values():  # the first run of each writes its caches
            wall_seconds(commands["run"], environment(tree), cwd)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(options.runs):
            for command, args in commands.items():
                for name, tree in trees.items():
                    seconds = wall_seconds(args, environment(tree), cwd)
                    times.setdefault((name, command), []).append(seconds)
        print(f"load average {os.getloadavg()[0]:.2f}; {options.runs} runs each; "
              f"python {sys.version.split()[0]}")  # fmt: skip
        print(f"{'tree':<10} {'command':<8} {'median ms':>10} {'min ms':>8} {'imports ms':>11}"
              "  biggest imports (own ms)")  # fmt: skip
        for (name, command), seconds in times.items():
            total, top = import_costs(commands[command], environment(trees[name]), cwd)
            biggest = ", ".join(f"{module} {ms:.0f}" for ms, module in top[: options.top])
            print(f"{name:<10} {command:<8} {statistics.median(seconds) * 1e3:>10.0f} "
                  f"{min(seconds) * 1e3:>8.0f} {total:>11.0f}  {biggest}")  # fmt: skip


if __name__ == "__main__":
    main()
