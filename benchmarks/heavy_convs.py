"""The heavy convs of light_resnet50 and light_vgg19, untuned, as a share of the measured peak.

    .venv/bin/python benchmarks/heavy_convs.py [--min-mflops 100] [--rounds 3] [models...]

Each Conv task of the models (deduplicated by workload) of at least `--min-mflops` is measured
with its template's default schedule as tuning measures a config (tvmc.autotune: alone, with
the task's seeded inputs, checked against the reference, timed until `repeat` measurements
agree) in `--rounds` rounds over all tasks; the best round's GFLOP/s counts against the
2-thread FMA peak (tvmc.runtime.peak, measured and cached per CPU). Prints per task its
shape, GFLOP/s, share of peak, and the plan the default picks (schedule and register tile).
The issue's target: every heavy conv at 90% of the peak or more. A conv whose default is
Winograd (tvmc/ops/conv/cpu_winograd.py) does fewer multiply-adds than its FLOPs count: its
GFLOP/s are "effective" (the direct conv's FLOPs over the time) and may pass the peak;
`--direct` (with `--cpu-time`) times every conv's direct default plan instead, the kernels'
own share of the peak.

On a busy machine 2-thread wall times measure the neighbours as much as the code; `--cpu-time`
measures what the schedule does with one core: one thread, each run timed by the thread's CPU
time (time off the core does not count, as tvmc.runtime.peak measures the peak), the best of
`--rounds` blocks of 5 runs against one core's peak, every conv's blocks in turn (so that each
conv's are spread over the whole measurement, not one second of it). CPU time still counts the
moments a shared host slows the core (a VM's vCPU sharing a physical core's FMA units), so with
`--cpu-time` a block of 5 runs counts only where 2 ms peak bursts just before and after it
reached 90% of the peak, and rounds go on (at most 4x `--rounds`) until each conv has
`--rounds` such blocks; a conv that met none is flagged and keeps its fastest block
(`--all-blocks`: count every block). Where the bursts beat the cached peak (a first
measurement taken in a slow spell), their best is the peak: shares are of it, and it is cached.
`--orders` (with `--cpu-time`) also times the default plan with its other tile-loop order
(pixels_outer / channels_outer), in alternation, and sums up the other orders too. Where a
change of `default_order` flipped a conv's order, its other order is the old default: a
before/after of the rule in one process. `--cold` (with
`--cpu-time`) evicts the caches before each run (out of its timing), so that weights and input
come from memory, as in a model whose weights do not fit in the caches; `--cold-weights` evicts
them too, then reads the input, output and temps back into the caches, so that only the weights
(and other constants) come from memory, as in a model, whose activations stay in the caches
from layer to layer while its weights (resnet50 100 MB) do not. `--prefetch` (with
`--cpu-time`, instead of `--orders`) times the default plan with its `prefetch` knob flipped in
alternation (tiles fetching the tile loop's next outer operand ahead; tvmc/ops/conv/cpu_tiles.py)
and sums that variant up too.

`--target` builds the convs for another CPU target that runs here (e.g. "llvm -mcpu=znver3": AVX2
code, 8 float lanes and 16 vector registers), measured against the host's peak; the peaks of
both vector widths are measured again and printed beside it.
`--dump-plans FILE` writes each conv's default plan knob (JSON, by task label) and stops; run
with an older tree first (`PYTHONPATH=/tmp/before tvmc ...`), `--baseline-plans FILE` (with
`--cpu-time`) times those plans in alternation with today's defaults: a before/after of a
change of the defaults in one process.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from suite import by_names

import tvmc
from tvmc.autotune.local import LocalMeasurer
from tvmc.autotune.measure import (
    MeasureInput,
    MeasureOptions,
    TaskOp,
    default_entity,
    measure_default,
    task_types,
)
from tvmc.autotune.measure_cpu import allocate_buffers, build
from tvmc.codegen import CPUTarget, load_object, num_threads, set_num_threads
from tvmc.codegen.host import host_cache_bytes
from tvmc.ops.conv.cpu import ORDERS, Core, geometry_of, plan
from tvmc.ops.conv.cpu_tiles import ChannelTiling, PixelTiling
from tvmc.ops.conv.cpu_winograd import WinogradLayout
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.space import ConfigEntity, ConfigSpace
from tvmc.runtime.peak import PeakBursts, measure_core_peak_gflops, peak_gflops, record_core_peak

TARGET_SHARE = 0.9


def default_plan(task, target: CPUTarget, direct: bool = False, threads: int = 0) -> str:
    """The schedule and register tile (MR rows x NV vectors) the default config picks (for
    `threads`, default the runtime's)."""
    chosen = default_conv_plan(task, target, direct, threads)
    t = chosen.tiling
    if isinstance(t, WinogradLayout):
        bands = f" bands of {t.band} tile rows" if t.band else ""
        return f"{chosen.schedule} GEMM {t.gemm_rows}x{t.gemm_vectors}{bands} (effective GFLOP/s)"
    cut = ""
    if isinstance(t, PixelTiling) and (t.rows > 1 or t.chunks > 1):
        types, _ = task_types(task)
        flat = len(conv_geometry(task, target).out_shape) < len(types[0].shape) - 2
        cut = f" {t.rows} rows" if t.rows > 1 else f" 1/{t.chunks} {'plane' if flat else 'row'}"
    elif isinstance(t, ChannelTiling) and t.flat:
        cut = " plane"  # the tiles run on through the output planes' rows
    fetch = " prefetch" if chosen.prefetch else ""
    split = f" split {chosen.split}" if chosen.split > 1 else ""
    packed = " packed" if chosen.pack_input else ""
    lines = " planes on lines" if chosen.channel_pad else ""
    phases = "" if chosen.phased else " unphased"
    return (f"{chosen.schedule} {t.mr}x{t.nv}{cut}{phases} {chosen.order}{fetch}{split}{packed}"
            f"{lines}")  # fmt: skip


def default_conv_plan(task, target: CPUTarget, direct: bool = False, threads: int = 0):
    """The plan the default config of a Conv task gets for `target` (float32) on `threads`
    (default the runtime's); `direct`: the direct conv's (the default where Winograd does not
    apply)."""
    lanes = target.vector_bits // 32
    core = Core.of(LoweringTarget.of_cpu(target, threads or num_threads()))
    return plan({}, conv_geometry(task, target), lanes, target.vector_registers,
                target.private_cache_bytes // 4, constant_weights=not direct, core=core)  # fmt: skip


def conv_geometry(task, target: CPUTarget):
    """The geometry a Conv task's tiles run over on `target` (a pointwise conv's planes may be
    one row: tvmc.ops.conv.cpu.tiled_geometry)."""
    types, _ = task_types(task)
    lowering = LoweringTarget.of_cpu(target, 1)
    return geometry_of(task.op, TaskOp.of(task).node.attrs, types, lowering)


def direct_entity(task, target: CPUTarget) -> ConfigEntity:
    """A config of the direct conv's default plan (Winograd's default or not)."""
    return config_of({"schedule": default_conv_plan(task, target, direct=True).schedule})


def flipped_prefetch(task, target: CPUTarget) -> ConfigEntity:
    """The default config with its `prefetch` knob the other way round."""
    space = ConfigSpace().other("prefetch", [not default_conv_plan(task, target).prefetch])
    return ConfigEntity(space, 0, (0,))


def default_knobs(task) -> dict:
    """The plan and unroll_taps knobs of the default config (what `--dump-plans` writes)."""
    return dict(task.space.get(task.space.default_index).values)


def json_shaped(knobs: dict) -> dict:
    """`knobs` as a JSON round trip gives them back (tuples become lists)."""
    return json.loads(json.dumps(knobs))


def config_of(knobs: dict) -> ConfigEntity:
    """A config holding exactly `knobs` (a plan need not be in today's space)."""
    space = ConfigSpace()
    for name, value in knobs.items():
        space.other(name, [value])
    return ConfigEntity(space, 0, (0,) * len(knobs))


def target_peak(target: CPUTarget, threads: int) -> tuple[float, str]:
    """The host's peak (tvmc.runtime.peak, cached), against which code of any target counts;
    for a target of narrower vectors than the host's, with both widths' peaks measured now
    (on Zen 4, whose 512-bit FMA runs on its two 256-bit pipes, the flops per cycle are the
    same; the 12-chain kernel measured the 256-bit one ~10% lower: docs/performance.md)."""
    peak, source = peak_gflops(threads)
    if target.vector_bits < CPUTarget.host().vector_bits:
        narrow = max(measure_core_peak_gflops(lanes=target.vector_bits // 32) for _ in range(2))
        wide = max(measure_core_peak_gflops() for _ in range(2))
        source += (f"; one core measured now: {narrow:.0f} with {target.vector_bits}-bit, "
                   f"{wide:.0f} with {CPUTarget.host().vector_bits}-bit vectors")  # fmt: skip
    return peak, source


def cache_flush_array() -> np.ndarray:
    """What `--cold` runs write before each timed run to evict the caches: twice the largest
    CPU cache (sysfs; 1 MiB where it is not told)."""
    largest = max(host_cache_bytes().values(), default=0)
    return np.zeros(2 * max(largest, 1 << 20) // 4, np.float32)


def cpu_timed(
    task, config, flush: np.ndarray | None = None, only_weights: bool = False,
    build_threads: int = 1,
) -> Callable[[], float]:  # fmt: skip
    """A function running `config` once on this thread (1 thread), returning its CPU seconds;
    with `flush`, each run first writes it (out of the timing): weights and input come from
    memory, as in a model whose weights do not all fit in the caches. `only_weights`: then the
    input, output and temps are read back into the caches (out of the timing), so that only the
    constants (packed weights, bias, tables) come from memory, as in a model, where the input
    was just written by the previous layer."""
    built = build(MeasureInput(task, config), check_correctness=False, threads=build_threads)
    module = load_object(built.object_code, built.kernels)
    arrays = allocate_buffers(built)
    calls = [(module[k.name], [ctypes.c_void_p(arrays[p[0]].ctypes.data) for p in k.params])
             for k in built.kernels]  # fmt: skip
    activations = activation_arrays(built, arrays)

    def once() -> float:
        if flush is not None:
            np.add(flush, 1.0, out=flush)
            for a in activations if only_weights else ():
                a.sum()
        start = time.thread_time()
        for fn, pointers in calls:
            fn(*pointers)
        return time.thread_time() - start

    once.keep_alive = (module, arrays)  # type: ignore[attr-defined]  # what `calls` points into
    return once


def activation_arrays(built, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The buffers of a built task that a model keeps in the caches from layer to layer: its
    input, output and temps, not the constants (packed weights, bias, tap tables)."""
    return [a for name, a in arrays.items() if name not in built.params]


QUIET_SHARE = 0.9  # a 2 ms peak burst this near the core's peak: the host gave the core its all
MAX_ROUNDS_FACTOR = 4  # rounds tried, per round asked for, to find quiet blocks
CALIBRATION_BURSTS = 200  # bursts before the first block: what the core delivers today


@dataclass
class QuietGate:
    """Counts a block of runs only where the peak bursts just before and after it reached
    QUIET_SHARE of the core's peak (the cached one, or the best burst where that is higher): on
    a shared host (a VM whose core is now and then half taken) CPU time does not exclude the
    slow moments, and a conv's best block then depends on luck. `counted[i]`: the quiet blocks
    of run i in the last `cpu_seconds`; `paced[i]`: each of its blocks' seconds times the mean
    GFLOP/s of the bursts around it (quiet or not), so that a conv's share of what the core
    delivered at that moment is its FLOPs over that product."""

    bursts: PeakBursts
    core_peak: float  # the cached figure, GFLOP/s
    blocks: int = 0  # blocks run, over every `cpu_seconds`
    quiet_blocks: int = 0  # of which quiet
    counted: list[int] = field(default_factory=list)
    paced: list[list[float]] = field(default_factory=list)

    @property
    def gflops(self) -> float:
        return QUIET_SHARE * max(self.core_peak, self.bursts.best)

    def quiet(self, burst: float) -> bool:
        return burst >= self.gflops

    def share_of_bursts(self, i: int, flops: float) -> float:
        """Run i's median share of the core's rate at its blocks' moments (the bursts around)."""
        return flops / 1e9 / statistics.median(self.paced[i])


def cpu_seconds(
    runs: list[Callable[[], float]], rounds: int, gate: QuietGate | None = None
) -> list[float]:
    """The fastest CPU seconds of each, over `rounds` alternating blocks of 5 runs. With `gate`,
    only quiet blocks count, and rounds go on (at most MAX_ROUNDS_FACTOR x `rounds`) until each
    run has `rounds` of them; a run with none keeps its fastest block."""
    fastest = [math.inf] * len(runs)
    fastest_quiet = [math.inf] * len(runs)
    counted = [0] * len(runs)
    for run in runs:
        run()  # warm-up
    paced: list[list[float]] = [[] for _ in runs]
    ran = 0
    while ran < rounds or (gate and min(counted) < rounds and ran < MAX_ROUNDS_FACTOR * rounds):
        ran += 1
        before = gate.bursts() if gate else math.inf
        for i, run in enumerate(runs):
            block = min(run() for _ in range(5))
            after = gate.bursts() if gate else math.inf
            fastest[i] = min(fastest[i], block)
            if not gate or (gate.quiet(before) and gate.quiet(after)):
                fastest_quiet[i] = min(fastest_quiet[i], block)
                counted[i] += 1
            if gate:
                paced[i].append(block * (before + after) / 2)
            before = after
    if gate:
        gate.paced = paced
        gate.blocks += len(runs) * ran
        gate.quiet_blocks += sum(counted)
        gate.counted = counted
    return [q if c else f for q, f, c in zip(fastest_quiet, fastest, counted)]


def other_order(task):
    """The default config with the other tile-loop order, or None where the space has none."""
    default = task.space.get(task.space.default_index)
    plan_ = tuple(default.values.get("plan", ()))
    if len(plan_) < 4 or plan_[3] not in ORDERS:  # Winograd's fourth entry is its band
        return None
    flipped = (*plan_[:3], ORDERS[1 - ORDERS.index(plan_[3])], *plan_[4:])
    for i in range(len(task.space)):
        config = task.space.get(i)
        if tuple(config.values.get("plan", ())) == flipped:
            return config
    return None


def wall_gflops(tasks: list, rounds: int) -> list[float]:
    """Each task's best GFLOP/s over `rounds`, measured as tuning measures (2 threads, wall)."""
    best = [0.0] * len(tasks)
    with LocalMeasurer(MeasureOptions(repeat=3)) as measurer:
        for _ in range(rounds):
            for i, task in enumerate(tasks):
                result = measure_default(task, measurer)
                if result.error_no == 0:
                    gflops = task.flops / (sum(result.costs) / len(result.costs)) / 1e9
                    best[i] = max(best[i], gflops)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["light_resnet50", "light_vgg19"])
    parser.add_argument("--min-mflops", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu-time", action="store_true", help="1 thread, timed by CPU time")
    parser.add_argument("--orders", action="store_true", help="also the other tile-loop order")
    parser.add_argument("--prefetch", action="store_true",
                        help="with --cpu-time: also the default with prefetch flipped")  # fmt: skip
    parser.add_argument(
        "--direct",
        action="store_true",
        help="with --cpu-time: the direct conv's default plan, never Winograd",
    )
    parser.add_argument("--cold", action="store_true",
                        help="with --cpu-time: evict the caches before each run")  # fmt: skip
    parser.add_argument("--cold-weights", action="store_true",
                        help="--cold, then read the activations back into the caches")  # fmt: skip
    parser.add_argument("--all-blocks", action="store_true",
                        help="with --cpu-time: count every block, quiet or not")  # fmt: skip
    parser.add_argument("--build-threads", type=int, default=1,
                        help="with --cpu-time: the code (plans, parallel loops) of a model run "
                             "on this many threads, timed on one")  # fmt: skip
    parser.add_argument("--target", default="llvm", help="a CPU target that runs here")
    parser.add_argument("--dump-plans", help="write the default plans (JSON) and stop")
    parser.add_argument("--baseline-plans", help="with --cpu-time: also time these plans")
    parser.add_argument("--changed-only", action="store_true",
                        help="only the convs whose plan differs from --baseline-plans")  # fmt: skip
    args = parser.parse_args()
    if args.direct and not args.cpu_time:
        parser.error("--direct times with --cpu-time only")
    if args.build_threads != 1 and not args.cpu_time:
        parser.error("--build-threads times with --cpu-time only")
    if args.build_threads < 1:
        parser.error(f"--build-threads must be 1 or more, got {args.build_threads}")
    target = CPUTarget.parse(args.target)
    tasks = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in by_names(args.models):
            for task in tvmc.extract_tasks(tvmc.load(model.onnx_path(tmp)), args.target):
                if task.op == "Conv" and task.flops >= args.min_mflops * 1e6:
                    tasks.append((model.name, task))
    if args.dump_plans:
        with open(args.dump_plans, "w") as f:
            json.dump({t.label: default_knobs(t) for _, t in tasks}, f, indent=1)
        return
    baseline = {}
    if args.baseline_plans:
        with open(args.baseline_plans) as f:
            baseline = json.load(f)
    if args.changed_only:
        tasks = [(m, t) for m, t in tasks
                 if baseline.get(t.label, json_shaped(default_knobs(t))) != json_shaped(
                     default_knobs(t))]  # fmt: skip
    if not tasks:
        changed = " whose plan changed" if args.changed_only else ""
        parser.error(f"no conv of {', '.join(args.models)} of {args.min_mflops:g} MFLOP or "
                     f"more{changed} to measure")  # fmt: skip
    if args.cpu_time:
        set_num_threads(1)
    threads = num_threads()
    peak, source = target_peak(target, threads)
    print(f"target {args.target}; threads {threads}; peak {peak:.1f} GFLOP/s ({source}); "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    flipped: list[float | None] = [None] * len(tasks)
    flush = None
    if args.cold or args.cold_weights:
        flush = cache_flush_array()
    gate = None
    if args.cpu_time and not args.all_blocks:
        gate = QuietGate(PeakBursts(), peak / threads)
        for _ in range(CALIBRATION_BURSTS):
            gate.bursts()
        print(f"blocks counted where the peak bursts around them reached {QUIET_SHARE:.0%} of the "
              f"core's peak or its best burst ({gate.gflops:.0f} GFLOP/s now)")  # fmt: skip
    quiet: list[int | None] = [None] * len(tasks)
    best_moment: list[float | None] = [None] * len(tasks)  # median share of the bursts around
    flipped_moment: list[float | None] = [None] * len(tasks)
    if args.cpu_time:
        runs, owners = [], []  # every conv's runs, timed in alternation over the whole run
        for i, (_, t) in enumerate(tasks):
            chosen = direct_entity(t, target) if args.direct else default_entity()
            runs.append(cpu_timed(t, chosen, flush, args.cold_weights, args.build_threads))
            owners.append((i, False))
            other = other_order(t) if args.orders else None
            if args.prefetch:
                other = flipped_prefetch(t, target)
            if t.label in baseline and baseline[t.label] != json_shaped(default_knobs(t)):
                other = config_of(baseline[t.label])
            if other is not None:
                runs.append(cpu_timed(t, other, flush, args.cold_weights, args.build_threads))
                owners.append((i, True))
        seconds = cpu_seconds(runs, args.rounds, gate)
        best = [0.0] * len(tasks)
        counts = gate.counted if gate else [None] * len(runs)
        for r, ((i, is_other), s, counted) in enumerate(zip(owners, seconds, counts)):
            gflops = tasks[i][1].flops / s / 1e9
            moment = gate.share_of_bursts(r, tasks[i][1].flops) if gate else None
            if is_other:
                flipped[i], flipped_moment[i] = gflops, moment
            else:
                best[i], quiet[i], best_moment[i] = gflops, counted, moment
    else:
        best = wall_gflops([t for _, t in tasks], args.rounds)
    if gate and gate.bursts.best > peak / threads:
        core = record_core_peak(gate.bursts.best)
        print(f"peak bursts reached {gate.bursts.best:.1f} GFLOP/s on one core, above the cached "
              f"{peak / threads:.1f} (measured in a slow spell): shares below are of "
              f"{core:.1f}, now cached")  # fmt: skip
        peak = core * threads
    other_name = ("the baseline plan" if baseline else
                  "prefetch flipped" if args.prefetch else "the other order")  # fmt: skip
    compared = args.orders or args.prefetch or baseline
    if gate:
        print("moment: the median over a conv's blocks of its share of the bursts around each "
              "block (the core's rate then)")  # fmt: skip
    print(f"{'model':16} {'task':44} {'MFLOP':>7} {'GFLOP/s':>8} {'peak':>6}"
          + (f" {'moment':>6}" if gate else "") + "  default plan"
          + (f"  (GFLOP/s with {other_name})" if compared else ""))  # fmt: skip
    below = 0
    rows = zip(tasks, best, flipped, quiet, best_moment, flipped_moment)
    for (name, task), gflops, other, calm, moment, other_moment in rows:
        share = gflops / peak
        below += share < TARGET_SHARE
        print(f"{name:16} {task.label[:44]:44} {task.flops / 1e6:7.0f} {gflops:8.1f} "
              f"{share:6.1%}" + (f" {moment:6.1%}" if moment is not None else "")
              + f"  {default_plan(task, target, args.direct, args.build_threads)}"
              + (f"  ({other:.1f}: {other / peak:.1%}"
                 + (f", moment {other_moment:.1%}" if other_moment is not None else "") + ")"
                 if other is not None else "")
              + (f"  [{calm} quiet block(s) of {args.rounds} asked]"
                 if calm is not None and calm < args.rounds else ""))  # fmt: skip
        sys.stdout.flush()
    weighted = weighted_gflops([t for _, t in tasks], best)
    print(f"all heavy convs, weighted by use: {weighted:.1f} GFLOP/s, "
          f"{weighted / peak:.0%} of peak; below {TARGET_SHARE:.0%}: "
          f"{below} of {len(tasks)}; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    if gate:
        print(f"quiet blocks: {gate.quiet_blocks} of {gate.blocks} run")
        low = sum(m < TARGET_SHARE for m in best_moment if m is not None)
        print(f"by the moment's rate (median of each conv's blocks): below {TARGET_SHARE:.0%}: "
              f"{low} of {len(tasks)}")  # fmt: skip
    if compared:
        others = [b if o is None else o for b, o in zip(best, flipped)]
        weighted = weighted_gflops([t for _, t in tasks], others)
        low = sum(g / peak < TARGET_SHARE for g in others)
        print(f"with {other_name} instead: {weighted:.1f} GFLOP/s, {weighted / peak:.0%} of "
              f"peak; below {TARGET_SHARE:.0%}: {low} of {len(tasks)}")  # fmt: skip


def weighted_gflops(tasks: list, gflops: list[float]) -> float:
    """GFLOP/s over all tasks, each counted as often as the models run it (FLOPs x weight)."""
    flops = sum(t.flops * t.weight for t in tasks)
    return flops / sum(t.flops * t.weight / (g * 1e9) for t, g in zip(tasks, gflops) if g) / 1e9


if __name__ == "__main__":
    main()
