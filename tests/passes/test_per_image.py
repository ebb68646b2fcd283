"""Images side by side (`tvmc.passes.per_image`): which graphs run image by image, and that such
a package computes what the batched one does, on any thread count and with images left over."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tests.lower.tiny_graphs import graph_of, node
from tests.onnx_helpers import run_onnxruntime
from tests.runtime.forge import edit_json, rewrite
from tvmc.autotune import read_records
from tvmc.autotune.measure import MeasureInput, MeasureOptions
from tvmc.autotune.measure_cpu import build
from tvmc.cli.compile import size
from tvmc.cli.main import cli
from tvmc.codegen import num_threads, pool, set_num_threads
from tvmc.codegen.threads import physical_cores
from tvmc.driver.objects import TVMCPackage
from tvmc.driver.tuning_report import TuningProgress, args_summary, peak_gflops
from tvmc.errors import PackageError, UsageError
from tvmc.graph import Graph, TensorType
from tvmc.ops import infer_node
from tvmc.passes.per_image import per_image_graph
from tvmc.runtime.executor import Executor, aligned_empty
from tvmc.runtime.package import load_module

RNG = np.random.default_rng(7)
W3 = RNG.standard_normal((16, 8, 3, 3)).astype(np.float32)
FC = RNG.standard_normal((16, 10)).astype(np.float32)


def conv_net(batch: int, tail: list | None = None, params: dict | None = None):
    """x [batch, 8, 16, 16] -> 3x3 conv -> Relu -> global pool -> [batch, 16] -> Gemm -> y."""
    nodes = [
        node(
            "Conv",
            ["x", "w"],
            "c",
            kernel_shape=(3, 3),
            strides=(1, 1),
            pads=(1,) * 4,
            dilations=(1, 1),
        ),  # fmt: skip
        node("Relu", ["c"], "r"),
        node("GlobalAveragePool", ["r"], "p"),
        node("Reshape", ["p"], "f", shape=(batch, 16)),
        node("Gemm", ["f", "fc"], "y"),
        *(tail or []),
    ]
    out = (tail or nodes)[-1].outputs[0]
    return graph_of({"x": (batch, 8, 16, 16)}, nodes, [out], {"w": W3, "fc": FC, **(params or {})})


def test_a_batch_of_convs_runs_image_by_image():
    found = per_image_graph(conv_net(4))
    assert found is not None
    single, images = found
    assert images == 4
    assert single.types["x"].shape == (1, 8, 16, 16) and single.types["y"].shape == (1, 10)
    assert [n.attrs["shape"] for n in single.nodes if n.op == "Reshape"] == [(1, 16)]
    single.verify(infer_node)


@pytest.mark.parametrize(
    "graph",
    [
        conv_net(1),  # one image
        conv_net(4, [node("Softmax", ["y"], "s", axes=(0,))]),  # across the batch
        conv_net(4, [node("Transpose", ["y"], "t", perm=(1, 0))]),
        conv_net(4, [node("Reshape", ["y"], "h", shape=(8, 5))]),  # images' rows mixed
        conv_net(
            4,
            [node("Add", ["y", "per_image"], "a")],  # a constant for each image
            {"per_image": RNG.standard_normal((4, 10)).astype(np.float32)},
        ),
        conv_net(
            4,
            [node("Gemm", ["y", "wide"], "g")],  # weights read once an image
            {"wide": RNG.standard_normal((10, 1 << 16)).astype(np.float32)},
        ),
        graph_of({"x": (4, 8)}, [node("Relu", ["x"], "y")], ["y"]),  # too little work
    ],
    ids=[
        "batch 1",
        "softmax over the batch",
        "transposed",
        "rows mixed",
        "constant per image",
        "streamed weights",
        "little work",
    ],  # fmt: skip
)
def test_what_stays_batched(graph):
    assert per_image_graph(graph) is None


def test_rows_of_a_param_table_by_each_images_indices():
    table = RNG.standard_normal((100, 64)).astype(np.float32)
    proj = RNG.standard_normal((64, 64)).astype(np.float32)
    nodes = [node("Gather", ["table", "ids"], "e", axis=0), node("MatMul", ["e", "proj"], "y")]
    types = {"ids": TensorType((4, 128), "int64"), "table": TensorType.of(table),
             "proj": TensorType.of(proj)}  # fmt: skip
    for n in nodes:
        types.update(zip(n.outputs, infer_node(n, [types[i] for i in n.inputs])))
    graph = Graph(["ids"], ["y"], nodes, types, {"table": table, "proj": proj})
    found = per_image_graph(graph)
    assert found is not None and found[0].types["y"].shape == (1, 128, 64)


def conv_model(batch: int) -> onnx.ModelProto:
    """The ONNX form of `conv_net` with a residual branch and a Concat."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r"], ["s"]),
        helper.make_node("Concat", ["s", "r"], ["cat"], axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc"], ["y"]),
    ]
    inits = {"w": W3, "w2": RNG.standard_normal((16, 16, 3, 3)).astype(np.float32),
             "fc": RNG.standard_normal((32, 10)).astype(np.float32)}  # fmt: skip
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 16, 16])
    graph = helper.make_graph(
        nodes, "images", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture
def threads():
    before = num_threads()
    yield set_num_threads
    set_num_threads(before)


@pytest.mark.parametrize("batch", [4, 3])
def test_images_side_by_side_compute_the_batch(tmp_path: Path, threads, batch: int):
    model = conv_model(batch)
    onnx.save(model, tmp_path / "m.onnx")
    x = RNG.standard_normal((batch, 8, 16, 16)).astype(np.float32)
    (want,) = run_onnxruntime(model, {"x": x})
    side = tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(tmp_path / "side.tar"))
    batched = tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(tmp_path / "batched.tar"),
                           disabled_passes=["per-image"])  # fmt: skip
    assert side.program.images == batch and batched.program.images == 1
    slots = min(batch, num_threads())  # a workspace for each image that runs at once
    assert side.program.slots == slots
    assert side.program.all_workspace_bytes == side.program.workspace_bytes * slots
    assert side.inputs["x"].shape == (batch, 8, 16, 16)
    summary = side.summary()
    assert summary["image_workspace_bytes"] == side.program.workspace_bytes > 0
    assert summary["workspace_bytes"] == side.program.workspace_bytes * slots
    assert batched.summary()["image_workspace_bytes"] is None
    for count in (1, 2, 3):  # 3 images on 2 threads: two side by side, then one on both
        threads(count)
        for package in (side, batched):
            got = tvmc.run(package, inputs={"x": x}).outputs["y"]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    profile = TVMCPackage(str(tmp_path / "side.tar")).executor()
    profile.set_inputs([x])
    rows = profile.profile(repeat=1)
    assert rows and sum(r["flops"] for r in rows) > 0


