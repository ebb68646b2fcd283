"""Where the steps write: never over a file the user wrote, unless told to.

`compile -o` replaces a tvmc package (compiling again is the point), `load -o` a saved model, and
`tune -o` appends to a records file; each refuses the model it reads, and an existing file that
is not what it writes (an ONNX model, notes, someone else's tar), with a UsageError naming the
file. `force=True` (`--force` on compile and load) replaces it all the same. A records file is
never replaced: `tvmc tune` appends, `tvmc records best` writes a records file anew.
"""

from __future__ import annotations

import json
import os
import tarfile
from collections.abc import Mapping

from tvmc.autotune.records import Record
from tvmc.errors import UsageError

PEEK_BYTES = 1 << 20  # metadata.json and a records line are far smaller


def same_file(path: str, other: str | os.PathLike[str] | None) -> bool:
    """True when both paths exist and name one file (through links, `..` or case)."""
    if other is None:
        return False
    try:
        return os.path.samefile(path, other)
    except (OSError, ValueError):
        return False


def tar_format(path: str) -> str | None:
    """The `format` in a tar's metadata.json ("tvmc.package", "tvmc.model"), else None."""
    try:
        with tarfile.open(path, "r:*") as tar:
            member = tar.getmember("metadata.json")
            if not member.isfile() or member.size > PEEK_BYTES:
                return None
            handle = tar.extractfile(member)
            metadata = json.loads(handle.read()) if handle else None
    except (tarfile.TarError, OSError, EOFError, KeyError, ValueError, RecursionError):
        return None
    return metadata.get("format") if isinstance(metadata, dict) else None


def is_records_file(path: str) -> bool:
    """True when `path` is empty or its first non-blank line is a tuning record."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            line = f.readline(PEEK_BYTES)
            while line and not line.strip():
                line = f.readline(PEEK_BYTES)
    except OSError:
        return False
    if not line:
        return True
    try:
        Record.decode(line)
    except ValueError:
        return False
    return True


Inputs = Mapping[str, "str | os.PathLike[str] | None"]  # what the command reads, by role


def _refuse_inputs(path: str, inputs: Inputs, hint: str) -> None:
    for role, source in inputs.items():
        if same_file(path, source):
            raise UsageError(
                f"refusing to write over {path!r}: it is {role} this command reads; choose "
                f"another output path{hint}"
            )


def check_output(
    path: str | os.PathLike[str],
    writes: str,
    inputs: Inputs | None = None,
    force: bool = False,
) -> None:
    """UsageError unless writing `writes` ("tvmc.package" or "tvmc.model") at `path` replaces
    nothing but a file of that format, and none of `inputs`; `force` allows it anyway."""
    path = os.fspath(path)
    if force or not os.path.lexists(path) or os.path.isdir(path):
        return  # a directory is refused by the writer, with its own message
    _refuse_inputs(path, inputs or {}, " (or --force to replace it)")
    if tar_format(path) != writes:
        kind = {"tvmc.package": "tvmc package", "tvmc.model": "saved tvmc model"}.get(writes)
        raise UsageError(
            f"refusing to replace {path!r}: it exists and is not a {kind or writes}; choose "
            "another output path (or --force to replace it)"
        )


def check_records_output(path: str | os.PathLike[str], inputs: Inputs | None = None) -> None:
    """UsageError unless `path` is absent or a records file (records are appended to it), and
    is not one of `inputs` (the model being tuned)."""
    path = os.fspath(path)
    if not os.path.lexists(path) or os.path.isdir(path):
        return  # a directory is refused by the records reader, with its own message
    _refuse_inputs(path, inputs or {}, "")
    if not is_records_file(path):
        raise UsageError(
            f"refusing to write tuning records into {path!r}: it exists and is not a records "
            "file (its first line is not a tuning record); choose another path"
        )


def write_text(
    path: str | os.PathLike[str], content: str, marker: str, inputs: Inputs | None = None
) -> str:
    """Write a chart or trace at `path` atomically. An existing file is replaced only when its
    start holds `marker` (`<svg`, `"traceEvents"`: one this command writes) and it is none of
    `inputs`."""
    path = os.fspath(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        _refuse_inputs(path, inputs or {}, "")
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                ours = marker in f.read(PEEK_BYTES)
        except OSError:
            ours = False
        if not ours:
            raise UsageError(
                f"refusing to replace {path!r}: it exists and is not a file tvmc writes there "
                f"(no {marker} in it); choose another path or remove it"
            )
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(content)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"cannot write {path!r}: {exc.strerror or exc}") from None
    return path
