"""`make bench`: tvmc beside onnxruntime and OpenVINO on the ONNX light models (random weights)
and the model zoo (tests/models/zoo, its stored inputs).

    .venv/bin/python benchmarks/models.py [--models light|zoo|all] [--repeat 30] [--seconds 2]
        [--tuned DIR] [--batch N] [model ...]

One process, same inputs, same thread count (2 by default, TVMC_NUM_THREADS to change), timed in
alternating blocks. Per model: its family, tvmc load time, compile time, median latency of tvmc
(default schedules, no tuning), onnxruntime and OpenVINO (fp32, latency hint; its column empty
when not installed), the ratio to the faster of the two, GFLOP/s reached and its share of the
measured peak (tvmc.runtime.peak), and workspace bytes against the naive sum. Where one
baseline cannot run a model its column is empty and the ratio is to the other (the summary says
which models and why); a model that neither runs, or that tvmc fails on, is left out, with the
reason. At the end: the geometric mean
of the ratios over all models and per family, the worst model, and the issue's targets.
With `--tuned DIR` (records from benchmarks/tune_models.py, DIR/<model>.json) tvmc also runs
compiled with those records, in the same alternation, beside a control: a second executor of the
untuned package (its own params and workspace), since on a shared VM two executors of the same
code can differ by 20% in every round of a run. Printed: the tuned latency, its ratio to the
faster baseline, its speedup over untuned, the noise (how far the control strayed from untuned:
the largest per-round ratio either way, each pair timed back to back) and a flag where tuned is
slower than both untuned executors in every round, i.e. beyond what identical code showed.
With `--batch N` each model runs on N images a run (`suite.rebatched`), a model whose graph
still holds one image left out with the reason.
With `--fixed-threads` the same untuned executor also runs with its thread count fixed
(TVMC_ADAPTIVE_THREADS=0) in the same alternation: the default (choosing the count run by run,
tvmc/runtime/thread_choice.py) against fixed, per model and as a geometric mean.
Medians of at least `--repeat` timed runs after warm-up, enough to span `--seconds` (2 s) per
runtime, in blocks of at most 0.1 s (`timing_plan`): the machine is shared and its slow
periods come and go within a second, so a short measurement's ratio depends on which runtime's
blocks met them. Compare ratios, not lone times. "slow %": the share of tvmc's blocks, and of
the faster baseline's, whose median was over 1.3x that runtime's lower quartile (met a slow
period); a ratio from a run where tvmc's share is far above the baseline's says more about
the machine than about the code. "x-core ns": the round trip of a cache line between the two
first CPUs (benchmarks/core_latency.py) just before and just after the model's timing; a VM's
host may run its vCPUs on cores that share no cache for seconds at a time, which slows every
2-thread runtime (tvmc's memory-bound kernels most), and the summary names the models timed
while a sample took over twice the fastest seen on this CPU (core_latency.py keeps it).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import numpy as np
import onnx
from baselines import onnxruntime_session, openvino_session, openvino_version
from core_latency import describe, far_apart, fastest_seen, round_trip_ns, sampled_ns
from peak import paired_speedups, shared_core_share
from suite import SUITES, BenchModel, by_names, rebatched, suite

import tvmc
from tvmc.codegen import load_shared, num_threads
from tvmc.driver.compiler import CompileOptions, build
from tvmc.runtime import Executor, ProgramInfo
from tvmc.runtime.peak import peak_gflops


def balanced_orders(n: int) -> list[list[int]]:
    """Orders of n blocks in which each one follows every other equally often (a Williams
    design: n orders for even n, 2n for odd). The block after another runtime's pays for that
    runtime's threads still spinning (OpenVINO's for milliseconds), so no runtime may always
    follow the same one, as it did when the order only rotated."""
    first, low, high = [0], 1, n - 1
    while low <= high:
        first.append(low)
        low += 1
        if low <= high:
            first.append(high)
            high -= 1
    orders = [[(i + r) % n for i in first] for r in range(n)]
    return orders if n % 2 == 0 else orders + [order[::-1] for order in orders]


def other_threads_cpu_ns() -> int:
    """CPU time of this process's threads other than the caller (schedstat; 0 where absent)."""
    me, total = str(threading.get_native_id()), 0
    for task in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else ():
        if task == me:
            continue
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended
    return total


