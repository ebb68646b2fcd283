"""Cross-compiling: packages for aarch64 built on this machine, linked by a cross toolchain when
one is installed (gcc-aarch64-linux-gnu and libc6-dev-arm64-cross), refused at run time here."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import tvmc
from tests.elf import EM_AARCH64, ET_DYN, ET_REL, read_elf
from tvmc.cli.main import cli
from tvmc.codegen import CPUTarget
from tvmc.codegen.program import emit_program
from tvmc.codegen.target import host_triple
from tvmc.errors import PackageError, UsageError
from tvmc.lower import lower_graph

AARCH64 = "aarch64-linux-gnu"
CROSS_GCC = f"{AARCH64}-gcc"
ENTRY_SYMBOLS = {"tvmc_main", "__tvmc_layout", "__tvmc_num_threads"}

pytestmark = pytest.mark.skipif(
    platform.machine() in ("aarch64", "arm64"), reason="aarch64 is this machine's architecture"
)


UNARY = (
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Neg",
    "Abs",
    "Floor",
    "Ceil",
    "Erf",
    "Softsign",
    "Sin",
    "Cos",
)


def chain_model(shape: tuple[int, ...] = (64, 4096), length: int = 12) -> onnx.ModelProto:
    """`length` unary ops in a row: as many kernels at -O0 (each op once: identical kernels would
    share one), enough to compile in parallel."""
    nodes, previous = [], "x"
    for i in range(length):
        op = UNARY[i % len(UNARY)]
        nodes.append(helper.make_node(op, [previous], [f"t{i}"]))
        previous = f"t{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, list(shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    return model


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cross") / "chain.onnx"
    onnx.save(chain_model(), path)
    return path


def members(package: Path) -> dict[str, bytes]:
    with tarfile.open(package) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def kernel_names(files: dict[str, bytes]) -> set[str]:
    return {k["name"] for k in json.loads(files["mod.json"])["kernels"]}


def cross_gcc_links() -> bool:
    """Whether the aarch64 toolchain is installed and links a shared library (libc, libgomp)."""
    if shutil.which(CROSS_GCC) is None:
        return False
    command = [CROSS_GCC, "-shared", "-x", "c", "-", "-o", "/dev/null", "-lgomp"]
    done = subprocess.run(command, input=b"int f(void) { return 0; }", capture_output=True)
    return done.returncode == 0


needs_cross_gcc = pytest.mark.skipif(
    not cross_gcc_links(),
    reason=f"no {CROSS_GCC} that links (packages gcc-{AARCH64} and libc6-dev-arm64-cross)",
)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_parallel_cross_compile_makes_one_aarch64_object(model_path, tmp_path, monkeypatch, jobs):
    # two jobs once ran the host's `ld -r` on aarch64 objects: exit 70
    monkeypatch.setenv("TVMC_CODEGEN_JOBS", jobs)
    path = tmp_path / "arm.tar"
    package = tvmc.compile(str(model_path), target=f"llvm -mtriple={AARCH64}", opt_level=0,
                           package_path=str(path))  # fmt: skip
    files = members(path)
    assert "mod.so" not in files  # no cross compiler given: mod.o only
    obj = read_elf(files["mod.o"])
    assert (obj.machine, obj.file_type) == (EM_AARCH64, ET_REL)
    kernels = kernel_names(files)
    assert len(kernels) >= 12 and (kernels | ENTRY_SYMBOLS) <= obj.defined
    assert "tvmc_parallel_for" in obj.undefined  # 64x4096 elementwise loops run on threads
    summary = package.summary()
    assert summary["cross"] is True and summary["shared_library"] is False


def test_linked_bitcode_runs_like_merged_objects(tmp_path, monkeypatch, rng):
    """Without `ld` the groups' bitcode is linked in-process: the same code, natively run."""
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model((4, 256)), path)
    loaded = tvmc.load(str(path))
    x = rng.standard_normal((4, 256)).astype(np.float32)
    expected = tvmc.compile(loaded, opt_level=0).run(inputs={"x": x}).outputs["t11"]
    monkeypatch.setenv("PATH", str(tmp_path))  # no ld, no cc: bitcode linking, mod.o only
    monkeypatch.setenv("TVMC_CODEGEN_JOBS", "2")
    package = tvmc.compile(loaded, opt_level=0)
    assert package.summary()["shared_library"] is False
    np.testing.assert_array_equal(package.run(inputs={"x": x}).outputs["t11"], expected)


