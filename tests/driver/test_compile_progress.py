"""What compiling reports as it goes: each stage once and in order, and kernels done up to the
program's count, in one process and in several."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest
from onnx import helper

import tvmc
from tests.lower.test_end_to_end import model_of
from tvmc.driver import CompileProgress
from tvmc.driver.compiler import CompileOptions, build
from tvmc.frontend import convert_model

OPS = ["Exp", "Neg", "Sigmoid", "Tanh", "Abs", "Sqrt", "Relu", "Floor", "Ceil", "Erf"]


class Recorder(CompileProgress):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def stage(self, name: str) -> None:
        self.events.append(("stage", name))

    def kernels(self, done: int, total: int) -> None:
        self.events.append(("kernels", done, total))


def chain() -> onnx.ModelProto:
    nodes = [helper.make_node(op, [f"t{i}"], [f"t{i + 1}"]) for i, op in enumerate(OPS)]
    return model_of(nodes, [("t0", [3, 100])], [f"t{len(OPS)}"])


def test_a_compile_reports_every_stage_once_in_order(tmp_path: Path):
    onnx.save(chain(), tmp_path / "chain.onnx")
    recorder = Recorder()
    package = tvmc.compile(str(tmp_path / "chain.onnx"), package_path=str(tmp_path / "c.tar"),
                           progress=recorder)  # fmt: skip
    stages = [e[1] for e in recorder.events if e[0] == "stage"]
    assert stages == ["import", "optimize", "lower", "codegen", "link"]
    counts = [e[1:] for e in recorder.events if e[0] == "kernels"]
    total = package.metadata["kernels"]
    assert counts[0] == (0, total) and counts[-1] == (total, total)
    at = recorder.events.index(("stage", "codegen"))
    assert recorder.events.index(("kernels", 0, total)) > at  # kernels are counted in codegen


@pytest.mark.parametrize("jobs", [1, 2])
def test_kernels_done_grow_to_the_total(jobs: int):
    recorder = Recorder()
    graph = convert_model(chain())
    result = build(graph, CompileOptions(opt_level=0, codegen_jobs=jobs), recorder)
    total = len(result.lowered.program.kernels)
    assert total == len(OPS)
    done = [e[1] for e in recorder.events if e[0] == "kernels"]
    assert done[0] == 0 and done[-1] == total and done == sorted(done)
    parallel = jobs > 1 and shutil.which("ld")  # merging objects needs a linker
    assert len(done) == (3 if parallel else 2)  # the start, then each process's group