def wait_for_quiet_threads(window: float = 0.005, most: float = 0.5) -> float:
    """Waits until this process's other threads use under a tenth of a core for `window`
    seconds (at most `most`); returns the seconds waited. A runtime's pool spins after its
    last run: onnxruntime's two threads for about 50 ms, which made the next block's first
    runs 2-3x slower (light_shufflenet: 5-8 ms instead of 2.3)."""
    start = time.perf_counter()
    before = other_threads_cpu_ns()
    while time.perf_counter() - start < most:
        time.sleep(window)
        now = other_threads_cpu_ns()
        if now - before < window * 1e8:
            break
        before = now
    return time.perf_counter() - start


def blocked_times(
    *fns, repeat: int = 0, rounds: int | None = None, block_runs: list[int] | None = None
) -> list[list[list[float]]]:
    """Seconds of each run, per function and round: alternating blocks of runs (one runtime's
    thread pool never spins while the other one runs: each block starts once the threads of
    the one before have gone quiet), so that slow drifts of the machine hit all alike; the
    rounds follow `balanced_orders` (by default one round per order). A block holds
    `block_runs[i]` runs of function i, or `repeat // rounds` of each."""
    times: list[list[list[float]]] = [[] for _ in fns]
    orders = balanced_orders(len(fns))
    rounds = rounds or len(orders)
    sizes = block_runs or [max(repeat // rounds, 1)] * len(fns)
    for r in range(rounds):
        for i in orders[r % len(orders)]:
            fn, per_round = fns[i], times[i]
            wait_for_quiet_threads()
            fn()  # warm-up after the other runtime had the cores
            block = []
            for _ in range(sizes[i]):
                start = time.perf_counter()
                fn()
                block.append(time.perf_counter() - start)
            per_round.append(block)
    return times


# The most a block of runs may last. This VM's slow periods (docs/performance.md) come and go
# within a second: blocks of 30 runs in 6 rounds spanned 0.15 s of light_squeezenet per runtime,
# and its ratio ranged 0.76-1.62 over six such runs; blocks under 0.1 s spanning 2 s: 0.98-1.03.
BLOCK_SECONDS = 0.1


def seconds_per_call(fn, calls: int = 3) -> float:
    """The median of a few timed calls of `fn` (after one untimed)."""
    fn()
    spent = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        spent.append(time.perf_counter() - start)
    return statistics.median(spent)


def timing_plan(fns, repeat: int, seconds: float) -> tuple[int, list[int]]:
    """(rounds, runs per block of each function) for `blocked_times`: each function runs at
    least `repeat` times and for at least `seconds`, in blocks of at most BLOCK_SECONDS (one
    run where a run is longer), so that every function meets the machine's changes alike; the
    rounds a whole number of sets of the balanced orders."""
    per_call = [max(seconds_per_call(fn), 1e-6) for fn in fns]
    runs = [max(repeat, math.ceil(seconds / t)) for t in per_call]
    wanted = max(min(n, math.ceil(n * t / BLOCK_SECONDS)) for n, t in zip(runs, per_call))
    orders = len(balanced_orders(len(fns)))
    rounds = math.ceil(wanted / orders) * orders
    return rounds, [max(1, math.ceil(n / rounds)) for n in runs]


def blocked_median_ms(
    *fns, repeat: int, rounds: int | None = None, seconds: float = 0.0
) -> list[float]:
    """Median milliseconds of each, timed in alternating blocks (`blocked_times`); with
    `seconds`, as `timing_plan` plans them (each function for at least that long)."""
    if seconds:
        rounds, block_runs = timing_plan(fns, repeat, seconds)
        times = blocked_times(*fns, rounds=rounds, block_runs=block_runs)
    else:
        times = blocked_times(*fns, repeat=repeat, rounds=rounds)
    return [statistics.median(t for block in f for t in block) * 1e3 for f in times]


def compiled_executor(graph, options: CompileOptions, inputs: list[np.ndarray], result=None):
    """The model built with `options` (or `result`, a build of it to load again: another copy of
    its code, params and workspace), loaded, with `inputs` bound: (executor, result)."""
    result = result or build(graph, options)
    p = result.lowered.program
    info = ProgramInfo.of(p)
    executor = Executor(load_shared(result.artifact), info, result.lowered.param_values)
    executor.set_inputs(inputs)
    return executor, result


class LeftOut(Exception):
    """A model no baseline can run (or tvmc fails on): the bench leaves it out, saying why."""


def gist(exc: Exception) -> str:
    """An error's first and last lines of substance (OpenVINO's name source files first)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line and not line.startswith(("Exception from", "Check "))]
    if not lines:
        return ""
    return (lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}")[:240]


BASELINES = ("onnxruntime", "OpenVINO")


def baseline_sessions(
    path: str, inputs: dict[str, np.ndarray], threads: int
) -> tuple[dict[str, Callable], list[str]]:
    """The sessions of onnxruntime and (when installed) OpenVINO that load and run the model
    (each run once), by name, and why each other one cannot; LeftOut when none can."""
    sessions, gaps = {}, []
    for name, make in zip(BASELINES, (onnxruntime_session, openvino_session)):
        try:
            session = make(path, inputs, threads)
            if session is not None:
                session()
                sessions[name] = session
        except Exception as exc:  # each runtime raises its own types
            gaps.append(f"{name} cannot run it: {type(exc).__name__}: {gist(exc)}")
    if not sessions:
        raise LeftOut("; ".join(gaps) or "no baseline installed")
    return sessions, gaps


def relative_error(ours: list[np.ndarray], theirs: list[np.ndarray]) -> float:
    """The largest difference over all outputs, relative to each output's largest magnitude."""
    worst = 0.0
    for a, b in zip(ours, theirs):
        b = np.asarray(b)
        if b.size == 0 or b.dtype.kind not in "fc":
            continue
        scale = max(float(np.abs(b).max()), 1e-30)
        diff = np.abs(np.asarray(a).reshape(b.shape).astype(np.float64) - b)
        worst = max(worst, float(diff.max()) / scale)
    return worst


def ms_or_dash(ms: float | None) -> str:
    """A baseline's column: its median, or a dash where it did not run the model."""
    return f"{ms:8.3f}" if ms is not None else f"{'-':>8}"


def fixed_threads(executor: Executor):
    """A call of `executor` on its full thread count, as with TVMC_ADAPTIVE_THREADS=0."""

    def call() -> None:
        executor.adaptive_threads = False
        try:
            executor.call()
        finally:
            executor.adaptive_threads = True

    return call


def batched_path(model: BenchModel, tmp: str, batch: int) -> str:
    """The model's ONNX file, rewritten for `batch` images where that is more than one
    (`suite.rebatched`); LeftOut where its inputs have no batch dim to set."""
    path = model.onnx_path(tmp)
    if batch == 1:
        return path
    try:
        proto = rebatched(onnx.load(path), batch)
    except (ValueError, onnx.shape_inference.InferenceError) as exc:
        raise LeftOut(f"cannot run at batch {batch}: {exc}") from exc
    path = os.path.join(tmp, f"{model.name}_batch{batch}.onnx")
    onnx.save(proto, path)
    return path


def check_batch(sessions: dict[str, Callable], batch: int) -> None:
    """LeftOut where a baseline's outputs do not lead with `batch`: the graph still holds one
    image in its constants (a Concat with a constant of one image's shape, say)."""
    if batch == 1:
        return
    for name, session in sessions.items():
        shapes = [np.shape(o) for o in session()]
        if any(not s or s[0] != batch for s in shapes):
            raise LeftOut(f"cannot run at batch {batch}: {name}'s outputs are {shapes}")


def bench_model(model: BenchModel, tmp: str, repeat: int, threads: int, tuned: str | None,
                fixed: bool = False, seconds: float = 0.0, batch: int = 1) -> dict:  # fmt: skip
    """One model's row: load and compile times, medians of tvmc (and tuned), the baselines
    (at least `repeat` runs each, spanning at least `seconds`: `timing_plan`), on `batch`
    images a run."""
    path = batched_path(model, tmp, batch)
    inputs = model.inputs(path, batch)
    try:
        sessions, gaps = baseline_sessions(path, inputs, threads)
    except LeftOut as exc:
        if batch == 1:
            raise
        raise LeftOut(f"cannot run at batch {batch}: {exc}") from exc
    check_batch(sessions, batch)
    baselines = list(sessions.values())

    start = time.perf_counter()
    try:
        loaded = tvmc.load(path)
        load_s = time.perf_counter() - start
        bound = [inputs[n] for n in loaded.graph.inputs]
        start = time.perf_counter()
        executor, result = compiled_executor(loaded.graph, CompileOptions(), bound)
        compile_s = time.perf_counter() - start
        runs, outputs = [executor.call], [executor.run()]
        records = os.path.join(tuned, f"{model.name}.json") if tuned else None
        if records is not None and os.path.exists(records):
            tuned_executor, _ = compiled_executor(
                loaded.graph, CompileOptions(tuning_records=records), bound
            )
            runs.append(tuned_executor.call)
            outputs.append(tuned_executor.run())
            control, _ = compiled_executor(loaded.graph, CompileOptions(), bound, result)
            runs.append(control.call)
        if fixed:
            runs.append(fixed_threads(executor))
    except Exception as exc:  # tvmc's own failure: a bug to report, not a baseline's gap
        raise LeftOut(f"tvmc fails on it (a bug): {type(exc).__name__}: {exc}"[:200]) from exc
    p = result.lowered.program
    theirs = baselines[0]()
    error = max(relative_error(o, b()) for o in outputs for b in baselines)

    rounds, block_runs = timing_plan([*runs, *baselines], repeat, seconds)
    cores_before = quiet_round_trip_ns() if threads > 1 else None
    times = blocked_times(*runs, *baselines, rounds=rounds, block_runs=block_runs)
    cores_ns = [cores_before, quiet_round_trip_ns()] if threads > 1 else []
    medians = [statistics.median(t for block in f for t in block) * 1e3 for f in times]
    tvmc_ms, base_ms = medians[: len(runs)], medians[len(runs) :]
    fixed_ms = tvmc_ms.pop() if fixed else None
    del theirs, baselines  # free their thread pools before the next model runs
    by_name = dict(zip(sessions, base_ms))
    best = min(base_ms)
    flops = sum(c.flops for c in p.calls) * p.images  # a per-image program's calls: an image's
    row = {
        "model": model.name, "family": model.family, "load_s": load_s, "compile_s": compile_s,
        "tvmc_ms": tvmc_ms[0], "ort_ms": by_name.get("onnxruntime"),
        "ov_ms": by_name.get("OpenVINO"), "gaps": gaps, "ratio": tvmc_ms[0] / best,
        "gflops": flops / tvmc_ms[0] / 1e6, "workspace_mb": p.workspace_bytes * p.slots / 1e6,
        "naive_mb": p.naive_bytes * p.images / 1e6, "error": error, "tuned_ms": None, "fixed_ms": fixed_ms,
        "one_thread_runs": executor.thread_runs.get(1, 0), "rounds": rounds,
        "slow_tvmc": slow_share(times[0]),
        "slow_base": slow_share(times[len(runs) + base_ms.index(best)]), "cores_ns": cores_ns,
    }  # fmt: skip
    if len(tvmc_ms) > 1:
        groups = len(balanced_orders(len(times)))  # as many as the rounds of a short run
        row.update(tuned_comparison(*(regrouped(t, groups) for t in times[:3])), tuned_ms=tvmc_ms[1],
                   tuned_ratio=tvmc_ms[1] / best, speedup=tvmc_ms[0] / tvmc_ms[1])  # fmt: skip
    return row


# A block "slow" for its runtime: its median above this factor times the runtime's lower
# quartile (this VM's slow periods took tvmc's 2-thread blocks of resnet50 to 1.4x)
SLOW_BLOCK = 1.3


def slow_share(blocks: list[list[float]]) -> float:
    """The share of a runtime's blocks that met a slow period of the machine (SLOW_BLOCK)."""
    runs = [t for b in blocks for t in b]
    if len(runs) < 4:
        return 0.0
    quartile = statistics.quantiles(runs, n=4)[0]
    return sum(statistics.median(b) > SLOW_BLOCK * quartile for b in blocks) / len(blocks)


def regrouped(blocks: list[list[float]], groups: int) -> list[list[float]]:
    """Consecutive blocks merged into about `groups` (`timing_plan`'s many short rounds judged
    as the rounds of a short run were: "slower in every round" of 40 would need luck)."""
    size = max(1, len(blocks) // groups)
    return [[t for b in blocks[i : i + size] for t in b] for i in range(0, len(blocks), size)]


def tuned_comparison(untuned, tuned, control) -> dict:
    """Per round (each block of one executor beside the others', so drifts of the machine
    cancel): the noise, how far the control (untuned code again) strayed from untuned, the
    largest ratio either way minus 1; and whether tuned was slower than both untuned executors
    in every round, i.e. beyond what identical code showed."""
    med = statistics.median
    strays = [max(med(c) / med(u), med(u) / med(c)) for u, c in zip(untuned, control)]
    slower = all(med(t) > max(med(u), med(c)) for u, t, c in zip(untuned, tuned, control))
    return {"noise": max(strays) - 1, "slower": slower}


def shared_cores(threads: int, seconds: float = 3.0) -> str:
    """How often, over a few seconds, `threads` threads of FMAs ran no faster than one (peak.py
    --watch): other processes, or a host that at times runs a VM's vCPUs on one core, move
    every ratio of the run."""
    share, bound = shared_core_share(paired_speedups(seconds, threads), threads)
    return (
        f"{share:.0%} of {seconds:g} s of paired FMA runs below {bound:.2f}x on {threads} threads"
    )


def quiet_round_trip_ns(samples: int = 3) -> float | None:
    """The cores' round trip once the runtimes' pool threads have gone quiet, the fastest of a
    few samples (a spinning thread or an interrupt only lengthens one)."""
    wait_for_quiet_threads()
    taken = [ns for ns in (round_trip_ns() for _ in range(samples)) if ns is not None]
    return min(taken, default=None)


def cores_apart(seconds: float = 1.0) -> str:
    """The round trip of a cache line between the first two CPUs, sampled for `seconds`
    (core_latency.py): tens of ns where they share a cache, hundreds where the host runs the
    vCPUs apart."""
    taken = sorted(sampled_ns(seconds))
    if not taken:
        return "cores' round trip not measured (one CPU, no C compiler or no pinning)"
    middle = statistics.median(taken)
    return f"cores' round trip {taken[0]:.0f}-{taken[-1]:.0f} ns (median {middle:.0f})"


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


# The targets: ratios to the faster baseline (lower is better)
UNTUNED_GEOMEAN, UNTUNED_WORST, TUNED_GEOMEAN = 0.9, 1.1, 0.8


def summary(rows: list[dict], left_out: list[tuple[str, str]]) -> list[str]:
    """Geometric means over all models and per family, the worst model, the targets."""
    lines = []
    ratios = [r["ratio"] for r in rows]
    worst = max(rows, key=lambda r: r["ratio"])
    lines.append(f"untuned: geometric-mean ratio {geomean(ratios):.2f} over {len(rows)} models; "
                 f"worst {worst['model']} {worst['ratio']:.2f}")  # fmt: skip
    families = sorted(
        {r["family"] for r in rows}, key=lambda f: [r["family"] for r in rows].index(f)
    )
    for family in families:
        mine = [r for r in rows if r["family"] == family]
        w = max(mine, key=lambda r: r["ratio"])
        lines.append(f"  {family:20} {geomean([r['ratio'] for r in mine]):5.2f} "
                     f"({len(mine)} models; worst {w['model']} {w['ratio']:.2f})")  # fmt: skip
    met = geomean(ratios) <= UNTUNED_GEOMEAN
    lines.append(f"target untuned geometric mean <= {UNTUNED_GEOMEAN}: "
                 f"{'met' if met else 'MISSED'} ({geomean(ratios):.2f})")  # fmt: skip
    above = [f"{r['model']} {r['ratio']:.2f}" for r in rows if r["ratio"] > UNTUNED_WORST]
    lines.append(
        f"target no model above {UNTUNED_WORST}: "
        + ("met" if not above else f"MISSED by {len(above)}: {', '.join(above)}")
    )
    tuned = [r for r in rows if r["tuned_ms"] is not None]
    if tuned:
        g = geomean([r["tuned_ratio"] for r in tuned])
        lines.append(f"tuned: geometric-mean ratio {g:.2f} over {len(tuned)} models with records "
                     f"(untuned {geomean([r['ratio'] for r in tuned]):.2f} on the same models); "
                     f"speedup {geomean([r['speedup'] for r in tuned]):.2f}x")  # fmt: skip
        lines.append(f"target tuned geometric mean <= {TUNED_GEOMEAN}: "
                     f"{'met' if g <= TUNED_GEOMEAN else 'MISSED'} ({g:.2f})")  # fmt: skip
        slower = [f"{r['model']} {1 / r['speedup']:.2f}x (identical code strayed {r['noise']:.0%})"
                  for r in tuned if r["slower"]]  # fmt: skip
        lines.append(
            "tuned slower than both untuned executors in every round (beyond the noise): "
            + (", ".join(slower) if slower else "none")
        )
    sampled = [ns for r in rows for ns in r["cores_ns"] if ns is not None]
    if sampled:
        fastest = fastest_seen(sampled)
        apart = [r["model"] for r in rows if far_apart(r["cores_ns"], fastest)]
        lines.append(f"timed with the cores apart (a cache line's round trip over twice the "
                     f"fastest seen on this CPU, {fastest:.0f} ns): "
                     f"{len(apart)} of {len(rows)} models"
                     + (f": {', '.join(apart)}" if apart else ""))  # fmt: skip
    ours, theirs = (statistics.mean(r[k] for r in rows) for k in ("slow_tvmc", "slow_base"))
    lines.append(f"blocks that met a slow period (median above {SLOW_BLOCK}x the runtime's lower "
                 f"quartile), mean over models: tvmc {ours:.0%}, the faster baseline {theirs:.0%}")  # fmt: skip
    fixed = [r for r in rows if r["fixed_ms"] is not None]
    if fixed:
        by = [r["tvmc_ms"] / r["fixed_ms"] for r in fixed]
        w = max(fixed, key=lambda r: r["tvmc_ms"] / r["fixed_ms"])
        lines.append(f"thread count chosen run by run / fixed: geometric mean {geomean(by):.3f} "
                     f"over {len(fixed)} models; worst {w['model']} "
                     f"{w['tvmc_ms'] / w['fixed_ms']:.2f}")  # fmt: skip
    for r in rows:
        for why in r["gaps"]:
            lines.append(f"{r['model']} compared with one baseline: {why}")
    for name, why in left_out:
        lines.append(f"left out {name}: {why}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", metavar="model", help="models by name (default: --models)"
    )
    parser.add_argument("--models", choices=SUITES, default="all",
                        help="light: the ONNX light models; zoo: tests/models/zoo")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=30, help="timed runs per runtime, at least")
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="the timed runs of each runtime span at least this long, in blocks "
                             f"of at most {BLOCK_SECONDS} s")  # fmt: skip
    parser.add_argument("--tuned", metavar="DIR", help="records DIR/<model>.json to compare")
    parser.add_argument("--batch", type=int, default=1, metavar="N",
                        help="N images a run: each model's batch dim set to N (models whose "
                             "graph holds a batch of one are left out, saying so)")  # fmt: skip
    parser.add_argument(
        "--fixed-threads",
        action="store_true",
        help="also time tvmc with its thread count fixed (no run-by-run choice)",
    )
    args = parser.parse_args()
    if args.batch < 1:
        parser.error(f"--batch must be at least 1, got {args.batch}")
    models = by_names(args.names) if args.names else suite(args.models)
    threads = num_threads()
    peak, source = peak_gflops(threads)
    ov = openvino_version()
    print(f"threads: {threads}; times are medians of at least {args.repeat} runs spanning "
          f"at least {args.seconds:g} s per runtime, in alternating blocks of at most "
          f"{BLOCK_SECONDS:g} s; "
          f"peak {peak:.0f} GFLOP/s ({source}); OpenVINO {ov or 'not installed'}; "
          f"load average {os.getloadavg()[0]:.1f}; batch {args.batch}; "
          "ratio: tvmc / the faster of onnxruntime and OpenVINO")  # fmt: skip
    if threads > 1:
        print(f"shared cores before: {shared_cores(threads)}; {cores_apart()}")
    header = (
        f"{'model':20} {'family':18} {'load s':>6} {'comp s':>6} {'tvmc ms':>8} {'ort ms':>8} "
        f"{'ov ms':>8} {'ratio':>6} {'GFLOP/s':>8} {'peak':>5} {'ws MB':>6} {'naive MB':>8} "
        f"{'max err':>8} {'slow %':>7} {'x-core ns':>9}"
    )
    if args.tuned:
        header += f" {'tuned ms':>8} {'t.ratio':>7} {'speedup':>7} {'noise':>5}"
    if args.fixed_threads:
        header += f" {'fixed ms':>8} {'/fixed':>6} {'1t runs':>7}"
    print(header)
    rows, left_out = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            try:
                r = bench_model(model, tmp, args.repeat, threads, args.tuned, args.fixed_threads,
                                args.seconds, args.batch)  # fmt: skip
            except LeftOut as why:
                left_out.append((model.name, str(why)))
                print(f"{model.name:20} left out: {why}")
                continue
            rows.append(r)
            line = (f"{r['model']:20} {r['family'][:18]:18} {r['load_s']:6.2f} "
                    f"{r['compile_s']:6.2f} {r['tvmc_ms']:8.3f} {ms_or_dash(r['ort_ms'])} "
                    f"{ms_or_dash(r['ov_ms'])} {r['ratio']:6.2f} {r['gflops']:8.1f} "
                    f"{r['gflops'] / peak:5.0%} {r['workspace_mb']:6.1f} {r['naive_mb']:8.1f} "
                    f"{r['error']:8.1e} {r['slow_tvmc']:3.0%}/{r['slow_base']:<3.0%} "
                    f"{describe(r['cores_ns']) or '-':>9}")  # fmt: skip
            if args.tuned:
                if r["tuned_ms"] is None:
                    line += "  (no records)"
                else:
                    flag = "  SLOWER" if r["slower"] else ""
                    line += (f" {r['tuned_ms']:8.3f} {r['tuned_ratio']:7.2f} {r['speedup']:6.2f}x "
                             f"{r['noise']:5.0%}{flag}")  # fmt: skip
            if args.fixed_threads:
                line += (f" {r['fixed_ms']:8.3f} {r['tvmc_ms'] / r['fixed_ms']:6.2f} "
                         f"{r['one_thread_runs']:7d}")  # fmt: skip
            print(line)
            sys.stdout.flush()
    if rows:
        print("\n".join(summary(rows, left_out)))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if threads > 1:
        print(f"shared cores after: {shared_cores(threads)}; {cores_apart()}")


if __name__ == "__main__":
    main()
