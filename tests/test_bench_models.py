"""benchmarks/models.py: the tuned-against-untuned verdict uses an identical executor as its
control, so that two copies of the same code differing on a shared VM flag nothing."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks")
sys.path.insert(0, BENCH)
import models  # noqa: E402


def rounds(*medians: float) -> list[list[float]]:
    return [[m, m, m] for m in medians]


def test_tuned_slower_than_both_untuned_copies_in_every_round_is_flagged():
    verdict = models.tuned_comparison(
        untuned=rounds(10, 11, 10), tuned=rounds(12, 13, 12.5), control=rounds(10.5, 10, 11)
    )
    assert verdict["slower"]
    assert abs(verdict["noise"] - 0.1) < 1e-9  # the control strayed 10% at most (round 2, 3)


def test_tuned_within_what_identical_code_strayed_is_not_flagged():
    """Slower than untuned in every round, but the control was slower still in one round."""
    verdict = models.tuned_comparison(
        untuned=rounds(10, 10, 10), tuned=rounds(11, 11, 11), control=rounds(12, 10, 10)
    )
    assert not verdict["slower"]
    assert abs(verdict["noise"] - 0.2) < 1e-9


def test_tuned_faster_is_not_flagged():
    verdict = models.tuned_comparison(
        untuned=rounds(10, 10), tuned=rounds(9, 9), control=rounds(10, 10)
    )
    assert not verdict["slower"] and verdict["noise"] == 0


def test_a_timing_plan_spans_the_seconds_in_short_balanced_blocks(monkeypatch):
    """Each runtime runs `repeat` times at least and spans `seconds`; a block of any lasts at
    most BLOCK_SECONDS (one run where a run is longer); rounds come in whole sets of the
    balanced orders; a slow runtime beside a fast one is not run for the fast one's count."""
    per_call = {"fast": 0.001, "slow": 0.02, "slower": 0.5}
    monkeypatch.setattr(models, "seconds_per_call", lambda fn: per_call[fn])
    for fns in (["fast", "slow"], ["slower", "slow", "fast"], ["fast", "fast", "fast"]):
        rounds, sizes = models.timing_plan(fns, repeat=30, seconds=2.0)
        assert rounds % len(models.balanced_orders(len(fns))) == 0
        for fn, size in zip(fns, sizes):
            assert rounds * size >= 30 and rounds * size * per_call[fn] >= 2.0
            assert size == 1 or size * per_call[fn] <= models.BLOCK_SECONDS * 1.01
            assert rounds * size * per_call[fn] <= max(4.0, 2 * 30 * per_call[fn])


def test_blocks_hold_each_functions_own_count_of_runs():
    calls = {"a": 0, "b": 0}
    fns = [lambda: calls.__setitem__("a", calls["a"] + 1),
           lambda: calls.__setitem__("b", calls["b"] + 1)]  # fmt: skip
    times = models.blocked_times(*fns, rounds=4, block_runs=[3, 1])
    assert [len(b) for b in times[0]] == [3] * 4 and [len(b) for b in times[1]] == [1] * 4
    assert calls == {"a": 4 * (3 + 1), "b": 4 * (1 + 1)}  # each block after one untimed run


def test_regrouped_merges_consecutive_blocks():
    blocks = [[float(i)] for i in range(12)]
    assert models.regrouped(blocks, 6) == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0],
                                           [8.0, 9.0], [10.0, 11.0]]  # fmt: skip
    assert models.regrouped(blocks[:3], 6) == [[0.0], [1.0], [2.0]]


