"""Editing a real package's members as an attacker (or a damaged disk) would, and running `tvmc`
on the results where a crash cannot hurt: for the tests that check a reader refuses what it
cannot trust.

    python -m tests.runtime.forge commands.json   # [["run", "p.tar"], ...]

runs each command line in a forked child and prints a JSON list, one {"status", "stderr"} per
command: status is the exit code, or minus the signal that killed the child (a segfault is -11).
Python starts and imports tvmc once; each command then costs a fork, so a test can run dozens of
forged packages in seconds, and a crash (the thing tested for) kills one child, never the test.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Members = dict[str, bytes]
Change = Callable[[Members], Members]


def members_of(path: str | Path) -> Members:
    """The package's regular-file members by name, in order."""
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def redigest(members: Members) -> Members:
    """The members with metadata.json's digests recomputed (what a forger would do)."""
    try:
        metadata = json.loads(members["metadata.json"])
    except (KeyError, ValueError, RecursionError):
        return members  # no metadata to update
    if not isinstance(metadata, dict) or not isinstance(metadata.get("digests"), dict):
        return members
    metadata["digests"] = {
        name: hashlib.sha256(data).hexdigest()
        for name, data in members.items()
        if name != "metadata.json"
    }
    return {**members, "metadata.json": json.dumps(metadata).encode()}


def rewrite(source: str | Path, target: Path, change: Change, digests: bool = True) -> str:
    """A copy of the package at `source` with its members changed; `digests`: recompute
    metadata.json's digests afterwards (False leaves them, as a damaged copy would)."""
    members = change(members_of(source))
    if digests:
        members = redigest(members)
    with tarfile.open(target, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(target)


def edit_json(name: str, edit: Callable[[Any], Any]) -> Change:
    """A change applying `edit` to the parsed JSON member `name`, in place."""

    def change(members: Members) -> Members:
        document = json.loads(members[name])
        edit(document)
        return {**members, name: json.dumps(document).encode()}

    return change


def both(*changes: Change) -> Change:
    """The changes applied in order."""

    def change(members: Members) -> Members:
        for one in changes:
            members = one(members)
        return members

    return change


def flip_byte(name: str, position: float = 0.5) -> Change:
    """A change inverting one byte of member `name`, `position` of the way through it."""

    def change(members: Members) -> Members:
        data = bytearray(members[name])
        data[int(len(data) * position)] ^= 0xFF
        return {**members, name: bytes(data)}

    return change


def buffer(plan: dict, name: str) -> dict:
    """The mod.json entry of buffer `name`."""
    return next(b for b in plan["buffers"] if b["name"] == name)


def tensor(metadata: dict, name: str) -> dict:
    """metadata.json's input or output entry for program buffer `name`."""
    return next(e for e in metadata["inputs"] + metadata["outputs"] if e["buffer"] == name)


# ---- running tvmc on forged packages ---------------------------------------------------------
TIMEOUT = 120.0  # seconds one command may take before its child is killed


def run_one(args: list[str], directory: str) -> dict[str, object]:
    """Fork, run `tvmc ARGS` in the child with stdout/stderr in files, wait for it."""
    out_path, err_path = os.path.join(directory, "out"), os.path.join(directory, "err")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 70
        try:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
            from tvmc.cli.main import cli

            try:
                cli.main(args, prog_name="tvmc", standalone_mode=True)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + TIMEOUT
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.01)
    code = os.waitstatus_to_exitcode(status)
    with open(err_path, encoding="utf-8", errors="replace") as f:
        return {"status": code, "stderr": f.read()}


def main(argv: list[str]) -> int:
    """Read the command lines from the JSON file argv[0]; print the outcomes as JSON."""
    with open(argv[0]) as f:
        commands = json.load(f)
    import tvmc.cli.main  # noqa: F401  (imported once, before the forks)

    results = []
    with tempfile.TemporaryDirectory(prefix="tvmc-forked-") as directory:
        for args in commands:
            results.append(run_one(args, directory))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