def test_compile_reports_an_image_workspace(tmp_path: Path, threads):
    onnx.save(conv_model(4), tmp_path / "m.onnx")
    threads(2)
    result = CliRunner().invoke(cli, ["compile", str(tmp_path / "m.onnx"), "-o",
                                      str(tmp_path / "m.tar")])  # fmt: skip
    assert result.exit_code == 0, result.output
    program = TVMCPackage(str(tmp_path / "m.tar")).program
    memory = next(line for line in result.stdout.splitlines() if "memory" in line)
    whole, one = program.workspace_bytes * 2, program.workspace_bytes
    assert f"workspace {size(whole)} ({size(one)} an image at once; without reuse" in memory


def test_fewer_images_than_threads_stay_batched(tmp_path: Path, threads):
    onnx.save(conv_model(2), tmp_path / "m.onnx")
    threads(4)  # two images would leave two threads idle; the batched kernels use all four
    package = tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(tmp_path / "m.tar"))
    assert package.program.images == 1
    threads(2)
    package = tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(tmp_path / "m2.tar"))
    assert package.program.images == 2


@pytest.mark.parametrize("images", [1, 8])
def test_a_plan_naming_other_images_than_its_code_is_refused(tmp_path: Path, images: int):
    onnx.save(conv_model(4), tmp_path / "m.onnx")
    real = tmp_path / "side.tar"
    tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(real))

    def other_images(plan: dict) -> None:
        plan["images"] = images
        plan["slots"] = min(plan["slots"], images)

    def metadata_too(meta: dict) -> None:  # what a forger keeps consistent
        meta["workspace_bytes"] = workspace
        for entry in meta["inputs"] + meta["outputs"]:
            entry["shape"][0] = images

    program = TVMCPackage(str(real)).program
    workspace = program.workspace_bytes * min(program.slots, images)
    forged = rewrite(real, tmp_path / "forged.tar",
                     lambda m: edit_json("metadata.json", metadata_too)(
                         edit_json("mod.json", other_images)(m)))  # fmt: skip
    with pytest.raises(PackageError, match="does not describe the code"):
        TVMCPackage(forged).executor()