def test_blocked_medians_over_seconds_follow_the_timing_plan(monkeypatch):
    """With `seconds` (the noisy-neighbour benchmark), the blocks are `timing_plan`'s."""
    planned = []

    def plan(fns, repeat, seconds):
        planned.append((len(fns), repeat, seconds))
        return 2, [3, 1]

    monkeypatch.setattr(models, "timing_plan", plan)
    calls = {"a": 0, "b": 0}
    fns = [lambda: calls.__setitem__("a", calls["a"] + 1),
           lambda: calls.__setitem__("b", calls["b"] + 1)]  # fmt: skip
    medians = models.blocked_median_ms(*fns, repeat=30, seconds=2.0)
    assert planned == [(2, 30, 2.0)] and len(medians) == 2
    assert calls == {"a": 2 * (3 + 1), "b": 2 * (1 + 1)}


def test_slow_share_counts_blocks_well_above_the_runtimes_lower_quartile():
    steady = [[1.0, 1.02], [0.98, 1.01], [1.0, 0.99], [1.03, 1.0]]
    assert models.slow_share(steady) == 0.0
    periods = steady + [[1.5, 1.45], [1.2, 1.25]]  # one block in a slow period, one nearly
    assert models.slow_share(periods) == 1 / 6
    assert models.slow_share([[1.0], [9.0]]) == 0.0  # too few runs to tell


def _runs(path, inputs, threads):
    return lambda: [np.zeros(1)]


def _fails(path, inputs, threads):
    raise RuntimeError("Conversion is failed for: AveragePool-20")


def test_a_model_one_baseline_cannot_run_is_compared_with_the_other(monkeypatch):
    monkeypatch.setattr(models, "onnxruntime_session", _runs)
    monkeypatch.setattr(models, "openvino_session", _fails)
    sessions, gaps = models.baseline_sessions("m.onnx", {}, 2)
    assert list(sessions) == ["onnxruntime"]
    assert gaps == [
        "OpenVINO cannot run it: RuntimeError: Conversion is failed for: AveragePool-20"
    ]
    row = {"model": "efficientnet", "family": "cnn", "ratio": 0.8, "tuned_ms": None,
           "slow_tvmc": 0.0, "slow_base": 0.0, "fixed_ms": None, "gaps": gaps,
           "cores_ns": []}  # fmt: skip
    lines = models.summary([row], [])
    assert "efficientnet compared with one baseline: OpenVINO cannot run it" in lines[-1]


def test_a_model_no_baseline_can_run_is_left_out(monkeypatch):
    monkeypatch.setattr(models, "onnxruntime_session", _fails)
    monkeypatch.setattr(models, "openvino_session", lambda *a: None)  # not installed
    with pytest.raises(models.LeftOut, match="onnxruntime cannot run it"):
        models.baseline_sessions("m.onnx", {}, 2)


def _row(model: str, cores_ns: list) -> dict:
    return {"model": model, "family": "cnn", "ratio": 0.8, "tuned_ms": None, "slow_tvmc": 0.0,
            "slow_base": 0.0, "fixed_ms": None, "gaps": [], "cores_ns": cores_ns}  # fmt: skip


def test_the_summary_names_models_timed_while_the_cores_were_apart(tmp_path, monkeypatch):
    """A round trip over twice the fastest seen on this CPU, before or after a model's timing,
    marks it; a sample that could not be taken (None) marks nothing. The fastest is remembered
    across runs, so a run spent wholly apart reads as apart."""
    monkeypatch.setenv("TVMC_CACHE_DIR", str(tmp_path))
    rows = [_row("near", [80.0, 95.0]), _row("went_apart", [82.0, 340.0]),
            _row("unknown", [None, None])]  # fmt: skip
    line = next(x for x in models.summary(rows, []) if x.startswith("timed with the cores"))
    assert line.endswith("80 ns): 1 of 3 models: went_apart")
    assert not any(x.startswith("timed with the cores") for x in
                   models.summary([_row("one_cpu", [])], []))  # fmt: skip
    all_apart = [_row("a", [330.0, 350.0]), _row("b", [340.0, 345.0])]
    line = next(x for x in models.summary(all_apart, []) if x.startswith("timed with the cores"))
    assert line.endswith("80 ns): 2 of 2 models: a, b")


