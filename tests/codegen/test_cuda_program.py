"""A Program for CUDA: one PTX module, the launch list, limits, and `cuda` target strings."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.codegen.cuda_examples import bias_rowsum_program
from tvmc.codegen.cuda_program import Launch, check_launch, emit_cuda_program
from tvmc.codegen.target import CUDA_ARCHS, DEFAULT_CUDA_ARCH, CUDATarget
from tvmc.errors import UsageError
from tvmc.kernel import Buffer, Kernel, KernelIRError, allocate, loop
from tvmc.kernel.program import Call, Program, ProgramBuffer


def test_one_module_and_a_launch_per_call():
    art = emit_cuda_program(bias_rowsum_program(), CUDATarget("sm_80"))
    assert ".target sm_80" in art.ptx
    assert ".visible .entry bias_add(" in art.ptx and ".visible .entry gpu_rowsum(" in art.ptx
    assert [k.name for k in art.kernels] == ["bias_add", "gpu_rowsum"]
    first, second = art.launches
    assert (first.kernel, first.grid, first.block, first.shared_bytes, first.args) == (
        "bias_add", (6, 1, 1), (256, 1, 1), 0, ("x", "b", "t"))  # fmt: skip
    assert (second.grid, second.block, second.shared_bytes) == ((6, 1, 1), (64, 1, 1), 256)
    assert (second.node, second.flops, second.threads) == ("ReduceSum", 1536, 64)


def test_launches_round_trip_through_json():
    art = emit_cuda_program(bias_rowsum_program())
    text = json.dumps([launch.to_json() for launch in art.launches])
    assert tuple(Launch.from_json(d) for d in json.loads(text)) == art.launches
    with pytest.raises(ValueError, match="3 positive extents"):
        Launch.from_json({**art.launches[0].to_json(), "grid": [0, 1, 1]})


@pytest.mark.parametrize("kind", ["kernel", "ll", "ptx", "asm"])
def test_dumps(kind):
    art = emit_cuda_program(bias_rowsum_program())
    text = art.dump(kind)
    expected = {"kernel": "kernel bias_add(", "ll": "ptx_kernel", "ptx": ".entry", "asm": ".entry"}
    assert expected[kind] in text
    with pytest.raises(ValueError, match="valid: kernel, ll, ptx, asm"):
        art.dump("obj")


def test_calls_of_a_program_that_does_not_validate_are_refused():
    program = bias_rowsum_program()
    program.calls.append(Call("gpu_rowsum", ("t",)))
    with pytest.raises(KernelIRError, match="takes 2 buffers"):
        emit_cuda_program(program)


def test_too_much_shared_memory_is_refused():
    y = Buffer("Y", (64,))

    def body(sm):
        return loop("t", 64, lambda t: y.store(t, sm[t]), kind="threadIdx.x")

    kernel = Kernel("big", (y,), allocate("sm", (13 * 1024,), body, scope="shared"))
    program = Program([kernel], {"y": ProgramBuffer("y", (64,), "float32", "output")},
                      [Call("big", ("y",))], [], ["y"], [])  # fmt: skip
    with pytest.raises(KernelIRError, match="53248 bytes of static shared memory"):
        emit_cuda_program(program)


def test_launch_limits():
    check_launch("ok", (1024, 1, 1), 48 * 1024)
    with pytest.raises(KernelIRError, match="2048 threads per block"):
        check_launch("wide", (32, 64, 1), 0)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_program_ptx_assembles(tmp_path, arch):
    src = tmp_path / "m.ptx"
    src.write_text(emit_cuda_program(bias_rowsum_program(), CUDATarget(arch)).ptx)
    done = subprocess.run(["ptxas", f"-arch={arch}", str(src), "-o", str(tmp_path / "m.cubin")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr


# ---- target strings ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "default", "arch"),
    [
        ("cuda", None, DEFAULT_CUDA_ARCH),
        ("cuda", "sm_86", "sm_86"),
        ("cuda -arch=sm_80", "sm_86", "sm_80"),
        ("cuda  -arch=sm_90a", None, "sm_90a"),
    ],
)
def test_parse(text, default, arch):
    target = CUDATarget.parse(text, default)
    assert target.arch == arch and str(target) == f"cuda -arch={arch}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cuda -arch=sm_91", "unknown CUDA architecture 'sm_91'.*one of sm_50"),
        ("cuda -arch=compute_90", "unknown CUDA architecture 'compute_90'"),
        ("cuda -arch", "unknown cuda target option '-arch'; valid: -arch=sm_XX"),
        ("cuda -mcpu=sm_90", "unknown cuda target option '-mcpu=sm_90'"),
        ("llvm", "a CUDA target starts with 'cuda'"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(UsageError, match=message):
        CUDATarget.parse(text)


def test_ptx_versions_and_capabilities():
    assert CUDATarget("sm_90").ptx_version == "ptx86"
    assert CUDATarget("sm_120").ptx_version == "ptx87"
    assert CUDATarget("sm_90a").compute_capability == (9, 0)
    assert CUDATarget("sm_121").compute_capability == (12, 1)
    assert CUDATarget.for_capability(9, 0).arch == "sm_90"
    assert CUDATarget.for_capability(8, 8).arch == "sm_87"  # the newest it runs: PTX JITs up
    assert CUDATarget.for_capability(3, 5).arch == CUDA_ARCHS[0]
