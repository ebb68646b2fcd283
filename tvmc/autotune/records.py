"""Tuning records: AutoTVM's log format, version 0.2, one JSON object per line.

    {"input": [target, task_name, args, kwargs],
     "config": {"index": int, "code_hash": str, "entity": [[name, kind, value], ...]},
     "result": [[cost_seconds, ...], error_no, all_cost_seconds, timestamp],
     "version": 0.2, "tvm_version": "<tvmc version>"}

Records are appended and flushed one measurement at a time under an exclusive lock, so two
tuners sharing a file lose nothing and a crash loses at most the line being written; reading
skips (and names) corrupt or truncated lines.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tvmc.codegen.target import target_kind
from tvmc.errors import UsageError
from tvmc.version import __version__

logger = logging.getLogger("tvmc.autotune")

RECORD_VERSION = 0.2
FAILED_COST = 1e9  # the cost a failed measurement records, so a resumed run skips it
ERROR_NAMES = {
    0: "no error",
    1: "instantiation error",
    2: "compile error (host)",
    3: "compile error (device)",
    4: "runtime error",
    5: "wrong answer",
    6: "build timeout",
    7: "run timeout",
    8: "unknown error",
}


@dataclass
class Record:
    """One measurement of one config of one task."""

    target: str
    task_name: str
    args: list[Any]
    config: dict[str, Any]  # {"index", "code_hash", "entity"}
    costs: list[float]
    error_no: int = 0
    all_cost: float = 0.0
    timestamp: float = field(default_factory=time.time)
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def workload(self) -> tuple[str, str]:
        """(task name, canonical args): what a record applies to."""
        return self.task_name, json.dumps(self.args, separators=(",", ":"))

    @property
    def mean_cost(self) -> float:
        return sum(self.costs) / len(self.costs) if self.costs else FAILED_COST

    def encode(self) -> str:
        """The record as one JSON line (no newline)."""
        return json.dumps(
            {
                "input": [self.target, self.task_name, self.args, self.kwargs],
                "config": self.config,
                "result": [self.costs, self.error_no, self.all_cost, self.timestamp],
                "version": RECORD_VERSION,
                "tvm_version": __version__,
            },
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, line: str) -> Record:
        """Parse one line; ValueError when it is not a v0.2 record."""
        try:
            doc = json.loads(line)
            target, task_name, args, kwargs = doc["input"]
            costs, error_no, all_cost, timestamp = doc["result"]
            config = doc["config"]
            if not isinstance(config, dict) or "index" not in config or "entity" not in config:
                raise ValueError("config lacks index or entity")
            return cls(str(target), str(task_name), list(args), dict(config),
                       [float(c) for c in costs], int(error_no), float(all_cost),
                       float(timestamp), dict(kwargs or {}))  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a tuning record: {exc}") from None


def append_records(path: str, records: Iterable[Record]) -> None:
    """Append records under an exclusive lock, flushed to the OS before returning."""
    lines = "".join(r.encode() + "\n" for r in records)
    if not lines:
        return
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def read_records(path: str, must_exist: bool = True) -> Iterator[Record]:
    """Every valid record of `path`; corrupt lines are skipped with a warning naming them."""
    if not os.path.exists(path):
        if must_exist:
            raise UsageError(f"tuning records file {path!r} does not exist")
        return
    if os.path.isdir(path):
        raise UsageError(f"tuning records path {path!r} is a directory")
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Record.decode(line)
            except ValueError as exc:
                logger.warning(
                    "%s:%d: skipping a corrupt or truncated line (%s)", path, number, exc
                )


def best_records(records: Iterable[Record], kind: str) -> dict[tuple[str, str], Record]:
    """Per workload, the error-free record with the lowest mean cost, for targets of this kind."""
    best: dict[tuple[str, str], Record] = {}
    for record in records:
        if record.error_no != 0 or target_kind(record.target) != kind:
            continue
        current = best.get(record.workload)
        if current is None or record.mean_cost < current.mean_cost:
            best[record.workload] = record
    return best
