"""The layout digest: what a program's code was compiled for, exported by the code (CPU object and
shared library) and written into the PTX, equal to the digest of the plan a package states."""

from __future__ import annotations

import copy
import json

import pytest

from tests.codegen.cuda_examples import bias_rowsum_program
from tvmc.codegen import load_jit, load_shared
from tvmc.codegen.cuda_program import emit_cuda_program
from tvmc.codegen.layout import (
    LAYOUT_SYMBOL,
    layout_digest,
    program_plan,
    ptx_layout,
    ptx_with_layout,
)
from tvmc.codegen.llvm_cpu import KernelSignature
from tvmc.codegen.program import emit_program, entry_signature
from tvmc.kernel import Buffer, Kernel, nest
from tvmc.kernel.program import Call, Program, ProgramBuffer


def scale_program() -> Program:
    """y = 2 * x through a workspace buffer: two kernels, one entry."""
    x, t, y = Buffer("X", (4, 8)), Buffer("T", (4, 8)), Buffer("Y", (4, 8))
    axes = [("i", 4), ("j", 8)]
    double = Kernel("double", (x, t), nest(axes, lambda i, j: t.store((i, j), x[i, j] * 2.0)))
    copy_ = Kernel("copy", (t, y), nest(axes, lambda i, j: y.store((i, j), t[i, j])))
    buffers = {
        "x": ProgramBuffer("x", (4, 8), "float32", "input", 0),
        "t": ProgramBuffer("t", (4, 8), "float32", "workspace", offset=0),
        "y": ProgramBuffer("y", (4, 8), "float32", "output", 0),
    }
    calls = [Call("double", ("x", "t"), "Mul", 32), Call("copy", ("t", "y"), "Identity")]
    return Program([double, copy_], buffers, calls, ["x"], ["y"], [], 128)


def cpu_plan(program: Program) -> dict:
    """The plan mod.json states for `program`'s CPU code (JSON types: lists, not tuples)."""
    kernels = [KernelSignature.of(k) for k in program.kernels] + [entry_signature(program)]
    return json.loads(json.dumps(program_plan(program, kernels)))


@pytest.mark.parametrize("load", [load_shared, load_jit], ids=["mod.so", "mod.o"])
def test_cpu_code_exports_the_digest_of_its_plan(load):
    program = scale_program()
    artifact = emit_program(program, jobs=1)
    assert LAYOUT_SYMBOL in artifact.llvm_ir
    module = load(artifact)
    assert module.layout == layout_digest(cpu_plan(program)).encode()


def test_ptx_ends_with_the_digest_of_its_plan():
    program = bias_rowsum_program()
    artifact = emit_cuda_program(program)
    plan = program_plan(program, artifact.kernels, artifact.launches)
    assert ptx_layout(artifact.ptx) == layout_digest(json.loads(json.dumps(plan)))
    assert artifact.ptx.rstrip().splitlines()[-1].startswith(f"// {LAYOUT_SYMBOL} ")
    assert ptx_layout(ptx_with_layout(artifact.ptx, "0" * 64)) is None  # two lines: none


def edits():
    """(what, edit of a mod.json-shaped plan, whether the digest must change)."""
    return [
        ("workspace", lambda p: p.update(workspace_bytes=64), True),
        ("entry", lambda p: p.update(entry="double"), True),
        ("input order", lambda p: p.update(inputs=["y"]), True),
        ("buffer shape", lambda p: p["buffers"][0].update(shape=[4, 4]), True),
        ("buffer dtype", lambda p: p["buffers"][0].update(dtype="float16"), True),
        ("buffer offset", lambda p: p["buffers"][1].update(offset=64), True),
        ("buffer index", lambda p: p["buffers"][0].update(index=1), True),
        ("call args", lambda p: p["calls"][0].update(args=["t", "x"]), True),
        ("call order", lambda p: p["calls"].reverse(), True),
        ("kernel param", lambda p: p["kernels"][0]["params"][0].__setitem__(1, [16]), True),
        ("buffer order", lambda p: p["buffers"].reverse(), False),
        ("kernel order", lambda p: p["kernels"].reverse(), False),
        ("profile labels", lambda p: p["calls"][0].update(node="other", flops=7), False),
        ("naive bytes", lambda p: p.update(naive_bytes=12345), False),
    ]


@pytest.mark.parametrize(("what", "edit", "changes"), edits(), ids=[e[0] for e in edits()])
def test_the_digest_covers_what_the_code_depends_on(what, edit, changes):
    plan = cpu_plan(scale_program())
    edited = copy.deepcopy(plan)
    edit(edited)
    assert (layout_digest(edited) != layout_digest(plan)) == changes, what
