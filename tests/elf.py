"""Just enough of an ELF reader for tests: the machine, the file type and the symbols.

Parsed with struct (64-bit little-endian files only, which is what tvmc's CPU targets emit) so
the tests need neither pyelftools nor binutils for the target.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

EM_X86_64, EM_AARCH64 = 62, 183
ET_REL, ET_DYN = 1, 3
SHT_SYMTAB, SHT_DYNSYM = 2, 11
SHN_UNDEF = 0


@dataclass(frozen=True)
class ELFInfo:
    """What a test checks of an object or shared library."""

    machine: int  # e_machine: EM_AARCH64...
    file_type: int  # e_type: ET_REL (an object), ET_DYN (a shared library)
    defined: frozenset[str]  # symbols the file defines (in .symtab, else .dynsym)
    undefined: frozenset[str]  # symbols it needs from elsewhere


def read_elf(data: bytes) -> ELFInfo:
    """The header and the symbol table of a 64-bit little-endian ELF file."""
    assert data[:4] == b"\x7fELF", "not an ELF file"
    assert data[4] == 2 and data[5] == 1, "only 64-bit little-endian ELF is read here"
    file_type, machine = struct.unpack_from("<HH", data, 16)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]  # fmt: skip
    by_type = {s[1]: s for s in sections}
    table = by_type.get(SHT_SYMTAB) or by_type.get(SHT_DYNSYM)
    defined, undefined = set(), set()
    if table is not None:
        offset, size, link, entsize = table[4], table[5], table[6], table[9]
        strings = sections[link][4]
        for at in range(offset + entsize, offset + size, entsize):  # entry 0 is the null symbol
            name_at, _info, _other, shndx = struct.unpack_from("<IBBH", data, at)
            end = data.index(b"\0", strings + name_at)
            name = data[strings + name_at : end].decode()
            if name:
                (undefined if shndx == SHN_UNDEF else defined).add(name)
    return ELFInfo(machine, file_type, frozenset(defined), frozenset(undefined))
