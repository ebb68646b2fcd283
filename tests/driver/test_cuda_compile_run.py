"""`--target cuda` packages: compile, read back, run on a fake GPU, and the no-GPU errors."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

import tvmc
from tests.driver.test_compile_run import inputs_for, write_tiny_model
from tests.runtime.fake_cuda import FakeDriver
from tests.runtime.forge import redigest
from tvmc.driver.compiler import CompileOptions, build
from tvmc.errors import PackageError, UsageError
from tvmc.ops import run_reference
from tvmc.runtime import cuda_driver
from tvmc.runtime.cuda_driver import CUDAError
from tvmc.runtime.package import read_package


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tvmc.TVMCModel:
    return tvmc.load(str(write_tiny_model(tmp_path_factory.mktemp("cuda"))))


@pytest.fixture(scope="module")
def package(model, tmp_path_factory: pytest.TempPathFactory) -> tvmc.TVMCPackage:
    path = tmp_path_factory.mktemp("pkg") / "tiny.tar"
    return tvmc.compile(model, target="cuda -arch=sm_90", package_path=str(path),
                        dump_code="ptx,kernel")  # fmt: skip


@pytest.fixture
def fake_gpu(model, monkeypatch):
    """A fake GPU that runs the tiny model's CUDA kernels with the kernel IR interpreter."""
    kernels = build(model.graph, CompileOptions(target="cuda -arch=sm_90")).lowered.program.kernels
    drv = FakeDriver(kernels)
    monkeypatch.setattr(cuda_driver, "driver", lambda: drv)
    cuda_driver.device.cache_clear()
    yield drv
    cuda_driver.device.cache_clear()


def members(path: str) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore


def test_package_members_and_metadata(package):
    found = members(package.package_path)
    assert sorted(found) == ["metadata.json", "mod.json", "mod.params", "mod.ptx"]
    assert b".visible .entry Sigmoid_sigmoid(" in found["mod.ptx"]
    meta = json.loads(found["metadata.json"])
    assert (meta["device"], meta["target"], meta["arch"]) == ("cuda", "cuda -arch=sm_90", "sm_90")
    assert (meta["triple"], meta["cpu"], meta["features"]) == ("nvptx64-nvidia-cuda", "sm_90",
                                                               "+ptx86")  # fmt: skip
    mod = json.loads(found["mod.json"])
    assert [x["kernel"] for x in mod["launches"]] == [c["kernel"] for c in mod["calls"]]
    assert all(len(x["grid"]) == 3 and len(x["block"]) == 3 for x in mod["launches"])
    assert package.summary()["device"] == "cuda"
    assert ".entry" in Path(package.dumps["ptx"]).read_text()


def test_round_trip(package):
    again = tvmc.TVMCPackage(package.package_path)
    assert again.device == "cuda" and again.metadata == package.metadata
    contents = read_package(package.package_path)
    assert contents.ptx == package._contents.ptx
    assert contents.launches == package._contents.launches


def test_runs_on_the_fake_gpu_like_the_reference(model, package, fake_gpu, rng):
    inputs = inputs_for(rng)
    result = tvmc.run(tvmc.TVMCPackage(package.package_path), device="cuda", inputs=inputs,
                      benchmark=True, repeat=2, profile=True)  # fmt: skip
    expected = run_reference(model.graph, inputs)
    for name in ("cat", "s"):
        np.testing.assert_allclose(result.outputs[name], expected[name], rtol=1e-6, atol=1e-6)
    assert fake_gpu.graph_launches >= 3  # the run, the warm-up and the timed runs: the graph
    assert len(result.times.results) == 2
    assert [row["kernel"] for row in result.profile] == [x.kernel for x in
                                                         package._contents.launches]  # fmt: skip
    again = package.run(device="cuda", inputs=inputs, benchmark=True, repeat=1, end_to_end=True)
    np.testing.assert_allclose(again.outputs["s"], expected["s"], rtol=1e-6, atol=1e-6)


