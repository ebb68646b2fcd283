"""A records file at a glance (`tvmc records show`) and reduced to its best (`tvmc records best`).

In: tvmc.autotune.records, tvmc.driver.tuning_report (FLOPs and summaries of a workload's args).
Out: `load_records`, `summarize_records`, `write_best_records`. Never prints.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tvmc.autotune import ERROR_NAMES, Record, append_records, best_records, read_records
from tvmc.autotune.records import paired_ratios
from tvmc.codegen.target import target_kind
from tvmc.driver.outputs import check_records_output
from tvmc.driver.tuning_report import args_summary, gflops, task_op, workload_flops
from tvmc.errors import UsageError


@dataclass
class WorkloadRecords:
    """The records of one workload (and target) in a file."""

    target: str
    name: str
    args: list[Any]
    trials: int = 0
    errors: Counter[int] = field(default_factory=Counter)
    best: Record | None = None
    verdict: Record | None = None  # the last paired check's: what compile applies

    def verdict_json(self) -> dict[str, Any] | None:
        """The last paired check: kept or not (as compile applies it: an older tvmc's verdict
        that kept a config on too few won rounds is not), the config's paired speedup, its
        index."""
        if self.verdict is None or self.verdict.verdict is None:
            return None
        ratio, _ = paired_ratios(self.verdict.costs, self.verdict.verdict.default_costs)
        return {"kept": not self.verdict.applies_default, "speedup": round(1 / ratio, 3),
                "config_index": self.verdict.config.get("index")}  # fmt: skip

    @property
    def flops(self) -> int | None:
        return workload_flops(self.name, self.args)

    @property
    def best_gflops(self) -> float | None:
        return gflops(self.flops, self.best.mean_cost if self.best else None)

    def to_json(self) -> dict[str, Any]:
        best, rate = self.best, self.best_gflops
        return {
            "target": self.target,
            "name": self.name,
            "args": self.args,
            "args_summary": args_summary(task_op(self.name), self.args),
            "trials": self.trials,
            "flops": self.flops,
            "best_seconds": best.mean_cost if best else None,
            "best_gflops": round(rate, 3) if rate is not None else None,
            "best_config": best.config if best else None,
            "verdict": self.verdict_json(),
            "errors": {ERROR_NAMES.get(k, str(k)): v for k, v in sorted(self.errors.items())},
        }


def load_records(path: str | os.PathLike[str]) -> list[Record]:
    """The valid records of `path`; an error when it has lines but none is a record."""
    path = os.fspath(path)
    records = list(read_records(path))  # warns about each corrupt line; errors when missing
    if not records:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = sum(1 for line in f if line.strip())
        if lines:
            raise UsageError(
                f"{path!r} holds no tuning record ({lines} line(s), none valid): give a records "
                "file that `tvmc tune` wrote (AutoTVM v0.2 JSON lines)"
            )
    return records


def check_target_kind(records: list[Record], target: str, path: str) -> None:
    """An error when `records` are all for another kind of target (cuda records for llvm)."""
    kind = target_kind(target)
    kinds = sorted({target_kind(r.target) for r in records} - {""})
    if kinds and kind not in kinds:
        raise UsageError(
            f"{path!r} holds records for {', '.join(kinds)}, none for {kind!r}: tune for this "
            f"target (tvmc tune --target {kind} ...) or compile for {kinds[0]!r}"
        )


def summarize_records(path: str | os.PathLike[str]) -> list[WorkloadRecords]:
    """Per workload and target, in the order of first appearance: trials, errors, the best
    measured, the last paired check's verdict (not a trial)."""
    groups: dict[tuple[str, str, str], WorkloadRecords] = {}
    for record in load_records(path):
        key = (record.target, *record.workload)
        if key not in groups:
            groups[key] = WorkloadRecords(record.target, record.task_name, record.args)
        group = groups[key]
        if record.verdict is not None:
            group.verdict = record
            continue
        group.trials += 1
        if record.error_no:
            group.errors[record.error_no] += 1
        elif group.best is None or record.mean_cost < group.best.mean_cost:
            group.best = record
    return list(groups.values())


def write_best_records(
    path: str | os.PathLike[str], output: str | os.PathLike[str]
) -> tuple[int, int]:
    """Keep only the best error-free record per workload and target kind: (kept, read).
    `output` may be `path` itself or another records file, not a file of another kind."""
    check_records_output(output)
    records = load_records(path)
    kinds = [k for k in dict.fromkeys(target_kind(r.target) for r in records) if k]
    best = [r for kind in kinds for r in best_records(records, kind).values()]
    output = os.fspath(output)
    tmp = f"{output}.tmp{os.getpid()}"
    try:
        open(tmp, "w").close()
        append_records(tmp, best)
        os.replace(tmp, output)  # atomic, so the output may be the input itself
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"cannot write {output!r}: {exc.strerror or exc}") from None
    return len(best), len(records)
