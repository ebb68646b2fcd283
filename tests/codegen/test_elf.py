"""Object bytes from outside (a package's mod.o) are checked before LLVM's JIT reads them:
`check_object` refuses what is not a well-formed relocatable object, `load_object`'s probe what
would kill the process anyway. Damaged objects are made from a real one, field by field, and by
random bytes in its headers and tables, each loaded in a forked child (a crash kills it, not
pytest)."""

from __future__ import annotations

import faulthandler
import functools
import os
import random

import pytest

from tests.kernel.examples import CPU_EXAMPLES
from tvmc.codegen import CPUTarget, emit_cpu, load_object
from tvmc.codegen.elf import (
    HEADER,
    RELA,
    SECTION,
    SHT_RELA,
    SHT_STRTAB,
    SHT_SYMTAB,
    ObjectError,
    check_object,
    host_machine,
)

pytestmark = pytest.mark.skipif(host_machine() is None, reason="an ELF machine tvmc knows")


@functools.cache
def real_object() -> bytes:
    """Every CPU example kernel in one object: calls into the pool, constants, relocations."""
    kernels = [CPU_EXAMPLES[name]().kernel for name in sorted(CPU_EXAMPLES)]
    return emit_cpu(kernels).object_code


def sections(code: bytes) -> list[tuple]:
    shoff, shnum = HEADER.unpack_from(code)[6], HEADER.unpack_from(code)[12]
    return [SECTION.unpack_from(code, shoff + i * SECTION.size) for i in range(shnum)]


def section_header(code: bytes, kind: int) -> int:
    """The byte offset of the first section header of `kind`."""
    shoff = HEADER.unpack_from(code)[6]
    index = next(i for i, s in enumerate(sections(code)) if s[1] == kind)
    return shoff + index * SECTION.size


def patched(code: bytes, offset: int, value: bytes) -> bytes:
    return code[:offset] + value + code[offset + len(value) :]


def first_rela(code: bytes) -> int:
    """The byte offset of the first relocation entry."""
    return next(s[4] for s in sections(code) if s[1] == SHT_RELA and s[5])


def test_the_objects_our_codegen_writes_pass():
    check_object(real_object(), host_machine())
    load_object(real_object(), [], probe=True)
    assert any(s[1] == SHT_RELA and s[5] for s in sections(real_object()))


@pytest.mark.parametrize(
    "target,machine",
    [("llvm -mtriple=aarch64-linux-gnu", 183), ("llvm -mcpu=sapphirerapids", 62)],
    ids=["aarch64", "avx512"],
)  # fmt: skip
def test_cross_objects_pass_for_their_machine(target, machine):
    """A package for another CPU is loaded (mod.o only) where it runs: its relocations (AArch64's
    ADR/ADD/CALL26 and GOT pairs) must be ones the check accepts."""
    kernels = [CPU_EXAMPLES[name]().kernel for name in sorted(CPU_EXAMPLES)]
    code = emit_cpu(kernels, CPUTarget.parse(target)).object_code
    check_object(code, machine)
    other = 62 if machine == 183 else 183
    with pytest.raises(ObjectError, match=f"ELF machine {machine}"):
        check_object(code, other)


DAMAGED = {
    "empty": (lambda c: b"", "not an ELF object"),
    "garbage": (lambda c: bytes(range(256)) * 4, "not an ELF object"),
    "32-bit": (lambda c: patched(c, 4, b"\x01"), "64-bit little-endian"),
    "a shared library": (lambda c: patched(c, 16, (3).to_bytes(2, "little")), "ELF type 3"),
    "another machine": (lambda c: patched(c, 18, (40).to_bytes(2, "little")), "ELF machine 40"),
    "truncated": (lambda c: c[: len(c) // 2], "past the object's end"),
    "section table far out": (
        lambda c: patched(c, 40, (1 << 40).to_bytes(8, "little")),
        "section table past",
    ),
    "a section past the end": (
        lambda c: patched(c, section_header(c, SHT_SYMTAB) + 32, (1 << 32).to_bytes(8, "little")),
        "past the object's end",
    ),
    "alignment not a power of two": (
        lambda c: patched(c, section_header(c, SHT_RELA) + 48, (24).to_bytes(8, "little")),
        "aligned to 24",
    ),
    "string table unterminated": (
        lambda c: patched(c, _last_byte(c, SHT_STRTAB), b"x"),
        "does not end its last name",
    ),
    "relocation type unknown": (
        lambda c: patched(c, first_rela(c) + 8, (99).to_bytes(4, "little")),
        "relocation type 99",
    ),
    "relocation past its symbols": (
        lambda c: patched(c, first_rela(c) + 12, (1 << 20).to_bytes(4, "little")),
        "past its symbols",
    ),
    "relocation addend out of 32 bits": (
        lambda c: _with_addend(c, 1 << 40),
        "addend",
    ),
}


def _last_byte(code: bytes, kind: int) -> int:
    s = next(s for s in sections(code) if s[1] == kind and s[5])
    return s[4] + s[5] - 1


def _with_addend(code: bytes, addend: int) -> bytes:
    """The first 4-byte relocation's addend set to `addend`."""
    s = next(s for s in sections(code) if s[1] == SHT_RELA and s[5])
    for i, (_, info, _) in enumerate(RELA.iter_unpack(code[s[4] : s[4] + s[5]])):
        if info & 0xFFFFFFFF not in (1, 24, 257, 260):  # not an 8-byte one
            at = s[4] + i * RELA.size + 16
            return patched(code, at, addend.to_bytes(8, "little", signed=True))
    raise AssertionError("no 4-byte relocation")


@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_objects_are_refused_with_the_reason(case):
    damage, reason = DAMAGED[case]
    code = damage(real_object())
    with pytest.raises(ObjectError, match=reason):
        check_object(code, host_machine())
    with pytest.raises(RuntimeError, match=reason):  # ObjectError is one: callers catch it
        load_object(code, [])


def loads_in_a_child(code: bytes) -> str:
    """'loaded', 'refused' or how the child died, for `load_object` with its probe."""
    pid = os.fork()
    if pid == 0:
        status = 2
        try:
            faulthandler.disable()
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            load_object(code, [], probe=True)
            status = 0
        except RuntimeError:
            status = 3
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return {0: "loaded", 3: "refused"}.get(os.WEXITSTATUS(status), f"exit {status}")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_random_damage_to_headers_and_tables_never_kills_the_process():
    """1-3 random bytes changed in the ELF header, the section table or a symbol, string or
    relocation table: 200 objects, each loaded or refused, none crashing (without the checks
    about 1 in 13 aborted or segfaulted LLVM's loader)."""
    code = real_object()
    shoff, shnum = HEADER.unpack_from(code)[6], HEADER.unpack_from(code)[12]
    tables = [(s[4], s[4] + s[5]) for s in sections(code)
              if s[1] in (SHT_SYMTAB, SHT_STRTAB, SHT_RELA) and s[5]]  # fmt: skip
    regions = [(0, HEADER.size), (shoff, shoff + shnum * SECTION.size), *tables]
    rng = random.Random(15)
    outcomes = {}
    for trial in range(200):
        damaged = bytearray(code)
        lo, hi = rng.choice(regions)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(lo, hi)] = rng.randrange(256)
        outcome = loads_in_a_child(bytes(damaged))
        assert outcome in ("loaded", "refused"), f"trial {trial}: {outcome}"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("refused", 0) > 20  # the damage reached the checks
