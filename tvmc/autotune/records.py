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
import math
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
MAX_LINE = 1 << 20  # characters in one line: a record is about a kilobyte
MAX_DEPTH = 32  # JSON nesting of a record: about 7 (args hold nested lists)
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
        """Parse one line; ValueError when it is not a v0.2 record (or not a sane one: too
        long, nested too deep, a number out of range)."""
        if len(line) > MAX_LINE:
            raise ValueError(f"not a tuning record: longer than {MAX_LINE} characters")
        try:
            doc = json.loads(line, parse_float=_finite, parse_constant=_no_constant)
            _check_depth(doc, MAX_DEPTH)
            target, task_name, args, kwargs = doc["input"]
            costs, error_no, all_cost, timestamp = doc["result"]
            config = doc["config"]
            if not isinstance(config, dict) or "index" not in config or "entity" not in config:
                raise ValueError("config lacks index or entity")
            if not isinstance(args, list) or not isinstance(costs, list):
                raise ValueError("args and costs must be lists")
            if not isinstance(kwargs, (dict, type(None))):
                raise ValueError("kwargs must be an object")
            _check_args(args)
            if type(error_no) is not int or error_no not in ERROR_NAMES:
                raise ValueError(f"error_no {error_no!r} is not one of {sorted(ERROR_NAMES)}")
            record = cls(str(target), str(task_name), list(args), dict(config),
                         [float(c) for c in costs], error_no, float(all_cost),
                         float(timestamp), dict(kwargs or {}))  # fmt: skip
        except RecursionError:
            raise ValueError("not a tuning record: nested too deeply") from None
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"not a tuning record: {exc}") from None
        numbers = [*record.costs, record.all_cost, record.timestamp]
        if not all(math.isfinite(v) and v >= 0 for v in numbers):
            raise ValueError("not a tuning record: a cost or time is negative or not finite")
        return record


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not a number JSON allows")


def _check_args(args: list[Any]) -> None:
    """A ValueError unless args are ["TENSOR", shape, dtype] entries, then ["ATTRS", {...}]."""
    for arg in args:
        if not isinstance(arg, list) or not arg or arg[0] not in ("TENSOR", "ATTRS"):
            raise ValueError(f"arg {str(arg)[:40]} is not a TENSOR or ATTRS entry")
        if arg[0] == "ATTRS" and (len(arg) != 2 or not isinstance(arg[1], dict)):
            raise ValueError("an ATTRS entry is not ['ATTRS', {...}]")
        if arg[0] == "TENSOR" and (
            len(arg) != 3
            or not isinstance(arg[1], list)
            or not all(type(d) is int and 0 <= d <= 2**63 - 1 for d in arg[1])
            or not isinstance(arg[2], str)
        ):
            raise ValueError("a TENSOR entry is not ['TENSOR', [dims], dtype]")


def _check_depth(doc: Any, limit: int) -> None:
    """A ValueError when lists and objects nest deeper than `limit`."""
    level = [doc]
    for _ in range(limit + 1):
        level = [v for item in level if isinstance(item, (list, dict))
                 for v in (item.values() if isinstance(item, dict) else item)]  # fmt: skip
        if not level:
            return
    raise ValueError(f"nested deeper than {limit} levels")


def _lines(f: Any) -> Iterator[tuple[int, str | None]]:
    """(number, line) of a text file; None for a line past MAX_LINE, which is skipped unread."""
    number = 0
    while True:
        line = f.readline(MAX_LINE + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE and not line.endswith("\n"):
            while line and not line.endswith("\n"):
                line = f.readline(MAX_LINE)
            yield number, None
            continue
        yield number, line


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
        for number, line in _lines(f):
            if line is None:
                logger.warning("%s:%d: skipping a line longer than %d characters", path, number,
                               MAX_LINE)  # fmt: skip
                continue
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