def test_the_fastest_round_trip_is_remembered_per_cpu(tmp_path, monkeypatch):
    """The cache keeps the fastest round trip ever seen on this CPU; unreadable or implausible
    entries are ignored, not trusted."""
    import core_latency

    monkeypatch.setenv("TVMC_CACHE_DIR", str(tmp_path))
    assert core_latency.fastest_seen([]) is None
    assert core_latency.fastest_seen([None, 120.0, 95.5]) == 95.5
    assert core_latency.fastest_seen([400.0]) == 95.5  # a window apart: the remembered stands
    assert core_latency.fastest_seen([61.0]) == 61.0
    cache = tmp_path / core_latency.CACHE
    cache.write_text("not json")
    assert core_latency.fastest_seen([300.0]) == 300.0
    cache.write_text(json.dumps({core_latency.cpu_key(): -3}))
    assert core_latency.fastest_seen([250.0]) == 250.0
    cache.write_text(json.dumps({core_latency.cpu_key(): True}))
    assert core_latency.fastest_seen([240.0]) == 240.0


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_the_cores_round_trip_is_measured():
    import core_latency

    if core_latency._library() is None:
        pytest.skip("no C compiler")
    ns = core_latency.round_trip_ns(200)  # a busy partner CPU makes a trip a time slice
    assert ns is not None and 0 < ns < 1e8  # ns: tens to hundreds on a quiet machine
    assert core_latency.describe([81.4, None]) == "81/-"
    assert core_latency.far_apart([81.0, 170.0], 80.0) and not core_latency.far_apart([159.0], 80.0)


KEYS = ["tvmc 2t", "tvmc 2t fixed", "tvmc 1t", "onnxruntime"]


def test_a_noisy_cell_that_slows_more_than_onnxruntime_names_both_times():
    import noisy

    alone = dict(zip(KEYS, [4.0, 4.0, 6.0, 6.0]))
    loaded = dict(zip(KEYS, [20.0, 19.0, 24.0, 24.0]))  # x5.0 and x4.75 against ort's x4.0
    failures = noisy.cell_failures("m mixed", KEYS, loaded, alone, apart=True)
    assert failures == [
        "m mixed: tvmc slowed x5.00, ort x4.00 (20.0 against 24.0 ms; alone timed with the "
        "cores apart)",
        "m mixed: tvmc 2t fixed slowed x4.75, ort x4.00 (19.0 against 24.0 ms; alone timed "
        "with the cores apart)",
    ]


def test_a_noisy_cell_within_its_promises_passes_and_two_threads_over_one_fail_it():
    import noisy

    alone = dict(zip(KEYS, [4.0, 4.0, 6.0, 6.0]))
    over = dict(zip(KEYS, [18.0, 8.0, 16.0, 16.0]))  # x4.5 against ort's x2.67
    assert noisy.cell_failures("m c", KEYS, over, alone, apart=False) == [
        "m c: tvmc slowed x4.50, ort x2.67 (18.0 against 16.0 ms)",
        "m c: tvmc 2t 18.0 ms > 1 thread 16.0 ms",
    ]
    fine = dict(zip(KEYS, [8.0, 8.0, 12.0, 12.0]))  # x2.0 each, two threads faster than one
    assert noisy.cell_failures("m c", KEYS, fine, alone, apart=False) == []


def test_the_noisy_baseline_is_each_runtimes_faster_alone_cell():
    import noisy

    before = dict(zip(KEYS, [4.0, 4.0, 6.0, 9.0]))  # onnxruntime slow: the cores apart
    loaded = dict(zip(KEYS, [1.0, 1.0, 1.0, 1.0]))
    after = dict(zip(KEYS, [4.2, 3.9, 6.1, 6.0]))
    cell = noisy.Cell
    cells = [cell("alone", before, 0.1, "", True), cell("mixed", loaded, 7.0, "", False),
             cell("alone", after, 0.1, "", False)]  # fmt: skip
    assert noisy.alone_baseline(cells) == (dict(zip(KEYS, [4.0, 3.9, 6.0, 6.0])), False)
    cells[2] = cell("alone", after, 0.1, "", True)
    assert noisy.alone_baseline(cells)[1]  # apart only when every alone cell was
    assert noisy.alone_baseline(cells[1:2]) == (loaded, False)  # no alone cell: the first cell


