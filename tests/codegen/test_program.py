"""Whole programs: merging the objects of parallel code generation (each part's constant-pool
labels renamed in place, so that MCJIT cannot bind one part's relocation to another part's
constants), and the flag every part's kernels raise when their heap scratch cannot be had."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.driver.test_compile_progress import chain
from tvmc.codegen import load_shared
from tvmc.codegen.program import (
    PARALLEL_MIN_KERNELS,
    PART_MARKS,
    constant_pool_labels_of_part,
    emit_program,
    heap_scratch_bytes,
)
from tvmc.driver.compiler import CompileOptions, build
from tvmc.errors import ScratchMemoryError
from tvmc.frontend import convert_model
from tvmc.kernel import Buffer, Kernel, allocate, loop, seq
from tvmc.kernel.program import Call, Program, ProgramBuffer
from tvmc.runtime import Executor, ProgramInfo


def labels(path: Path) -> list[str]:
    done = subprocess.run(["nm", "-a", str(path)], capture_output=True, text=True, check=True)
    return sorted(line.split()[-1] for line in done.stdout.splitlines()
                  if line.split()[-1].startswith(".L"))  # fmt: skip


@pytest.mark.skipif(shutil.which("nm") is None, reason="no nm")
def test_parts_get_labels_of_their_own(tmp_path: Path):
    options = CompileOptions(opt_level=0, codegen_jobs=1)
    code = build(convert_model(chain()), options).artifact.object_code
    before, after = tmp_path / "before.o", tmp_path / "after.o"
    before.write_bytes(code)
    after.write_bytes(constant_pool_labels_of_part(code, 2))
    old, new = labels(before), labels(after)
    assert old and all(name.startswith(".LCPI") for name in old)
    assert new == sorted(".LCP" + chr(PART_MARKS[2]) + name[5:] for name in old)
    assert len(after.read_bytes()) == len(code)  # renamed in place: nothing moves


def test_refuses_what_it_cannot_rename():
    with pytest.raises(ValueError, match="ELF"):
        constant_pool_labels_of_part(b"MZ not an ELF object", 0)
    with pytest.raises(ValueError, match="parts"):
        constant_pool_labels_of_part(b"\x7fELF", len(PART_MARKS))


def _program_with_heap_scratch(elements: int, kernels: int) -> Program:
    """x -> `kernels` chained copies (the first doubles through `elements` floats of heap
    scratch) -> y; enough kernels that codegen_jobs > 1 compiles them in parallel groups."""
    x, y = Buffer("x", (64,)), Buffer("y", (64,))
    chain = [x] + [Buffer(f"t{i}", (64,)) for i in range(kernels - 1)] + [y]
    body = allocate("big", (elements,), lambda big: seq(
        loop("i", 64, lambda i: big.store(i, chain[0][i] * 2.0)),
        loop("i", 64, lambda i: chain[1].store(i, big[i])),
    ))  # fmt: skip
    ks = [Kernel("k0", (chain[0], chain[1]), body)]
    for i in range(1, kernels):
        src, dst = chain[i], chain[i + 1]
        copy = loop("i", 64, lambda j, s=src, d=dst: d.store(j, s[j]))
        ks.append(Kernel(f"k{i}", (src, dst), copy))
    buffers = {"x": ProgramBuffer("x", (64,), "float32", "input"),
               "y": ProgramBuffer("y", (64,), "float32", "output")}  # fmt: skip
    for i in range(kernels - 1):
        buffers[f"t{i}"] = ProgramBuffer(f"t{i}", (64,), "float32", "workspace", offset=256 * i)
    calls = [Call(k.name, tuple(b.name for b in k.params)) for k in ks]
    return Program(ks, buffers, calls, ["x"], ["y"], [], workspace_bytes=256 * kernels)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_whose_scratch_cannot_be_had_is_an_error(jobs):
    x = np.arange(64, dtype=np.float32)
    for elements, fails in ((1 << 60, True), (1 << 17, False)):
        program = _program_with_heap_scratch(elements, PARALLEL_MIN_KERNELS)
        info = ProgramInfo.of(program)
        executor = Executor(load_shared(emit_program(program, jobs=jobs)), info, {})
        executor.set_inputs([x])
        if fails:
            with pytest.raises(ScratchMemoryError, match="no memory for its scratch"):
                executor.run()
            with pytest.raises(ScratchMemoryError):
                executor.profile(repeat=1)
        else:
            np.testing.assert_array_equal(executor.run()[0], x * 2)
            assert executor.profile(repeat=1)


def test_heap_scratch_of_a_program_on_its_threads():
    """k0's 512 KiB of heap scratch sits outside any parallel loop: one copy at a time, unless
    images run side by side, as many as threads and slots, each with its own."""
    program = _program_with_heap_scratch(1 << 17, 3)
    one = (1 << 17) * 4
    assert heap_scratch_bytes(program, 1) == heap_scratch_bytes(program, 4) == one
    side_by_side = dataclasses.replace(program, images=4, slots=4)
    assert heap_scratch_bytes(side_by_side, 2) == 2 * one
    assert heap_scratch_bytes(side_by_side, 8) == 4 * one  # no more at once than images
    assert heap_scratch_bytes(dataclasses.replace(side_by_side, slots=2), 4) == 2 * one  # slots
    assert heap_scratch_bytes(_program_with_heap_scratch(64, 3), 4) == 0  # on the stack
