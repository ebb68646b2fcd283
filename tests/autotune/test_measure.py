"""Measurement in worker processes: real conv configs, and a probe op whose `mode` knob makes
its template or kernel fail in each way the measurer must survive and tell apart."""

from __future__ import annotations

import ctypes
import pickle
import time
from collections.abc import Iterator

import numpy as np
import pytest

from tvmc.autotune import features, measure_cpu
from tvmc.autotune.local import LocalMeasurer
from tvmc.autotune.measure import (
    BuildResult,
    MeasureInput,
    MeasureOptions,
    PastEndGrant,
    default_entity,
    measure_default,
    output_mismatch,
    stable_costs,
)
from tvmc.autotune.measure_cpu import build, run
from tvmc.autotune.records import FAILED_COST
from tvmc.autotune.task import Task, task_args, task_name
from tvmc.codegen import CPUTarget
from tvmc.graph import Node, TensorType
from tvmc.kernel import Buffer, Kernel, const, fma, loop
from tvmc.ops import OPS
from tvmc.ops.lowering import LowerContext, LoweringTarget, Template, TensorRef
from tvmc.ops.registry import OPAQUE, Attrs, OpDef, register
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.space import ConfigSpace
from tvmc.runtime import mean_seconds

# ---- the probe op: y = x, or the failure its `mode` knob names -------------------------------
PROBE = "MeasureProbe"
MODES = ("ok", "raise", "wrong", "crash", "hang", "sleep", "past_end")
N = 16


def _probe_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    return [types[0]]


def _probe_space(attrs: Attrs, types: list[TensorType], target: LoweringTarget) -> ConfigSpace:
    return ConfigSpace().other("mode", MODES)


def _probe_template(
    ctx: LowerContext, attrs: Attrs, inputs: list[TensorRef], outputs: list[Buffer], epilogue
) -> list[Kernel]:
    x, y = inputs[0], outputs[0]
    mode = ctx.config.get("mode", "ok")
    if mode == "raise":
        raise ValueError("the probe template rejects this config")
    if mode == "sleep":
        time.sleep(60)
    if mode == "crash":  # stores 1 to 2 GiB past the buffer, a page apart
        body = loop("i", 1 << 18, lambda i: y.store((i * 1024 + (1 << 28),), const(1.0, "float32")))
    elif mode == "hang":  # 2**62 dependent fmas: no compiler folds them away
        x0, x1 = x.read((const(0),)), x.read((const(1),))
        step = loop("j", (1 << 31) - 1, lambda j: y.store((0,), fma(y[0], x0, x1)))
        body = loop("i", (1 << 31) - 1, lambda i: step)
    elif mode == "past_end":  # y = x + 0 * (the value N past x's end, granted): kept, not dropped
        assert ctx.may_read_past_end(x.buffer, 4 * N)
        body = loop("i", N, lambda i: y.store((i,), x.read((i,)) + x.read((i + N,)) * 0.0))
    else:
        shift = 1.0 if mode == "wrong" else 0.0
        body = loop("i", N, lambda i: y.store((i,), x.read((i,)) + const(shift, "float32")))
    return [make_kernel(ctx.name("probe"), body)]


if PROBE not in OPS:  # worker processes import this module to learn the op
    _lowering = Template(_probe_template, _probe_space)
    register(OpDef(PROBE, _probe_rule, lambda attrs, x: x, {"cpu": _lowering, "cuda": _lowering},
                   kind=OPAQUE))  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _unregister_probe() -> Iterator[None]:
    yield
    OPS.pop(PROBE, None)


def probe_task() -> Task:
    args = [["TENSOR", [N], "float32"], ["ATTRS", {}]]
    return Task(task_name(PROBE, "llvm"), PROBE, args, "llvm", _probe_space({}, [], None), ["y"])


def probe(task: Task, mode: str) -> MeasureInput:
    return MeasureInput(task, task.space.get(MODES.index(mode)))