def _conv_model(reshape_to: list[int] | None = None, dynamic: bool = False, allowzero: int = 0):
    """x [1, 3, 8, 8] -> Conv 3->4 3x3 -> [1, 4, 6, 6], then Reshape'd to `reshape_to` where
    given (allowzero as torch exports it: 1); `dynamic`: x's leading dim a name."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y" if reshape_to is None else "c"])]
    inits = [w]
    if reshape_to is not None:
        inits.append(numpy_helper.from_array(np.array(reshape_to, np.int64), "shape"))
        nodes.append(helper.make_node("Reshape", ["c", "shape"], ["y"], allowzero=allowzero))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n" if dynamic else 1, 3, 8, 8])
    out_shape = [1, 4, 6, 6] if reshape_to is None else None
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ran_on_four(proto, tmp_path, name: str) -> tuple[int, ...]:
    import onnx
    from suite import rebatched

    path = str(tmp_path / f"{name}.onnx")
    onnx.save(rebatched(proto, 4), path)
    x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    run = models.onnxruntime_session(path, {"x": x}, 1)
    models.check_batch({"onnxruntime": run}, 4)  # LeftOut unless every output leads with 4
    return run()[0].shape


def test_a_model_rebatched_runs_on_that_many_images(tmp_path):
    """Inputs and declared outputs of a leading 1 (or a named dim) lead with the batch and the
    intermediate shapes of one image are dropped: onnxruntime runs the copy on 4 images."""
    from suite import rebatched

    for dynamic in (False, True):
        proto = rebatched(_conv_model(dynamic=dynamic), 4)
        dims = proto.graph.input[0].type.tensor_type.shape.dim
        assert [d.dim_value for d in dims] == [4, 3, 8, 8]
        assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_value == 4
        assert not proto.graph.value_info
        assert _ran_on_four(_conv_model(dynamic=dynamic), tmp_path, f"m{dynamic}") == (4, 4, 6, 6)


def test_a_flatten_to_one_row_keeps_the_batch(tmp_path):
    """A Reshape of the image to [1, -1] (the light models' flatten) or [1, 4, 36] (allowzero,
    as torch exports) keeps the leading dim of its input on 4 images, not one row of 4."""
    assert _ran_on_four(_conv_model([1, -1]), tmp_path, "flat") == (4, 144)
    assert _ran_on_four(_conv_model([1, 4, 36], allowzero=1), tmp_path, "heads") == (4, 4, 36)


def test_a_graph_holding_a_batch_of_one_is_left_out():
    """Outputs that do not lead with the batch (a Concat with a constant of one image, say)
    leave the model out, naming them, rather than timing another computation; an input whose
    first dim is not 1 cannot be rebatched at all."""
    from suite import rebatched

    one_row = {"onnxruntime": lambda: [np.zeros((1, 576), np.float32)]}
    with pytest.raises(models.LeftOut, match=r"batch 4: onnxruntime's outputs are \[\(1, 576\)\]"):
        models.check_batch(one_row, 4)
    models.check_batch(one_row, 1)  # batch 1: nothing to check
    proto = _conv_model()
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
    with pytest.raises(ValueError, match="x has no batch dim of 1 to set"):
        rebatched(proto, 4)


def test_zoo_inputs_repeat_each_stored_image_per_batch():
    from suite import by_names

    model = by_names(["convnext"])[0]
    one, four = model.inputs(model.onnx_path(""), 1), model.inputs(model.onnx_path(""), 4)
    for name, a in one.items():
        assert four[name].shape == (4, *a.shape[1:])
        assert all(np.array_equal(four[name][i], a[0]) for i in range(4))
