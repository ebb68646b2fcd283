"""Pictures: tuning convergence from a records file (`records plot`), and a run's profile
(`run --profile-out chart.svg / trace.json`), through the CLI."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner, Result

import tvmc
from tests.driver.test_profile import conv_model
from tvmc.autotune import Record, append_records
from tvmc.cli.main import cli
from tvmc.driver.plots import convergence

NS = {"svg": "http://www.w3.org/2000/svg"}
CONV = ["conv.llvm", [["TENSOR", [1, 3, 16, 16], "float32"], ["TENSOR", [8, 3, 3, 3], "float32"],
        ["TENSOR", [8], "float32"], ["ATTRS", {"dilations": [1, 1], "group": 1,
        "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]}]]]  # fmt: skip
CONV_FLOPS = 110592
POOL = ["pool.llvm", [["TENSOR", [1, 8, 4, 4], "float32"], ["ATTRS", {"kernel_shape": [2, 2]}]]]


def tvmc_cli(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="tvmc")


def record(workload: list, index: int, cost: float, error_no: int = 0) -> Record:
    config = {"index": index, "code_hash": None, "entity": [["k", "other", index]]}
    return Record("llvm", workload[0], workload[1], config, [cost], error_no)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "log.json"
    open(path, "w").close()
    costs = [4e-5, 5e-5, 2e-5, 3e-5, 1e-5]  # best after trials 1, 3, 5
    records = [record(CONV, i, c) for i, c in enumerate(costs)]
    records.insert(1, record(CONV, 9, 1e-9, error_no=4))  # a failure is never the best
    records += [record(POOL, 0, 1e-5)]
    append_records(str(path), records)
    return path


def test_convergence_is_the_best_so_far_per_task(log: Path):
    curves, left_out = convergence(log)
    assert [c.label for c in curves] == ["Conv 3x3 3->8 @16x16"]
    rates = [CONV_FLOPS / c / 1e9 for c in (4e-5, 2e-5, 1e-5)]
    assert curves[0].points == [(1, rates[0]), (4, rates[1]), (6, rates[2]), (6, rates[2])]
    assert curves[0].trials == 6 and len(left_out) == 1  # the pool: no FLOP count


def test_records_plot_writes_an_svg_with_a_line_per_task(log: Path, tmp_path: Path):
    out = tmp_path / "tuning.svg"
    result = tvmc_cli("records", "plot", log, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["tasks"][0]["best_gflops"] == pytest.approx(CONV_FLOPS / 1e-5 / 1e9)
    root = ET.parse(out).getroot()
    paths = root.findall(".//svg:path[@class='series']", NS)
    assert [p.get("data-series") for p in paths] == ["Conv 3x3 3->8 @16x16"]
    text = tvmc_cli("records", "plot", log, "-o", out)  # replaces its own SVG
    assert text.exit_code == 0 and "1 task(s) over 6 trial(s)" in text.stdout
    assert "not drawn" in text.stderr


def test_records_plot_refuses_to_replace_other_files(log: Path, tmp_path: Path):
    notes = tmp_path / "notes.svg"
    notes.write_text("my notes")
    result = tvmc_cli("records", "plot", log, "-o", notes)
    assert result.exit_code == 2 and "refusing to replace" in result.stderr
    assert notes.read_text() == "my notes"
    png = tvmc_cli("records", "plot", log, "-o", tmp_path / "x.png")
    assert png.exit_code == 2 and ".svg" in png.stderr and not (tmp_path / "x.png").exists()
    pools = tmp_path / "pools.json"
    open(pools, "w").close()
    append_records(str(pools), [record(POOL, 0, 1e-5), record(CONV, 1, 1e-5, error_no=4)])
    nothing = tvmc_cli("records", "plot", pools, "-o", tmp_path / "p.svg")
    assert nothing.exit_code == 2 and "nothing to draw" in nothing.stderr
    assert not (tmp_path / "p.svg").exists()
    empty = tmp_path / "empty.json"
    empty.write_text("garbage\n")
    assert tvmc_cli("records", "plot", empty, "-o", tmp_path / "e.svg").exit_code == 2


def test_run_profile_out_writes_a_trace_and_a_chart(tmp_path: Path):
    onnx.save(conv_model(), tmp_path / "convs.onnx")
    package = tmp_path / "convs.tar"
    tvmc.compile(str(tmp_path / "convs.onnx"), package_path=str(package))
    trace, chart = tmp_path / "trace.json", tmp_path / "chart.svg"
    result = tvmc_cli("run", package, "--profile-out", trace, "--profile-out", chart,
                      "--repeat", "2", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)  # stdout stays one JSON document
    names = [n["name"] for n in document["profile_nodes"]]
    assert names == ["/conv/Conv", "/pool/GlobalAveragePool"]
    events = json.loads(trace.read_text())["traceEvents"]
    assert [e["name"] for e in events if e.get("cat") == "node"] == names
    assert all(e["ph"] in ("X", "M") for e in events)
    bars = ET.parse(chart).getroot().findall(".//svg:rect[@class='bar']", NS)
    labels = [b.get("data-label") for b in bars]
    assert set(labels) == {"/conv/Conv (Conv+Relu+Sigmoid)", "/pool/GlobalAveragePool "
                           "(GlobalAveragePool)", "Conv", "GlobalAveragePool"}  # fmt: skip
    assert "saved" in result.stderr
    bad = tvmc_cli("run", package, "--profile-out", tmp_path / "p.txt")
    assert bad.exit_code == 2 and "--profile-out" in bad.stderr and ".json" in bad.stderr
    assert not (tmp_path / "p.txt").exists()
    trace.write_text("[]")  # not a trace: kept
    kept = tvmc_cli("run", package, "--profile-out", trace)
    assert kept.exit_code == 2 and "refusing to replace" in kept.stderr
