"""A structural check of an ELF relocatable object before LLVM's JIT reads it.

llvmlite hands object bytes to LLVM's object reader and RuntimeDyld, which trust the headers:
an empty or garbage mod.o, or one whose tables point past its end, crashed the process
(segfault) instead of raising. `check_object` refuses, with the reason, whatever is not a
64-bit little-endian relocatable object for this machine whose sections, symbols and
relocations all lie within its bytes and refer to entries that exist. LLVM still parses what
passes; that is the object our own codegen writes (tvmc.codegen.llvm_cpu).
"""

from __future__ import annotations

import struct

from tvmc.codegen.host import host_triple, triple_arch

HEADER = struct.Struct("<16sHHIQQQIHHHHHH")  # Elf64_Ehdr
SECTION = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym
RELA = struct.Struct("<QQq")  # Elf64_Rela
REL = struct.Struct("<QQ")  # Elf64_Rel
ET_REL = 1
SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 2, 3, 4, 8, 9
SHN_LORESERVE = 0xFF00  # section indices from here on are special (absolute, common, ...)
SHN_ABS = 0xFFF1  # the one special index accepted: absolute (file names); a common symbol's
# value is its alignment, which LLVM asserts on, and our code generation makes none
SYMBOL_TYPES = {0, 1, 2, 3, 4}  # none, object, function, section, file (no TLS, no ifunc)
SYMBOL_BINDINGS = {0, 1, 2}  # local, global, weak
PC32 = {62: 2}  # the 32-bit PC-relative relocation, which must reach a symbol of the object
MAX_ALIGN = 1 << 16  # LLVM keeps alignments in 32 bits (2**32 became 0, which it asserts on)
MAX_NOBITS = 1 << 28  # zero-filled sections LLVM allocates (ours hold a few globals)
MACHINES = {"x86_64": 62, "aarch64": 183, "arm64": 183}  # e_machine by triple_arch
NOT_ELF = ("darwin", "macos", "ios", "windows", "win32")  # hosts whose objects are not ELF
# The relocation types LLVM's JIT resolves that code generation for these machines emits
# (x86-64: 64, PC32, PLT32, GOTPCREL, 32, 32S, PC64, GOTPCRELX, REX_GOTPCRELX; AArch64: ABS and
# PREL 64/32/16, MOVW_UABS, ADR, ADD, LDST, branches, GOT page and offset): it aborts the
# process on any other ("not implemented yet"). WIDE ones write 8 bytes, the others 4.
RELOCATIONS = {
    62: {1, 2, 4, 9, 10, 11, 24, 41, 42},
    183: {*range(257, 263), *range(263, 271), *range(274, 287), 299, 311, 312},
}
WIDE_RELOCATIONS = {62: {1, 24}, 183: {257, 260}}


class ObjectError(RuntimeError):
    """Object bytes that are not a well-formed relocatable object for this machine."""


def host_machine() -> int | None:
    """The ELF e_machine of this host's objects: None where they are not ELF (Mach-O, COFF) or
    the architecture is not one tvmc knows."""
    triple = host_triple()
    if any(name in triple for name in NOT_ELF):
        return None
    return MACHINES.get(triple_arch(triple))