@pytest.mark.parametrize("slots", [1, 4, 5])
def test_a_plan_naming_other_slots_than_its_code_is_refused(tmp_path: Path, threads, slots):
    onnx.save(conv_model(4), tmp_path / "m.onnx")
    threads(2)
    real = tmp_path / "side.tar"
    package = tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(real))
    assert (package.program.images, package.program.slots) == (4, 2)
    workspace = package.program.workspace_bytes

    def other_slots(plan: dict) -> None:
        plan["slots"] = slots

    def metadata_too(meta: dict) -> None:
        meta["workspace_bytes"] = workspace * slots

    forged = rewrite(real, tmp_path / "forged.tar",
                     lambda m: edit_json("metadata.json", metadata_too)(
                         edit_json("mod.json", other_slots)(m)))  # fmt: skip
    refusal = "at most one an image" if slots > 4 else "does not describe the code"
    with pytest.raises(PackageError, match=refusal):
        TVMCPackage(forged).executor()


def test_images_share_slots_without_clobbering(tmp_path: Path, threads):
    """7 images compiled on 2 threads, run on 1 to 5 (the workspace holds one image workspace
    for each thread that runs, here up to five images at once, more than the plan's two), many
    runs: an image whose slot another image took, or a slot past the workspace, comes out
    wrong."""
    model = conv_model(7)
    onnx.save(model, tmp_path / "m.onnx")
    threads(2)
    package = tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(tmp_path / "m.tar"))
    assert (package.program.images, package.program.slots) == (7, 2)
    x = RNG.standard_normal((7, 8, 16, 16)).astype(np.float32)
    (want,) = run_onnxruntime(model, {"x": x})
    for count in (1, 2, 3, 4, 5):
        threads(count)
        executor = TVMCPackage(str(tmp_path / "m.tar")).executor()
        slots = min(7, max(count, physical_cores()))
        assert executor.image_slots == slots
        assert executor.workspace.nbytes == package.program.workspace_bytes * slots
        executor.adaptive_threads = False  # every run on `count` threads
        executor.set_inputs([x])
        for _ in range(25):
            np.testing.assert_allclose(executor.run()[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shared_library", [True, False])
def test_the_code_reads_the_slots_its_workspace_holds(tmp_path: Path, threads, shared_library):
    """Before a runtime sets it, the code's slot count is the plan's (what a runtime that does
    not set it allocates); the module's first executor sets it, and the next allocates as many
    even with more threads set by then."""
    model = conv_model(6)
    onnx.save(model, tmp_path / "m.onnx")
    threads(2)
    tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(tmp_path / "m.tar"))
    package = TVMCPackage(str(tmp_path / "m.tar"), use_shared_library=shared_library)
    contents = package._contents
    module = load_module(package.package_path, contents, shared_library)
    assert module._image_slots is not None and module._image_slots.value == 2
    threads(3)
    first = Executor(module, contents.program, contents.params)
    assert first.image_slots == module._image_slots.value == min(6, max(3, physical_cores()))
    threads(6)
    second = Executor(module, contents.program, contents.params)
    assert second.image_slots == first.image_slots
    x = RNG.standard_normal((6, 8, 16, 16)).astype(np.float32)
    second.adaptive_threads = False
    second.set_inputs([x])
    (want,) = run_onnxruntime(model, {"x": x})
    for _ in range(10):
        np.testing.assert_allclose(second.run()[0], want, rtol=1e-4, atol=1e-4)


class Shown(TuningProgress):
    """What tuning shows: its plan and each task's statistics."""

    def __init__(self) -> None:
        self.plan, self.stats = None, []

    def start(self, plan) -> None:
        self.plan = plan

    def task_end(self, stats) -> None:
        self.stats.append(stats)


def test_an_image_kernels_tasks_are_tuned_and_applied_on_one_thread(tmp_path: Path, threads):
    """Images side by side run each image's kernels on one thread: their tasks say so (another
    workload than the same op on every thread), are built and timed on one thread, and compile
    applies their records."""
    threads(2)
    model = conv_model(4)
    onnx.save(model, tmp_path / "side.onnx")
    onnx.save(conv_model(1), tmp_path / "one.onnx")
    side = tvmc.extract_tasks(str(tmp_path / "side.onnx"))
    one = tvmc.extract_tasks(str(tmp_path / "one.onnx"))
    assert side and all(t.threads == 1 and t.args[-1] == ["THREADS", 1] for t in side)
    assert all(t.label.endswith(" on 1 thread") for t in side)
    assert one and all(t.threads == 0 and t.args[-1][0] == "ATTRS" for t in one)
    assert {t.workload for t in side}.isdisjoint(t.workload for t in one)
    conv = next(t for t in side if t.op == "Conv")
    assert args_summary(conv.op, conv.args).endswith("threads=1")  # `tvmc tune --tasks list`
    built = build(MeasureInput(conv, conv.space.get(0)))  # the template as one thread sees it
    assert built.error_no == 0 and built.num_threads == 1
    log = tmp_path / "log.json"
    shown = Shown()
    tvmc.tune_tasks([conv], log, "random", 3, measure_options=MeasureOptions(repeat=1), seed=0,
                    progress=shown)  # fmt: skip
    (stats,) = shown.stats  # its share of the peak is of the one core it runs on
    assert stats.peak_gflops == peak_gflops("llvm", 1)[0]
    assert shown.plan.peak_gflops == peak_gflops("llvm", 2)[0]  # the machine's, on its threads
    records = read_records(str(log))
    assert records and all(r.args[-1] == ["THREADS", 1] for r in records)
    package = tvmc.compile(str(tmp_path / "side.onnx"), tuning_records=log,
                           package_path=str(tmp_path / "m.tar"))  # fmt: skip
    assert package.program.images == 4 and package.metadata["tuning"]["tuned"] == 1
    x = RNG.standard_normal((4, 8, 16, 16)).astype(np.float32)
    (want,) = run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(package.run(inputs={"x": x}).outputs["y"], want, 1e-4, 1e-4)


def test_the_code_runs_no_more_images_at_once_than_slots_held(tmp_path: Path, threads):
    """Planned for 4 slots, told the workspace holds 2, run on 4 threads: the image
    workspaces past the second (filled with a canary here) stay untouched."""
    model = conv_model(6)
    onnx.save(model, tmp_path / "m.onnx")
    threads(4)
    tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(tmp_path / "m.tar"))
    contents = TVMCPackage(str(tmp_path / "m.tar"))._contents
    assert (contents.program.images, contents.program.slots) == (6, 4)
    module = load_module(str(tmp_path / "m.tar"), contents, True)
    assert module.hold_image_slots(2) == 2
    executor = Executor(module, contents.program, contents.params)
    assert executor.image_slots == 2
    one = contents.program.workspace_bytes
    workspace = aligned_empty((4 * one,), np.uint8)
    workspace[...] = 0xAB
    executor.workspace, executor._workspace_ptr = workspace, ctypes.c_void_p(workspace.ctypes.data)
    executor.adaptive_threads = False
    x = RNG.standard_normal((6, 8, 16, 16)).astype(np.float32)
    executor.set_inputs([x])
    (want,) = run_onnxruntime(model, {"x": x})
    before = pool.stats().loops
    for _ in range(20):
        np.testing.assert_allclose(executor.run()[0], want, rtol=1e-4, atol=1e-4)
    assert (workspace[2 * one :] == 0xAB).all()
    # two images at a time, six in all: no image left over to run its kernels' loops on the
    # pool (four at a time would leave two), so a run is the one loop of the images
    if not pool.uses_gomp():  # libgomp's loops are not counted
        assert pool.stats().loops - before == 20


def test_a_batch_is_planned_for_the_threads_given(tmp_path: Path, threads):
    """`num_threads` plans the package for the machine that runs it: 4 images run side by
    side for 2 or 4 threads, batched for 8 (four images would leave four threads idle)."""
    model = conv_model(4)
    onnx.save(model, tmp_path / "m.onnx")
    threads(2)
    x = RNG.standard_normal((4, 8, 16, 16)).astype(np.float32)
    (want,) = run_onnxruntime(model, {"x": x})
    for planned, images, slots in ((2, 4, 2), (4, 4, 4), (8, 1, 1)):
        package = tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(tmp_path / "m.tar"),
                               num_threads=planned)  # fmt: skip
        assert (package.program.images, package.program.slots) == (images, slots)
        assert package.metadata["heap_scratch_threads"] == planned
        got = tvmc.run(package, inputs={"x": x}).outputs["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(UsageError, match="--num-threads must be a whole number"):
        tvmc.compile(str(tmp_path / "m.onnx"), package_path=str(tmp_path / "m.tar"), num_threads=0)
