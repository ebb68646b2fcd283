"""Merging the objects of parallel code generation: each part's constant-pool labels renamed
in place, so that MCJIT cannot bind one part's relocation to another part's constants."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.driver.test_compile_progress import chain
from tvmc.codegen.program import PART_MARKS, constant_pool_labels_of_part
from tvmc.driver.compiler import CompileOptions, build
from tvmc.frontend import convert_model


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