def test_devices_must_match_the_package(package, tmp_path):
    with pytest.raises(
        UsageError,
        match=r"compiled for cuda -arch=sm_90 and runs with --device "
        r"cuda.*to run on cpu, compile it for this CPU with --target llvm",
    ):
        tvmc.run(package.package_path, device="cpu")
    cpu = tvmc.compile(package.metadata["model"], package_path=str(tmp_path / "cpu.tar"))
    with pytest.raises(UsageError, match=r"runs with --device cpu.*--target cuda"):
        tvmc.run(cpu, device="cuda")


def test_without_a_gpu_the_error_names_the_fix(package):
    cuda_driver.device.cache_clear()
    try:
        if cuda_driver.present_arch() is not None:
            pytest.skip("a GPU is present")
        with pytest.raises(CUDAError, match=r"no NVIDIA driver|no CUDA GPU|pip install"):
            tvmc.run(package.package_path, device="cuda")
    finally:
        cuda_driver.device.cache_clear()


def test_a_newer_arch_than_the_gpu_is_refused(model, tmp_path, fake_gpu):
    path = tmp_path / "sm100.tar"
    tvmc.compile(model, target="cuda -arch=sm_100", package_path=str(path))
    with pytest.raises(PackageError, match=r"compiled for sm_100; this GPU \(Fake H200\) is "
                       r"sm_90: .*--target cuda"):  # fmt: skip
        tvmc.run(str(path), device="cuda")


def test_target_errors(model):
    with pytest.raises(UsageError, match="unknown CUDA architecture 'sm_9'"):
        tvmc.compile(model, target="cuda -arch=sm_9")
    with pytest.raises(UsageError, match="unknown target 'cdua'.*'cuda -arch=sm_XX'.*Did you"):
        tvmc.compile(model, target="cdua")
    with pytest.raises(UsageError, match="--target-llvm-mcpu refine llvm targets"):
        tvmc.compile(model, target="cuda", target_llvm_mcpu="znver4")
    with pytest.raises(UsageError, match="--dump-code ptx needs a cuda target"):
        tvmc.compile(model, target="llvm", dump_code="ptx")


def test_cuda_alone_takes_the_present_gpu_arch_else_sm_90(model, monkeypatch):
    from tvmc.driver import compiler

    monkeypatch.setattr(compiler, "present_arch", lambda: None)
    assert compiler.parse_target(CompileOptions(target="cuda")).arch == "sm_90"
    monkeypatch.setattr(compiler, "present_arch", lambda: "sm_86")
    assert compiler.parse_target(CompileOptions(target="cuda")).arch == "sm_86"
    assert compiler.parse_target(CompileOptions(target="cuda -arch=sm_75")).arch == "sm_75"


def _rewrite(src: str, dst: Path, change) -> str:
    found = redigest(change(members(src)))  # as a forger would: the plan's checks must refuse it
    with tarfile.open(dst, "w") as tar:
        for name, data in found.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(dst)


def _mod(change):
    def apply(found):
        mod = json.loads(found["mod.json"])
        change(mod)
        return {**found, "mod.json": json.dumps(mod).encode()}

    return apply


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (lambda m: {k: v for k, v in m.items() if k != "mod.ptx"}, "lacks mod.ptx"),
        (_mod(lambda d: d.pop("launches")), "lacks its launches"),
        (_mod(lambda d: d["launches"][0].update(kernel="nope")), "'nope' does not match its call"),
        (_mod(lambda d: d["launches"][0].update(args=["s"])), "does not match its call"),
        (_mod(lambda d: d["launches"][0].update(block=[0, 1, 1])), "corrupt mod.json"),
    ],
    ids=["no-ptx", "no-launches", "kernel", "args", "block"],
)
def test_corrupt_cuda_packages(package, tmp_path, change, pattern):
    path = _rewrite(package.package_path, tmp_path / "bad.tar", change)
    with pytest.raises(PackageError, match=pattern):
        read_package(path)