# ---- a small real task ---------------------------------------------------------------------------
def conv_task(dtype: str = "float32", k: int = 3, hw: int = 14) -> Task:
    attrs = {"kernel_shape": (k, k), "strides": (1, 1), "pads": (k // 2,) * 4, "dilations": (1, 1)}
    node = Node("Conv", ["x", "w", "b"], ["y"], OPS["Conv"].normalize_attrs(attrs, "conv"))
    types = [TensorType(s, dtype) for s in [(1, 16, hw, hw), (24, 16, k, k), (24,)]]
    lowering = LoweringTarget("cpu", CPUTarget.parse("llvm").vector_bits, 2)
    space = OPS["Conv"].space(node.attrs, types, lowering)
    args = task_args(node, types)
    return Task(task_name("Conv", "llvm"), "Conv", args, "llvm", space, ["y"], 2 * 24 * 196 * 144)


FAST = MeasureOptions(repeat=2, timeout=3.0, build_timeout=4.0, n_parallel=2)


@pytest.fixture(scope="module")
def measurer() -> Iterator[LocalMeasurer]:
    with LocalMeasurer(FAST) as m:
        yield m


def test_conv_default_and_configs(measurer):
    task = conv_task()
    default = measure_default(task, measurer)
    assert default.error_no == 0, default.error_msg
    assert len(default.costs) == FAST.repeat and min(default.costs) > 0
    configs = [task.space.get(0), task.space.get(len(task.space) - 1)]
    results = measurer.measure([MeasureInput(task, c) for c in configs])
    for config, result in zip(configs, results):
        assert result.error_no == 0, (config.values, result.error_msg)
        assert len(result.costs) == FAST.repeat and min(result.costs) > 0
        assert result.all_cost >= sum(result.costs) and result.timestamp <= time.time()


def test_bfloat16_configs_pass_the_correctness_check(measurer):
    task = conv_task("bfloat16")  # random inputs, compared as float32 within a bfloat16 ulp
    configs = [task.space.get(0), task.space.get(len(task.space) - 1)]
    for config, result in zip(configs, measurer.measure([MeasureInput(task, c) for c in configs])):
        assert result.error_no == 0, (config.values, result.error_msg)


def test_every_failure_is_told_apart_and_measuring_goes_on(measurer):
    task = probe_task()
    modes = ["ok", "raise", "wrong", "crash", "hang", "sleep", "ok"]
    start = time.monotonic()
    results = measurer.measure([probe(task, m) for m in modes])
    elapsed = time.monotonic() - start
    codes = {m: r.error_no for m, r in zip(modes, results)}
    assert [r.error_no for r in results] == [0, 1, 5, 4, 7, 6, 0], {
        m: (r.error_no, r.error_msg[-200:]) for m, r in zip(modes, results)
    }
    assert codes == {"ok": 0, "raise": 1, "wrong": 5, "crash": 4, "hang": 7, "sleep": 6}
    for mode, result in zip(modes, results):
        if mode != "ok":
            assert result.costs == [FAILED_COST] and result.error_msg, mode
    assert "rejects this config" in results[1].error_msg
    assert "SIGSEGV" in results[3].error_msg or "signal" in results[3].error_msg
    hang = results[4]
    assert FAST.timeout <= hang.all_cost < FAST.timeout + 5
    assert elapsed < 30, "a hang or a sleep held up the batch"
    again = measurer.measure([probe(task, "ok"), probe(task, "crash"), probe(task, "ok")])
    assert [r.error_no for r in again] == [0, 4, 0]


def test_correctness_check_can_be_off():
    with LocalMeasurer(MeasureOptions(repeat=1, check_correctness=False, flush_cache=True)) as m:
        (result,) = m.measure([probe(probe_task(), "wrong")])
    assert result.error_no == 0 and len(result.costs) == 1


def test_build_and_run_are_plain_functions():
    """What another engine (Dask) needs: build and run anywhere, results through pickle."""
    task = conv_task()
    built = build(MeasureInput(task, task.space.get(7)))
    assert isinstance(built, BuildResult) and built.error_no == 0 and built.object_code
    built = pickle.loads(pickle.dumps(built))
    result = pickle.loads(pickle.dumps(run(built, MeasureOptions(repeat=2))))
    assert result.error_no == 0 and len(result.costs) == 2
    rejected = build(probe(probe_task(), "raise"))
    assert rejected.error_no == 1 and not rejected.object_code


# 7x7 pixels: the last register tiles of a 1x1 conv run past the input's last plane
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_1x1_conv_is_measured_in_place_as_compiled(dtype):
    """Compile lets a 1x1 conv read an intermediate in place, past its end: the measured kernel
    is that one (no conv_input copy), its inputs are padded by the grant, and it is correct."""
    task = conv_task(dtype, k=1, hw=7)
    built = build(MeasureInput(task, default_entity()))
    assert built.error_no == 0, built.error_msg
    assert [k.name for k in built.kernels] == ["k_conv"]
    assert built.read_slack > 0
    x = measure_cpu.allocate_buffers(built)["in0"]
    padding = (ctypes.c_uint8 * built.read_slack).from_address(x.ctypes.data + x.nbytes)
    if dtype == "float32":  # NaN: a kernel that kept a value read past the end fails the check
        assert np.isnan(np.frombuffer(padding, np.float32)).all()
    result = run(pickle.loads(pickle.dumps(built)), MeasureOptions(repeat=2))
    assert result.error_no == 0, result.error_msg
    assert [k.name for k in features.task_kernels(task, {})] == ["k_conv"], "as measured"


def test_reads_past_end_are_granted_for_data_inputs_only():
    task = conv_task(k=1, hw=7)
    grant = PastEndGrant.of(task)
    assert grant.data_inputs == {"in0"}  # the weights and bias are constants, packed
    assert not grant(Buffer("in1", (24, 16, 1, 1), "float32"), 64)
    assert not grant(Buffer("out0", (1, 24, 7, 7), "float32"), 64)
    assert grant.nbytes == 0
    assert grant(Buffer("in0", (1, 16, 7, 7), "float32"), 60)
    assert grant(Buffer("in0", (1, 16, 7, 7), "float32"), 12)
    assert grant.nbytes == 60


def fake_timer(times: list[float]):
    """A measurement that returns `times` one by one and counts its calls."""
    queue = iter(times)

    def measure_once() -> float:
        measure_once.calls += 1  # type: ignore[attr-defined]
        return next(queue)

    measure_once.calls = 0  # type: ignore[attr-defined]
    return measure_once


STABLE = MeasureOptions(repeat=3, max_repeat=8, stable_spread=0.05)


@pytest.mark.parametrize(
    "times, calls, kept",
    [
        # agreeing at once: `repeat` measurements and no more
        ([1.00, 1.02, 1.01], 3, [1.00, 1.02, 1.01]),
        # a burst hits the second: measured until three agree; the slow one is dropped
        ([1.00, 1.90, 1.03, 1.04], 4, [1.00, 1.03, 1.04]),
        # a lucky first run decides nothing alone: three that agree do
        ([0.50, 1.00, 1.01, 1.02], 4, [1.00, 1.01, 1.02]),
        # never agreeing: stops at max_repeat with the fastest three, in the order taken
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 0.1], 8, [1.0, 2.0, 3.0]),
    ],
)
def test_measurements_repeat_until_the_fastest_agree(times, calls, kept):
    measure_once = fake_timer(times)
    assert stable_costs(measure_once, STABLE) == kept
    assert measure_once.calls == calls


