"""`make gpu-check`: the CUDA backend on a lent GPU machine, in one go, in under ~8 minutes.

Run from the repository root, nothing to install: `PYTHONPATH=. python benchmarks/gpu_check.py`
(`--tune` adds a short tuning run of ResNet-50's heaviest tasks before the benchmark). Stages,
each in its own process with its own time limit (a crash or hang loses that stage's unfinished
cases, never the rest), each case caught on its own:

  env     the GPU, its arch and fp32 peak (or why there is no GPU)
  ops     every op family on a small single-node model, against onnxruntime on the CPU
  models  the nine light models (random weights) against onnxruntime on the CPU
  tune    (--tune) ResNet-50's heaviest tasks tuned on the GPU, records for `bench`
  bench   ResNet-50 batch 1 fp32: median latency, end to end, heaviest kernels' GFLOP/s vs peak
  torch   torchvision resnet50 (random weights): eager, and torch.compile with CUDA graphs

Without a GPU it does what a CPU can (compiles every case and assembles the PTX with ptxas),
says that no GPU is present, and exits 2. Exit 1: some case failed; 0: all passed on a GPU.
The summary table comes last. `--smoke` is the quick subset `make test` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUDGETS = {"env": 30, "ops": 90, "models": 180, "tune": 150, "bench": 60, "torch": 120}  # s
SMOKE_BUDGETS = {"env": 30, "ops": 60}  # three ops: seconds (a model would take ~15 s)
GRACE = 20  # seconds a stage may run past its deadline (imports, a case finishing) before kill


def run_stage(name: str, budget: float, out: str, directory: str, smoke: bool) -> str:
    """Run one stage in a child process; '' when it exited cleanly, else what went wrong."""
    cmd = [sys.executable, os.path.join(HERE, "gpu_stages.py"), name, "--out", out,
           "--deadline", str(time.time() + budget), "--dir", directory]  # fmt: skip
    if smoke:
        cmd.append("--smoke")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get(
        "PYTHONPATH")]))}  # fmt: skip
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, timeout=budget + GRACE)
    except subprocess.TimeoutExpired:
        return f"stage {name} killed after {budget + GRACE:.0f} s"
    return f"stage {name} exited with {done.returncode}" if done.returncode else ""


def read_rows(path: str) -> list[dict]:
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by a kill
    return rows


def figure(rows: list[dict], stage: str, case: str, key: str) -> float | None:
    for row in rows:
        if row["stage"] == stage and row["case"] == case and row.get(key) is not None:
            return float(row[key])
    return None


def summary(rows: list[dict], problems: list[str], gpu: bool) -> list[str]:
    """The table printed last: per stage the counts, then the benchmark figures."""
    lines = ["", "=" * 78, "gpu-check summary", "=" * 78]
    env = next((r for r in rows if r["stage"] == "env"), None)
    if env is not None:
        peak = env.get("peak_gflops")
        extra = f", fp32 peak {peak / 1e3:.1f} TFLOP/s" if peak else ""
        lines.append(f"GPU      {env['detail'] if gpu else 'none: ' + env['detail']}{extra}")
    lines.append(f"{'stage':<8} {'ok':>4} {'built':>6} {'fail':>5} {'skip':>5}  failed cases")
    for stage in ("ops", "models", "tune", "bench", "torch"):
        mine = [r for r in rows if r["stage"] == stage]
        if not mine:
            continue
        count = {s: sum(r["status"] == s for r in mine) for s in ("ok", "built", "fail", "skip")}
        failed = ", ".join(r["case"] for r in mine if r["status"] == "fail")
        lines.append(f"{stage:<8} {count['ok']:>4} {count['built']:>6} {count['fail']:>5} "
                     f"{count['skip']:>5}  {failed[:40]}")  # fmt: skip
    bench = [("tvmc untuned", "bench", "tvmc untuned"), ("tvmc tuned", "bench", "tvmc tuned"),
             ("torch eager", "torch", "torch eager"),
             ("torch.compile", "torch", "torch.compile")]  # fmt: skip
    timed = [(label, figure(rows, s, c, "median_ms")) for label, s, c in bench]
    if any(ms is not None for _, ms in timed):
        lines.append("ResNet-50 batch 1 fp32, median ms: " + ", ".join(
            f"{label} {ms:.3f}" for label, ms in timed if ms is not None))  # fmt: skip
        e2e = figure(rows, "bench", "tvmc untuned", "e2e_median_ms")
        if e2e is not None:
            lines.append(f"  tvmc untuned end to end (with copies): {e2e:.3f} ms")
    for row in rows:
        if row["stage"] == "bench" and row.get("heaviest"):
            for k in row["heaviest"][:3]:
                share = f" = {100 * k['of_peak']:.1f}% of peak" if k.get("of_peak") else ""
                lines.append(f"  {row['case']}: {k['kernel']} {k['time_ms']:.3f} ms, "
                             f"{k['gflops']:.0f} GFLOP/s{share}")  # fmt: skip
    lines += [f"problem: {p}" for p in problems]
    if not gpu:
        lines.append("NO GPU PRESENT: compiled and assembled what a CPU can; nothing ran on a GPU")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="tune ResNet-50 briefly first")
    parser.add_argument("--smoke", action="store_true", help="a quick subset (no GPU needed)")
    parser.add_argument("--out", help="results (JSON lines); default: a temporary file")
    parser.add_argument("--dir", help="packages and records; default: a temporary directory")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="tvmc-gpu-check-")
    os.makedirs(directory, exist_ok=True)
    out = args.out or os.path.join(directory, "results.jsonl")
    if os.path.exists(out):
        os.unlink(out)
    budgets = SMOKE_BUDGETS if args.smoke else BUDGETS
    problem = run_stage("env", budgets["env"], out, directory, args.smoke)
    problems = [problem] if problem else []
    gpu = any(r["stage"] == "env" and r["status"] == "ok" for r in read_rows(out))
    for name in ("ops", "models", "tune", "bench", "torch"):
        if name not in budgets or (name == "tune" and not args.tune):
            continue
        if not gpu and name in ("tune", "bench", "torch"):
            continue  # nothing to time without a GPU
        problem = run_stage(name, budgets[name], out, directory, args.smoke)
        if problem:
            problems.append(problem)
    rows = read_rows(out)
    print("\n".join(summary(rows, problems, gpu)))
    print(f"results: {out}")
    if not gpu:
        return 2
    failed = problems or any(r["status"] == "fail" for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