def test_emit_program_links_groups_for_a_cross_target(tmp_path):
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model((8, 64)), path)
    program = lower_graph(tvmc.load(str(path)).graph, fuse=False).program
    artifact = emit_program(program, CPUTarget.parse(f"llvm -mtriple={AARCH64}"), jobs=2)
    obj = read_elf(artifact.object_code)
    assert obj.machine == EM_AARCH64
    assert ({k.name for k in program.kernels} | ENTRY_SYMBOLS) <= obj.defined
    assert "tvmc_main:" in artifact.assembly  # the linked module is kept: its assembly too


@needs_cross_gcc
def test_cross_compiler_links_an_aarch64_library(model_path, tmp_path, monkeypatch):
    monkeypatch.setenv("TVMC_CODEGEN_JOBS", "2")
    path = tmp_path / "arm.tar"
    args = ["compile", str(model_path), "-o", str(path), "-O", "0", "--target",
            f"llvm -mtriple={AARCH64}", "--cross-compiler", CROSS_GCC,
            "--cross-compiler-options", "-Wl,-z,now"]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "mod.so + mod.o" in result.stdout
    files = members(path)
    library = read_elf(files["mod.so"])
    assert (library.machine, library.file_type) == (EM_AARCH64, ET_DYN)
    assert (kernel_names(files) | ENTRY_SYMBOLS) <= library.defined
    # parallel loops call tvmc's pool, which tvmc builds and loads on the machine running it
    assert "tvmc_parallel_for" in library.undefined


@needs_cross_gcc
def test_cross_compiler_options_reach_the_linker(model_path, tmp_path):
    with pytest.raises(UsageError, match=r"could not link mod.so for aarch64.*no-such-library"):
        tvmc.compile(str(model_path), target=f"llvm -mtriple={AARCH64}",
                     package_path=str(tmp_path / "a.tar"), cross_compiler=CROSS_GCC,
                     cross_compiler_options="-lno-such-library")  # fmt: skip


@pytest.mark.parametrize(
    "target, compiler, options, message",
    [
        (f"llvm -mtriple={AARCH64}", "no-such-gcc", None, "'no-such-gcc' is not a program on PATH"),
        (f"llvm -mtriple={AARCH64}", None, "-static", "--cross-compiler-options needs"),
        ("cuda", "gcc", None, "links CPU code"),
        (f"llvm -mtriple={AARCH64}", "gcc", "'unclosed", "--cross-compiler-options"),
    ],
)
def test_cross_compiler_errors_come_before_compiling(model_path, target, compiler, options,
                                                     message, monkeypatch):  # fmt: skip
    import tvmc.driver.api as api

    monkeypatch.setattr(api, "load", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(UsageError, match=message):
        tvmc.compile(str(model_path), target=target, cross_compiler=compiler,
                     cross_compiler_options=options)  # fmt: skip


def test_a_host_compiler_cannot_link_aarch64_code(model_path, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    result = CliRunner().invoke(cli, ["compile", str(model_path), "-o", str(tmp_path / "a.tar"),
                                      "--target-llvm-mtriple", AARCH64,
                                      "--cross-compiler", "gcc"])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "could not link mod.so for aarch64-linux-gnu" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "a.tar").exists()


def test_running_an_aarch64_package_here_names_both_triples(model_path, tmp_path):
    path = tmp_path / "arm.tar"
    tvmc.compile(str(model_path), target=f"llvm -mtriple={AARCH64}", package_path=str(path))
    here = host_triple()
    with pytest.raises(PackageError, match=rf"compiled for {AARCH64}.*this machine is {here}"):
        tvmc.run(str(path))
    result = CliRunner().invoke(cli, ["run", str(path)])
    assert result.exit_code == 4 and "Traceback" not in result.stderr
    assert f"compiled for {AARCH64}" in result.stderr
