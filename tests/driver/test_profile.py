"""Profiles by model node: ONNX names and op types of fused groups, shapes, rates; the plan's
node record read back, bounded and optional; the Chrome trace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tests.runtime.forge import edit_json, rewrite
from tvmc.driver.profile import chrome_trace, node_rows
from tvmc.errors import PackageError
from tvmc.runtime.package_check import MAX_SOURCE_TEXT, MAX_SOURCES


def conv_model() -> onnx.ModelProto:
    """/conv/Conv -> /relu/Relu (fused into the conv), an unnamed Sigmoid, /pool/GlobalAveragePool,
    /flatten/Flatten: PyTorch-style names with slashes."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], "/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], "/relu/Relu"),
        helper.make_node("Sigmoid", ["r"], ["s"]),
        helper.make_node("GlobalAveragePool", ["s"], ["p"], "/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["p"], ["y"], "/flatten/Flatten"),
    ]
    graph = helper.make_graph(
        nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], [w, b],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def package_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("profile")
    onnx.save(conv_model(), directory / "convs.onnx")
    path = str(directory / "convs.tar")
    tvmc.compile(str(directory / "convs.onnx"), package_path=path)
    return path


def test_rows_name_onnx_nodes_and_op_types(package_path: str):
    result = tvmc.run(package_path, profile=True, repeat=2)
    nodes = {n["name"]: n for n in result.profile_nodes}
    conv = nodes["/conv/Conv"]
    assert list(nodes) == ["/conv/Conv", "/pool/GlobalAveragePool"]  # Flatten: a view
    assert conv["op"] == "Conv+Relu+Sigmoid" and conv["fused"] == ["/relu/Relu", "Sigmoid"]
    assert conv["inputs"] == [[1, 3, 16, 16], [8, 3, 3, 3], [8]] and conv["output"] == [
        1,
        8,
        16,
        16,
    ]
    assert conv["flops"] > 0 and conv["gflops"] > 0
    assert conv["bytes"] >= 4 * (3 * 16 * 16 + 8 * 27 + 8 + 8 * 16 * 16) and conv["gbps"] > 0
    assert sum(k["time_ms"] for k in conv["kernels"]) == pytest.approx(conv["time_ms"])
    assert nodes["/pool/GlobalAveragePool"]["op"] == "GlobalAveragePool"
    assert sum(n["share_percent"] for n in nodes.values()) == pytest.approx(100.0)
    for row in result.profile:  # the kernel rows carry the same, per call
        assert row["onnx_node"] and row["sources"] and row["bytes"] > 0
    document = result.to_json()
    assert document["profile_nodes"] == result.profile_nodes


def test_chrome_trace_nests_kernels_in_their_node(package_path: str):
    nodes = tvmc.run(package_path, profile=True, repeat=2).profile_nodes
    trace = json.loads(json.dumps(chrome_trace(nodes, "cpu")))  # plain JSON throughout
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    spans = [e for e in events if e["cat"] == "node"]
    assert [e["name"] for e in spans] == [n["name"] for n in nodes]
    for span, node in zip(spans, nodes):
        assert span["dur"] == pytest.approx(node["time_ms"] * 1e3)
        assert span["args"]["op"] == node["op"] and span["args"]["output"] == node["output"]
        inside = [e for e in events if e["cat"] == "kernel" and e["args"]["node"] == node["name"]]
        assert [e["name"] for e in inside] == [k["kernel"] for k in node["kernels"]]
        for kernel in inside:
            assert span["ts"] - 1e-6 <= kernel["ts"]
            assert kernel["ts"] + kernel["dur"] <= span["ts"] + span["dur"] + 1e-6
    ends = [e["ts"] + e["dur"] for e in spans]
    assert all(a <= b["ts"] + 1e-6 for a, b in zip(ends, spans[1:]))  # one after another


def drop_sources(plan: dict) -> None:
    for call in plan["calls"]:
        call.pop("sources", None)


def test_a_package_without_node_records_still_profiles(package_path: str, tmp_path: Path):
    old = rewrite(package_path, tmp_path / "old.tar", edit_json("mod.json", drop_sources))
    rows = tvmc.run(old, profile=True, repeat=1).profile
    assert rows and all(r["sources"] == [] and r["onnx_node"] == (r["node"] or r["kernel"])
                        for r in rows)  # fmt: skip
    assert len(node_rows(rows)) <= len(rows)


def set_sources(value):
    def edit(plan: dict) -> None:
        plan["calls"][0]["sources"] = value

    return edit


SOURCE = {"name": "a", "op": "Conv", "inputs": [[1, 2]], "output": [1]}


@pytest.mark.parametrize(
    "value",
    [
        "Conv",
        [{"name": "a", "op": "Conv"}],
        [{**SOURCE, "name": 7}],
        [{**SOURCE, "name": "x" * (MAX_SOURCE_TEXT + 1)}],
        [{**SOURCE, "inputs": [[-1]]}],
        [SOURCE] * (MAX_SOURCES + 1),
    ],
    ids=["string", "missing", "type", "long", "shape", "many"],
)
def test_malformed_node_records_are_refused(package_path: str, tmp_path: Path, value):
    forged = rewrite(package_path, tmp_path / "bad.tar", edit_json("mod.json", set_sources(value)))
    with pytest.raises(PackageError, match="sources"):
        tvmc.TVMCPackage(forged)
