"""Profiles people can read: per-kernel timings joined with the model nodes each kernel computes
(their ONNX names, op types and shapes), summed per node, and written as a Chrome trace.

Works on executor profile rows and the package's plan (`ProgramInfo`); never prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tvmc.plan import Call, Source
from tvmc.runtime import ProgramInfo
from tvmc.runtime.package_check import nbytes


def profile_rows(measured: Sequence[dict[str, Any]], info: ProgramInfo) -> list[dict[str, Any]]:
    """One row per kernel call, in run order: the executor's median seconds as milliseconds,
    share of the total, GFLOP/s, the bytes its buffers hold and GB/s, and the model nodes it
    computes (a package compiled before nodes were recorded names its graph node only)."""
    total = sum(row["seconds"] for row in measured) or 1.0
    rows = []
    for row, call in zip(measured, info.calls, strict=True):
        seconds, flops = row["seconds"], row["flops"]
        moved = call_bytes(call, info)
        sources = call.sources or (Source(call.node or call.kernel, ""),)
        rows.append(
            {
                "node": row["node"],
                "kernel": row["kernel"],
                "onnx_node": sources[0].name,
                "op": "+".join(dict.fromkeys(s.op for s in sources if s.op)),
                "sources": [s.to_json() for s in call.sources],
                "time_ms": seconds * 1e3,
                "share_percent": 100.0 * seconds / total,
                "flops": flops,
                "gflops": _rate(flops, seconds),
                "bytes": moved,
                "gbps": _rate(moved, seconds),
            }
        )
    return rows


def call_bytes(call: Call, info: ProgramInfo) -> int:
    """Bytes of the distinct buffers a call reads and writes: the least traffic of one call."""
    buffers = (info.buffers[name] for name in dict.fromkeys(call.args))
    return sum(nbytes(b.shape, b.dtype) for b in buffers)


def _rate(amount: int, seconds: float) -> float | None:
    return amount / seconds / 1e9 if amount and seconds > 0 else None


def node_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kernel rows summed per model node (a fused group: its first node names it), in run
    order, each listing its kernels."""
    groups: dict[str, dict[str, Any]] = {}
    total = sum(row["time_ms"] for row in rows) or 1.0
    for row in rows:
        group = groups.get(row["node"])
        if group is None:
            first = row["sources"][0] if row["sources"] else {"inputs": [], "output": []}
            group = groups[row["node"]] = {
                "name": row["onnx_node"],
                "op": row["op"],
                "inputs": first["inputs"],
                "output": first["output"],
                "fused": [s["name"] for s in row["sources"][1:]],
                "kernels": [],
                "time_ms": 0.0,
                "flops": 0,
                "bytes": 0,
            }
        group["kernels"].append({"kernel": row["kernel"], "time_ms": row["time_ms"]})
        group["time_ms"] += row["time_ms"]
        group["flops"] += row["flops"]
        group["bytes"] += row["bytes"]
    for group in groups.values():
        seconds = group["time_ms"] / 1e3
        group["share_percent"] = 100.0 * group["time_ms"] / total
        group["gflops"] = _rate(group["flops"], seconds)
        group["gbps"] = _rate(group["bytes"], seconds)
    return list(groups.values())


def op_totals(nodes: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Milliseconds per op type (a fused group counts under its first op), largest first."""
    totals: dict[str, float] = {}
    for node in nodes:
        op = node["op"].split("+")[0] or "?"
        totals[op] = totals.get(op, 0.0) + node["time_ms"]
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def chrome_trace(nodes: Sequence[dict[str, Any]], device: str = "cpu") -> dict[str, Any]:
    """One inference laid out from the per-call medians, in run order, as Chrome's trace event
    format (Perfetto, chrome://tracing): a complete event ('X') per model node, its kernels as
    events nested inside it; times in microseconds."""
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": f"tvmc {device}"}}
    ]
    at = 0.0
    for node in nodes:
        events.append(
            {
                "name": node["name"],
                "cat": "node",
                "ph": "X",
                "pid": 1,
                "tid": 1,
                "ts": at,
                "dur": node["time_ms"] * 1e3,
                "args": {
                    "op": node["op"],
                    "inputs": node["inputs"],
                    "output": node["output"],
                    "fused": node["fused"],
                    "gflops": node["gflops"],
                    "gbps": node["gbps"],
                },
            }  # fmt: skip
        )
        start = at
        for kernel in node["kernels"]:
            duration = kernel["time_ms"] * 1e3
            events.append({"name": kernel["kernel"], "cat": "kernel", "ph": "X", "pid": 1,
                           "tid": 1, "ts": start, "dur": duration,
                           "args": {"node": node["name"]}})  # fmt: skip
            start += duration
        at += node["time_ms"] * 1e3
    return {"traceEvents": events, "displayTimeUnit": "ms"}
