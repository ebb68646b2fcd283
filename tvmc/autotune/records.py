"""Tuning records: AutoTVM's log format, version 0.2, one JSON object per line.

    {"input": [target, task_name, args, kwargs],
     "config": {"index": int, "code_hash": str, "entity": [[name, kind, value], ...]},
     "result": [[cost_seconds, ...], error_no, all_cost_seconds, timestamp],
     "version": 0.2, "tvm_version": "<tvmc version>"}

A *verdict* record (tune's final paired check of a task's best config against the default
schedule) is the same line with one more key, `"verdict": {"kept": bool, "default_costs":
[seconds, ...]}`: its costs are the searched best config's, one per paired round, beside the
default's of the same rounds. Per workload the last verdict decides what compile applies (the
config when kept, the default schedule when not), whatever lower costs other lines hold; a
reader that does not know the key sees one more record of that config.

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
import statistics
import time
from collections.abc import Iterable, Iterator, Sequence
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


@dataclass(frozen=True)
class Verdict:
    """A paired check: the record's config (costs: one per round) against the default
    schedule timed in the same rounds (`default_costs`); `kept` when the config won."""

    kept: bool
    default_costs: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kept": self.kept, "default_costs": list(self.default_costs)}


def paired_ratios(costs: Sequence[float], default_costs: Sequence[float]) -> tuple[float, int]:
    """(median of the per-round cost ratios config / default, rounds the config was faster)."""
    ratios = [c / d for c, d in zip(costs, default_costs)]
    return statistics.median(ratios), sum(1 for r in ratios if r < 1)


# A paired check keeps a config only if it won so many rounds that a coin per round (no real
# difference) would do it at most this often: on the 2-core VM configs won 4 or 5 of 6 rounds
# by chance and lost end to end (docs/tuning.md, "A final paired check per task").
SIGNIFICANCE = 0.05


def wins_needed(rounds: int) -> int | None:
    """Fewest won rounds of `rounds` that chance reaches with probability <= SIGNIFICANCE (one
    sided sign test): 5 of 5, 6 of 6, 7 of 8, 9 of 10; None under 5 rounds (no count does)."""
    tail = 0.0
    for wins in range(rounds, 0, -1):
        tail += math.comb(rounds, wins) / 2**rounds
        if tail > SIGNIFICANCE:
            return wins + 1 if wins < rounds else None
    return None


def won_clearly(costs: Sequence[float], default_costs: Sequence[float]) -> bool:
    """Whether the config beat the default beyond chance: a median ratio below 1 and at least
    `wins_needed` rounds won."""
    ratio, wins = paired_ratios(costs, default_costs)
    needed = wins_needed(len(costs))
    return ratio < 1 and needed is not None and wins >= needed


def _verdict(doc: Any, costs: list[float], error_no: int) -> Verdict:
    """A record's verdict, checked against its costs: a ValueError unless it is well formed and
    consistent (a config kept only when it won most rounds and its median ratio is below 1).
    Other keys are left to newer readers."""
    if not isinstance(doc, dict) or not {"kept", "default_costs"} <= set(doc):
        raise ValueError("a verdict is {'kept': bool, 'default_costs': [seconds, ...]}")
    kept, default_costs = doc["kept"], doc["default_costs"]
    if type(kept) is not bool or not isinstance(default_costs, list):
        raise ValueError("a verdict's kept is a boolean and its default_costs a list")
    if error_no != 0 or not costs or len(default_costs) != len(costs):
        raise ValueError("a verdict has one cost per round for each side, and no error")
    defaults = tuple(float(c) for c in default_costs)
    if not all(math.isfinite(c) and c > 0 for c in (*costs, *defaults)):
        raise ValueError("a verdict's costs must be positive")
    ratio, wins = paired_ratios(costs, defaults)
    if kept and not (ratio < 1 and 2 * wins > len(costs)):
        raise ValueError(f"a verdict keeps a config that lost (median ratio {ratio:.3f}, "
                         f"{wins} of {len(costs)} rounds won)")  # fmt: skip
    return Verdict(kept, defaults)


@dataclass
class Record:
    """One measurement of one config of one task (or, with `verdict`, a paired check of it)."""

    target: str
    task_name: str
    args: list[Any]
    config: dict[str, Any]  # {"index", "code_hash", "entity"}
    costs: list[float]
    error_no: int = 0
    all_cost: float = 0.0
    timestamp: float = field(default_factory=time.time)
    kwargs: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict | None = None

    @property
    def workload(self) -> tuple[str, str]:
        """(task name, canonical args): what a record applies to."""
        return self.task_name, json.dumps(self.args, separators=(",", ":"))

    @property
    def mean_cost(self) -> float:
        return sum(self.costs) / len(self.costs) if self.costs else FAILED_COST

    @property
    def applies_default(self) -> bool:
        """Whether this record stands for the default schedule: a verdict the default won, or
        one that kept its config on too few won rounds (`won_clearly`; older tvmc kept a
        config that won most rounds)."""
        return self.verdict is not None and not (self.verdict.kept and self.won_clearly)

    @property
    def won_clearly(self) -> bool:
        """Whether a verdict's config beat the default beyond chance in its rounds."""
        return self.verdict is not None and won_clearly(self.costs, self.verdict.default_costs)

    def encode(self) -> str:
        """The record as one JSON line (no newline)."""
        doc = {
            "input": [self.target, self.task_name, self.args, self.kwargs],
            "config": self.config,
            "result": [self.costs, self.error_no, self.all_cost, self.timestamp],
            "version": RECORD_VERSION,
            "tvm_version": __version__,
        }
        if self.verdict is not None:
            doc["verdict"] = self.verdict.to_json()
        return json.dumps(doc, separators=(",", ":"))

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
            if "verdict" in doc:
                record.verdict = _verdict(doc["verdict"], record.costs, error_no)
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
    """A ValueError unless args are ["TENSOR", shape, dtype] entries, then ["ATTRS", {...}],
    and ["THREADS", n] (n >= 1) where the task's kernels run on n threads."""
    for arg in args:
        if not isinstance(arg, list) or not arg or arg[0] not in ("TENSOR", "ATTRS", "THREADS"):
            raise ValueError(f"arg {str(arg)[:40]} is not a TENSOR, ATTRS or THREADS entry")
        if arg[0] == "THREADS" and (len(arg) != 2 or type(arg[1]) is not int or arg[1] < 1):
            raise ValueError("a THREADS entry is not ['THREADS', count of at least 1]")
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
    """Per workload, for targets of this kind, the record that decides its schedule: the last
    verdict (`applies_default` when the default won; lines after it were never checked against
    the default, so they do not override it), else the error-free record of lowest mean cost."""
    best: dict[tuple[str, str], Record] = {}
    decided: set[tuple[str, str]] = set()
    for record in records:
        if record.error_no != 0 or target_kind(record.target) != kind:
            continue
        workload = record.workload
        if record.verdict is not None:
            best[workload] = record
            decided.add(workload)
            continue
        current = best.get(workload)
        if workload not in decided and (current is None or record.mean_cost < current.mean_cost):
            best[workload] = record
    return best
