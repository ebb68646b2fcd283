"""The compile pipeline: one list of named passes, each timed, shown by --print-pass-times."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper

from tests.cli.runners import run_in_process
from tests.lower.test_end_to_end import model_of
from tvmc.driver.compiler import CompileOptions, build
from tvmc.driver.pipeline import COMPILE_PIPELINE, OPTIONAL_PASSES, stage_seconds
from tvmc.frontend import convert_model
from tvmc.passes import IMPORT_PIPELINE, run_passes

STAGES = ("optimize", "records", "lower", "codegen")


def small_graph():
    """conv -> relu -> add: something to fuse, lower and generate."""
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Add", ["r", "r"], ["y"]),
    ]
    model = model_of(nodes, [("x", [1, 3, 8, 8])], ["y"], [("w", w)])
    return run_passes(convert_model(model), IMPORT_PIPELINE)


def test_the_pipeline_reads_as_a_list_of_named_passes():
    names = [p.name for p in COMPILE_PIPELINE]
    assert names.index("fuse") < names.index("lower") < names.index("plan-memory")
    assert names[-1] == "codegen" and all(p.why for p in COMPILE_PIPELINE)
    stages = [p.stage for p in COMPILE_PIPELINE]
    assert stages == sorted(stages, key=STAGES.index)  # stages do not interleave
    assert {"fuse", "fold-batch-norm"} <= set(OPTIONAL_PASSES)


def test_build_times_every_pass_in_order():
    result = build(small_graph(), CompileOptions(codegen_jobs=1))
    timed = [t.name for t in result.passes]
    expected = [p.name for p in COMPILE_PIPELINE if p.name != "apply-records"]  # no records
    assert timed == expected
    assert all(t.seconds >= 0 for t in result.passes)
    assert result.seconds == stage_seconds(result.passes)
    assert set(result.seconds) == {"optimize", "lower", "codegen"}


def test_a_disabled_pass_is_skipped_and_fuse_falls_back_to_no_fusion():
    fused = build(small_graph(), CompileOptions(codegen_jobs=1))
    unfused = build(small_graph(), CompileOptions(codegen_jobs=1, disabled_passes=("fuse",)))
    assert "fuse" not in [t.name for t in unfused.passes]
    assert len(unfused.lowered.program.kernels) > len(fused.lowered.program.kernels)


@pytest.mark.parametrize("json_output", [False, True])
def test_print_pass_times(json_output, tmp_path):
    import onnx

    w = np.ones((2, 3, 1, 1), np.float32)
    model = model_of([helper.make_node("Conv", ["x", "w"], ["y"])], [("x", [1, 3, 4, 4])], ["y"],
                     [("w", w)])  # fmt: skip
    onnx.save(model, tmp_path / "m.onnx")
    args = ["compile", "m.onnx", "-o", "m.tar", "--print-pass-times"]
    code, stdout, _ = run_in_process(args + (["--format", "json"] if json_output else []), tmp_path)
    assert code == 0
    if json_output:
        passes = [p["pass"] for p in json.loads(stdout)["pass_seconds"]]
        assert passes[0] == "import" and passes[-1] == "link" and "codegen" in passes
    else:
        assert "pass times" in stdout
        for name in ("import", "fold-constants", "fuse", "lower", "plan-memory", "codegen", "link"):
            assert name in stdout
