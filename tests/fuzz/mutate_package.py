"""The package mutator: the seed package with members changed (JSON fields, params, code bytes)
or the tar itself changed (members dropped, repeated, renamed, linked, sizes, bytes); then
`tvmc run` on it; half the cases have the digests of the plan and params recomputed
(`_reseal`), so that their changes reach the plan checks and the layout digest. The CPU runtime's
buffers have guard pages (guard.py): code that read or wrote outside them would crash."""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import json
import tarfile
from pathlib import Path

from hypothesis import strategies as st

from tests.fuzz import values
from tests.fuzz.harness import Case
from tests.fuzz.mutate_npz import npz_cases
from tests.fuzz.mutate_records import _paths, _replace, encode, json_values
from tests.fuzz.seeds import Resources

JSON_MEMBERS = ("metadata.json", "mod.json")


@functools.cache
def members(package: Path) -> tuple[tuple[str, bytes], ...]:
    """The seed package's members, in order."""
    with tarfile.open(package) as tar:
        return tuple((m.name, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile())


def tar_bytes(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    """A tar of (header, data) entries, as given (odd types, names and sizes included)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _file(name: str, data: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


@st.composite
def _member_change(draw: st.DrawFn, name: str, data: bytes, resources: Resources) -> tuple:
    if name in JSON_MEMBERS and draw(st.integers(0, 3)):
        doc = json.loads(data)
        path = draw(st.sampled_from(_paths(doc)[1:]))
        value = draw(json_values())
        delete = draw(st.integers(0, 4)) == 0
        doc = _replace(doc, path, value, delete)
        return encode(doc).encode(), f"{name} {'del' if delete else 'set'} {list(path)[:6]}"
    if name == "mod.params" and draw(st.booleans()):
        case = draw(npz_cases(resources))
        return case.files["in.npz"], f"mod.params: {'; '.join(case.mutations)}"
    new, what = draw(values.damaged(data))
    return new, f"{name}: {what}"


def _reseal(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> str:
    """Recompute metadata.json's digests of the plan and params, as someone editing the package
    on purpose would: their changes then meet the plan checks and the layout digest, not the
    digest check. Code members keep their digests: changed code is code (docs/threat-model.md)."""
    at = next((i for i, (info, _) in enumerate(entries) if info.name == "metadata.json"), None)
    if at is None or entries[at][1] is None:
        return "reseal: no metadata.json"
    try:
        metadata = json.loads(entries[at][1])
        digests = metadata["digests"]
        for info, data in entries:
            if data is not None and info.name in ("mod.json", "mod.params"):
                digests[info.name] = hashlib.sha256(data).hexdigest()
    except (ValueError, TypeError, KeyError, AttributeError):
        return "reseal: metadata.json unreadable"
    entries[at] = _file("metadata.json", json.dumps(metadata).encode(), entries[at][0].mode)
    return "resealed"


@st.composite
def package_cases(draw: st.DrawFn, resources: Resources) -> Case:
    """A damaged copy of the seed package and `tvmc run` on it."""
    entries = [_file(n, d, 0o755 if n.endswith(".so") else 0o644)
               for n, d in members(resources.package)]  # fmt: skip
    changes = []
    picked = draw(st.lists(st.integers(0, len(entries) - 1), min_size=1, max_size=2, unique=True))
    for i in sorted(picked, reverse=True):  # each member once; a drop leaves the rest in place
        how = draw(st.sampled_from(["member", "member", "member", "drop", "repeat", "rename",
                                    "link", "size", "extra"]))  # fmt: skip
        info, data = entries[i]
        if data is None:  # already a link or a cut member
            continue
        info = copy.copy(info)
        if how == "member":
            new, what = draw(_member_change(info.name, data, resources))
            entries[i] = _file(info.name, new, info.mode)
            changes.append(what)
            continue
        if how == "drop":
            del entries[i]
        elif how == "repeat":
            entries.append(entries[i])
        elif how == "rename":
            entries[i] = _file(draw(st.sampled_from(["../" + info.name, "/" + info.name,
                                                     "dir/" + info.name, info.name.upper(),
                                                     info.name + "\x00x", ""])), data)  # fmt: skip
        elif how == "link":
            link = tarfile.TarInfo(info.name)
            link.type = draw(st.sampled_from([tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE,
                                              tarfile.FIFOTYPE, tarfile.CHRTYPE]))  # fmt: skip
            link.linkname = draw(st.sampled_from(["/etc/passwd", "../../x", "mod.o"]))
            entries[i] = (link, None)
        elif how == "size":
            info.size = draw(st.sampled_from([0, 1, 2**33, 2**40, len(data) * 2]))
            entries[i] = (info, data[: info.size] if info.size <= len(data) else None)
        else:
            entries.append(_file(draw(values.names) or "empty", draw(st.binary(max_size=64))))
        changes.append(f"{how} {info.name}")
    if draw(st.booleans()):
        changes.append(_reseal(entries))
    try:
        blob = tar_bytes(entries)
    except (OSError, ValueError, tarfile.TarError) as exc:  # a size tarfile cannot write
        blob = tar_bytes([e for e in entries if e[1] is not None or e[0].size == 0])
        changes.append(f"(tarfile refused: {exc})")
    if draw(st.integers(0, 9)) == 0:
        blob, what = draw(values.damaged(blob))
        changes.append(f"tar bytes: {what}")
    args = ["run", "pkg.tar", "--repeat", "1"]
    return Case("package", args, {"pkg.tar": blob}, changes)
