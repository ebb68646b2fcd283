"""A fuzz campaign: `python -m tests.fuzz.campaign` (`make fuzz`).

FUZZ_CASES cases (default 10,000) are shared among the mutators by MUTATOR_SHARES, cut into
chunks with their own Hypothesis seeds, and run by FUZZ_JOBS worker processes (default: the
cores), each with its own fork server. Writes summary.md (counts per mutator and class, the
time and the machine) and findings.jsonl (every case that did not end cleanly or was accepted,
with its files under findings/) into FUZZ_OUT (default fuzz-out/).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from tests.fuzz.harness import BAD, CLASSES, Case, Executor
from tests.fuzz.mutate_cli import cli_cases
from tests.fuzz.mutate_model import model_cases
from tests.fuzz.mutate_npz import npz_cases
from tests.fuzz.mutate_package import package_cases
from tests.fuzz.mutate_records import records_cases
from tests.fuzz.seeds import Resources, prepare

# The mutators by name: each takes the prepared seed files and gives a strategy of cases.
MUTATORS: dict[str, Callable[[Resources], st.SearchStrategy[Case]]] = {
    "model": lambda resources: model_cases(),
    "npz": npz_cases,
    "records": records_cases,
    "cli": cli_cases,
    "package": package_cases,
}
MUTATOR_SHARES = {"model": 0.4, "npz": 0.15, "records": 0.15, "cli": 0.15, "package": 0.15}
CHUNK = 250  # cases per chunk: small enough to balance the workers
CASE_TIMEOUT = 60.0


def run_chunk(task: tuple[str, int, int, str, str, float]) -> dict:
    """Run `count` cases of one mutator with one Hypothesis seed; counts and findings."""
    mutator, count, seed, resources_dir, out, timeout = task
    resources = _resources(Path(resources_dir))
    strategy = MUTATORS[mutator](resources)
    counts: Counter[str] = Counter()
    findings = []
    workdir = Path(out) / "work" / f"{mutator}-{seed}"
    with Executor(workdir, watch=(resources.directory,)) as executor:

        @hypothesis_seed(seed)
        @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(strategy)
        def body(case) -> None:
            outcome = executor.run(case, timeout, keep=True)
            counts[outcome.kind] += 1
            directory = workdir / f"case{executor.count}"
            if outcome.kind in BAD:
                saved = Path(out) / "findings" / f"{mutator}-{seed}-{executor.count}"
                shutil.copytree(directory, saved, dirs_exist_ok=True)
                finding = {"mutator": mutator, "kind": outcome.kind, "reason": outcome.reason,
                           "case": case.describe()[:2000], "args": case.args,
                           "stderr": outcome.stderr[-3000:], "files": str(saved)}  # fmt: skip
                (saved / "finding.json").write_text(json.dumps(finding, indent=1))  # rerun it
                findings.append(finding)
            shutil.rmtree(directory, ignore_errors=True)

        body()
    shutil.rmtree(workdir, ignore_errors=True)
    return {"mutator": mutator, "counts": dict(counts), "findings": findings}


def _resources(directory: Path) -> Resources:
    return Resources(directory, directory / "seed.onnx", directory / "seed.tar",
                     directory / "inputs.npz", directory / "seed.json")  # fmt: skip


def plan(cases: int, mutators: list[str], seed: int) -> list[tuple[str, int, int]]:
    """(mutator, count, seed) chunks adding up to `cases`."""
    shares = {m: MUTATOR_SHARES[m] for m in mutators}
    total = sum(shares.values())
    chunks = []
    for i, mutator in enumerate(mutators):
        left = round(cases * shares[mutator] / total)
        n = 0
        while left > 0:
            size = min(CHUNK, left)
            chunks.append((mutator, size, seed * 1000 + i * 100 + n))
            left -= size
            n += 1
    return chunks


def machine() -> str:
    """The CPU model, core count and memory, for the summary."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB, Python {platform.python_version()}"


def summary(results: list[dict], seconds: float, jobs: int, command: str) -> str:
    """The summary table (Markdown): cases per mutator and class."""
    by_mutator: dict[str, Counter[str]] = {}
    for result in results:
        by_mutator.setdefault(result["mutator"], Counter()).update(result["counts"])
    lines = ["| mutator | cases | " + " | ".join(CLASSES) + " |",
             "|---|---:|" + "---:|" * len(CLASSES)]  # fmt: skip
    total: Counter[str] = Counter()
    for mutator in sorted(by_mutator):
        counts = by_mutator[mutator]
        total.update(counts)
        lines.append(f"| {mutator} | {sum(counts.values())} | "
                     + " | ".join(str(counts[k]) for k in CLASSES) + " |")  # fmt: skip
    lines.append(f"| **all** | **{sum(total.values())}** | "
                 + " | ".join(f"**{total[k]}**" for k in CLASSES) + " |")  # fmt: skip
    cases = max(sum(total.values()), 1)
    per_case = jobs * seconds / cases
    lines += ["", f"Command: `{command}`: {cases} cases in {seconds / 60:.1f} minutes on {jobs} "
              f"worker(s), {per_case:.2f} s per case per worker; {machine()}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run a campaign; exit 1 when it found a bad case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=int(os.environ.get("FUZZ_CASES", 10_000)))
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("FUZZ_JOBS", 0)) or None)
    parser.add_argument("--out", default=os.environ.get("FUZZ_OUT", "fuzz-out"))
    parser.add_argument("--mutators", default=",".join(MUTATOR_SHARES))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", 1)))
    parser.add_argument("--timeout", type=float, default=CASE_TIMEOUT)
    args = parser.parse_args(argv)
    jobs = args.jobs or os.cpu_count() or 1
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with Executor(out / "setup") as executor:
        resources = prepare(out / "seeds", executor)
    chunks = plan(args.cases, args.mutators.split(","), args.seed)
    tasks = [(m, n, s, str(resources.directory), str(out), args.timeout) for m, n, s in chunks]
    start = time.monotonic()
    results = []
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for done, result in enumerate(pool.imap_unordered(run_chunk, tasks), 1):
            results.append(result)
            elapsed = time.monotonic() - start
            print(f"[{elapsed:7.0f} s] chunk {done}/{len(tasks)} {result['mutator']}: "
                  f"{result['counts']}", file=sys.stderr, flush=True)  # fmt: skip
    seconds = time.monotonic() - start
    command = " ".join(["python -m tests.fuzz.campaign", *(argv or sys.argv[1:])]).strip()
    text = summary(results, seconds, jobs, f"FUZZ_CASES={args.cases} FUZZ_JOBS={jobs} {command}")
    (out / "summary.md").write_text(text)
    findings = [f for r in results for f in r["findings"]]
    with open(out / "findings.jsonl", "w") as f:
        for finding in findings:
            f.write(json.dumps(finding) + "\n")
    print(text)
    print(f"{len(findings)} finding(s): {out}/findings.jsonl")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