def check_object(code: bytes, machine: int) -> None:
    """Raises ObjectError unless `code` is an ELF64 little-endian relocatable object for
    `machine` (an e_machine: `host_machine()`) whose every table lies within it and whose
    symbols and relocations refer to entries that exist."""
    if len(code) < HEADER.size or code[:4] != b"\x7fELF":
        raise ObjectError(f"not an ELF object ({len(code)} bytes)")
    ident, kind, arch, _, _, _, shoff, _, ehsize, _, _, shentsize, shnum, shstrndx = (
        HEADER.unpack_from(code)
    )
    if ident[4] != 2 or ident[5] != 1:
        raise ObjectError("not a 64-bit little-endian ELF object")
    if kind != ET_REL:
        raise ObjectError(f"ELF type {kind}, not a relocatable object")
    if arch != machine:
        raise ObjectError(f"code for ELF machine {arch}, this machine is {machine}")
    if ehsize != HEADER.size or shentsize != SECTION.size or not 0 < shnum < SHN_LORESERVE:
        raise ObjectError("malformed ELF header")
    if shoff + shnum * SECTION.size > len(code) or shstrndx >= shnum:
        raise ObjectError("section table past the object's end")
    sections = [SECTION.unpack_from(code, shoff + i * SECTION.size) for i in range(shnum)]
    for i, (_, kind, _, _, offset, size, link, _, align, _) in enumerate(sections):
        if kind != SHT_NOBITS and offset + size > len(code):
            raise ObjectError(f"section {i} past the object's end")
        if link >= shnum:
            raise ObjectError(f"section {i} links to section {link} of {shnum}")
        if align & (align - 1) or align > MAX_ALIGN:
            raise ObjectError(f"section {i} aligned to {align}")
        if kind == SHT_NOBITS and size > MAX_NOBITS:
            raise ObjectError(f"section {i} asks for {size} zero bytes")
    _check_names(code, sections, sections[shstrndx], "section")
    symbols = {i: _check_symbols(code, sections, s, i)
               for i, s in enumerate(sections) if s[1] == SHT_SYMTAB}  # fmt: skip
    for i, section in enumerate(sections):
        if section[1] in (SHT_RELA, SHT_REL):
            _check_relocations(code, sections, section, i, arch, symbols.get(section[6]))


def _check_names(
    code: bytes, sections: list[tuple], strtab: tuple, what: str, names=None
) -> None:  # fmt: skip
    if strtab[1] != SHT_STRTAB:
        raise ObjectError(f"{what} names are not in a string table")
    offset, size = strtab[4], strtab[5]
    if size and code[offset + size - 1] != 0:
        raise ObjectError(f"{what} names' string table does not end its last name")
    for name in names if names is not None else (s[0] for s in sections):
        if name >= max(size, 1):
            raise ObjectError(f"a {what} name past its string table")


def _entries(code: bytes, section: tuple, entry: struct.Struct, i: int) -> list[tuple]:
    _, _, _, _, offset, size, _, _, _, entsize = section
    if entsize != entry.size or size % entry.size:
        raise ObjectError(f"section {i}: entries of {entsize} bytes, not {entry.size}")
    return list(entry.iter_unpack(code[offset : offset + size]))


def _check_symbols(code: bytes, sections: list[tuple], symtab: tuple, i: int) -> list[tuple]:
    """The symbol table's entries, each checked."""
    symbols = _entries(code, symtab, SYMBOL, i)
    _check_names(code, sections, sections[symtab[6]], "symbol", [s[0] for s in symbols])
    for _, info, _, shndx, value, _ in symbols:
        if info & 0xF not in SYMBOL_TYPES or info >> 4 not in SYMBOL_BINDINGS:
            raise ObjectError(f"a symbol of type {info & 0xF}, binding {info >> 4}")
        if shndx >= len(sections) and shndx != SHN_ABS:
            raise ObjectError(f"a symbol in section {shndx} of {len(sections)}")
        if 0 < shndx < len(sections) and value > sections[shndx][5]:
            raise ObjectError(f"a symbol past the end of section {shndx}")
    return symbols


def _check_relocations(
    code: bytes, sections: list[tuple], table: tuple, i: int, arch: int,
    symbols: list[tuple] | None,
) -> None:  # fmt: skip
    """`symbols`: the entries of the symbol table the relocations name (None: not one)."""
    target = table[7]
    if symbols is None or target >= len(sections):
        raise ObjectError(f"section {i}: relocations without their symbols or section")
    count = len(symbols)
    limit = sections[target][5]
    known, wide = RELOCATIONS.get(arch), WIDE_RELOCATIONS.get(arch, set())
    entry = RELA if table[1] == SHT_RELA else REL
    for offset, info, *addend in _entries(code, table, entry, i):
        kind = info & 0xFFFFFFFF
        if known is not None and kind not in known:
            raise ObjectError(f"section {i}: relocation type {kind}")
        width = 8 if kind in wide else 4
        if info >> 32 >= count or offset + width > limit:
            raise ObjectError(f"section {i}: a relocation past its symbols or section")
        if kind == PC32.get(arch) and not 0 < symbols[info >> 32][3] < len(sections):
            raise ObjectError(f"section {i}: a 32-bit PC-relative relocation leaves the object")
        if width == 4 and addend and not -(1 << 31) <= addend[0] < 1 << 31:
            raise ObjectError(f"section {i}: a 32-bit relocation's addend {addend[0]}")