def test_a_config_measures_until_stable(monkeypatch):
    """`run` takes its costs from the stability rule: a noisy timer measures more often."""
    times = [2e-3, 9e-3, 2.01e-3, 7e-3, 2.02e-3]
    measure_once = fake_timer(times)
    monkeypatch.setattr(measure_cpu, "mean_seconds", lambda *args: measure_once())
    task = conv_task()
    built = build(MeasureInput(task, task.space.get(0)))
    result = run(built, STABLE)
    assert result.error_no == 0 and measure_once.calls == 5
    assert result.costs == [2e-3, 2.01e-3, 2.02e-3]


def test_inputs_are_the_same_for_every_config():
    task = conv_task()
    a, b = (build(MeasureInput(task, task.space.get(i))) for i in (0, 5))
    assert a.reference is not None and b.reference is not None
    np.testing.assert_array_equal(a.reference[0], b.reference[0])
    assert a.inputs == b.inputs


def test_time_grows_number_until_min_repeat_ms():
    calls = []
    seconds = mean_seconds(lambda: calls.append(time.sleep(0.001)), 1, 20.0)
    assert len(calls) >= 10 and 0.0009 < seconds < 0.01


def test_outputs_are_judged_at_the_scale_of_the_output():
    """A long sum rounds differently in float32: near-zero outputs of a 18432-deep dot product
    differ by ~1e-3 while the outputs are ~100; a real error is still caught."""
    want = np.array([[150.0, -120.0, 0.01, 90.0]], np.float32)
    built = BuildResult(outputs=((1, 4),), reference=[want])
    rounded = want + np.array([[0.01, -0.02, 0.002, 0.0]], np.float32)
    assert output_mismatch(built, {"out0": rounded}) == ""
    wrong = want.copy()
    wrong[0, 2] = 0.5
    assert "1 of 4 elements differ" in output_mismatch(built, {"out0": wrong})


def test_a_config_listed_twice_is_built_once_and_run_each_time(measurer, monkeypatch):
    from tvmc.autotune import local

    built: list[int] = []
    real = local.run_parallel

    def counting(workers, jobs, timeout):
        built.append(len(jobs))
        return real(workers, jobs, timeout)

    monkeypatch.setattr(local, "run_parallel", counting)
    task = conv_task()
    a, b = (MeasureInput(task, task.space.get(i)) for i in (0, len(task.space) - 1))
    default = MeasureInput(task, default_entity())  # no knobs: another build than config 0
    results = measurer.measure([a, b, b, a, default, default])
    assert built == [3] and len(results) == 6
    assert all(r.error_no == 0 and min(r.costs) > 0 for r in results)
    assert results[0] is not results[3]  # each listing is its own run


def test_a_kernel_keeping_a_value_read_past_the_end_fails_the_check():
    """The padding a grant buys is poisoned: a kernel must drop what it reads there."""
    built = build(probe(probe_task(), "past_end"))
    assert built.error_no == 0 and built.read_slack == 4 * N, built.error_msg
    result = run(built, MeasureOptions(repeat=1))
    assert result.error_no == 5 and "differ from the reference" in result.error_msg
