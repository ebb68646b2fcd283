"""NegativeLogLikelihoodLoss (a row-reduction template) and SoftmaxCrossEntropyLoss (LogSoftmax
then that template), compiled natively (a few interpreted, and for CUDA), vs onnxruntime.

Across reductions (none, sum, mean), optional weights, ignore_index (inside and outside the
class range, negative), input ranks 2 to 5, target dtypes and opsets. Tolerance: sums of a few
hundred terms run in another order than onnxruntime's, rtol 1e-5, atol 1e-5; float16 and the
long sums of the parallel case are looser, as stated there.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.onnx_helpers import single_node_model
from tests.ops.kernel_checks import check
from tests.ops.template_checks import check_template
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget

NLL = "NegativeLogLikelihoodLoss"
SCE = "SoftmaxCrossEntropyLoss"
REDUCTIONS = ["none", "sum", "mean"]
SHAPES = [(5, 4), (3, 5, 7), (2, 3, 4, 5), (2, 4, 3, 2, 3)]  # [N, C, D1, ...], ranks 2 to 5
TOL = {"rtol": 1e-5, "atol": 1e-5}
CUDA = LoweringTarget(kind="cuda")


def case(rng, shape, ignore=None, dtype=np.float32, target_dtype=np.int64):
    """Scores and targets (every third one `ignore` when given)."""
    x = rng.standard_normal(shape).astype(dtype)
    target = rng.integers(0, shape[1], (shape[0], *shape[2:])).astype(target_dtype)
    if ignore is not None:
        target.reshape(-1)[::3] = ignore
    return x, target


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 1, -1])
def test_nll_loss(shape, reduction, weighted, ignore, rng):
    x, target = case(rng, shape, ignore)
    attrs = {"reduction": reduction, **({} if ignore is None else {"ignore_index": ignore})}
    weights = {"w": rng.uniform(0.5, 2.0, shape[1]).astype(np.float32)} if weighted else {}
    check(NLL, {"x": x, "t": target}, attrs, weights, opset=22, **TOL)


@pytest.mark.parametrize("opset", [12, 13, 22])
@pytest.mark.parametrize("target_dtype", [np.int32, np.int64])
def test_nll_loss_opsets_target_dtypes_and_default_reduction(opset, target_dtype, rng):
    x, target = case(rng, (4, 6, 9), ignore=9, target_dtype=target_dtype)  # ignored: no class
    check(NLL, {"x": x, "t": target}, {"ignore_index": 9}, opset=opset, **TOL)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-9)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_dtypes(dtype, tol, reduction, rng):
    """float16 sums in float32; weights share the input's dtype."""
    x, target = case(rng, (6, 5, 7), ignore=0, dtype=dtype)
    w = {"w": rng.uniform(0.5, 2.0, 5).astype(dtype)}
    check(NLL, {"x": x, "t": target}, {"reduction": reduction, "ignore_index": 0}, w, opset=22,
          rtol=tol, atol=tol)  # fmt: skip


def test_nll_loss_every_target_ignored_is_nan_for_mean(rng):
    """mean divides by the taken weights: 0/0, as onnxruntime gives; sum is 0."""
    x = rng.standard_normal((3, 4)).astype(np.float32)
    target = np.full(3, 2, np.int64)
    for reduction in ("mean", "sum"):
        check(NLL, {"x": x, "t": target}, {"reduction": reduction, "ignore_index": 2}, opset=22)


def test_nll_loss_runtime_weights_epilogue_and_parallel(rng):
    x, target = case(rng, (8, 10, 30), ignore=3)
    w = rng.uniform(0.5, 2.0, 10).astype(np.float32)
    check(NLL, {"x": x, "t": target, "w": w}, {"ignore_index": 3}, opset=22, **TOL)
    for reduction in REDUCTIONS:
        attrs = {"reduction": reduction, "ignore_index": 3}
        check_template(NLL, {"x": x, "t": target}, attrs, {"w": w}, opset=22,
                       config={"parallel_min_elements": 1}, **TOL)  # fmt: skip
    x, target = case(rng, (4, 100, 64, 64))  # 16384 terms in one sum
    check(NLL, {"x": x, "t": target}, {"reduction": "sum"}, opset=22, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 2])
def test_softmax_cross_entropy_loss(shape, reduction, weighted, ignore, rng):
    x, target = case(rng, shape, ignore)
    attrs = {"reduction": reduction, **({} if ignore is None else {"ignore_index": ignore})}
    weights = {"w": rng.uniform(0.5, 2.0, shape[1]).astype(np.float32)} if weighted else {}
    check(SCE, {"x": x, "t": target}, attrs, weights, opset=13, expect=NLL, **TOL)


@pytest.mark.parametrize("opset", [12, 13])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_softmax_cross_entropy_loss_log_prob_output(opset, reduction, rng):
    """The optional second output is the LogSoftmax the loss is built on."""
    x, target = case(rng, (3, 5, 4, 2), ignore=-5)
    attrs = {"reduction": reduction, "ignore_index": -5}
    check(SCE, {"x": x, "t": target}, attrs, num_outputs=2, opset=opset, expect=NLL, **TOL)
    x16 = x.astype(np.float16)
    check(SCE, {"x": x16, "t": target}, attrs, num_outputs=2, opset=opset, expect=NLL,
          rtol=3e-3, atol=3e-3)  # fmt: skip


def test_losses_interpreted_and_for_cuda(rng):
    x, target = case(rng, (4, 5, 6, 3), ignore=1)
    w = {"w": rng.uniform(0.5, 2.0, 5).astype(np.float32)}
    for reduction in REDUCTIONS:
        attrs = {"reduction": reduction, "ignore_index": 1}
        check(NLL, {"x": x, "t": target}, attrs, w, opset=22, use_interpreter=True, **TOL)
        check(NLL, {"x": x, "t": target}, attrs, w, opset=22, target=CUDA, **TOL)
        check(SCE, {"x": x, "t": target}, attrs, num_outputs=2, opset=13, expect=NLL,
              target=CUDA, **TOL)  # fmt: skip
    x, target = case(rng, (16, 10, 40))  # 640 terms: a block of threads folds them
    check(NLL, {"x": x, "t": target}, {"reduction": "mean"}, opset=22, target=CUDA, **TOL)


def random_inputs(rng, x_shape, t_shape):
    return {
        "x": rng.standard_normal(x_shape).astype(np.float32),
        "t": rng.integers(0, 3, t_shape).astype(np.int64),
    }


@pytest.mark.parametrize(
    "op,x_shape,t_shape,attrs,consts,match",
    [
        (NLL, (4, 3), (4,), {"reduction": "avg"}, {},
         r"NegativeLogLikelihoodLoss node.*reduction 'avg' is not one of none, sum, mean"),
        (NLL, (4, 3, 5), (4, 3), {}, {},
         r"target of shape \[4, 3\] does not match input \[4, 3, 5\]"),
        (NLL, (4, 3), (4,), {}, {"w": (4,)}, r"weight must be \[3\] \(one per class\)"),
        (NLL, (4,), (4,), {}, {}, r"needs an \[N,C,D1,...\] input, got \[4\]"),
        (SCE, (4,), (4,), {}, {}, r"SoftmaxCrossEntropyLoss node.*scores must be \[N,C,D1"),
        (SCE, (4, 3), (4,), {"reduction": "max"}, {}, "reduction 'max' is not one of"),
    ],
)  # fmt: skip
def test_loss_errors_name_the_node(op, x_shape, t_shape, attrs, consts, match, rng):
    constants = {k: rng.standard_normal(s).astype(np.float32) for k, s in consts.items()}
    model = single_node_model(op, random_inputs(rng, x_shape, t_shape), attrs, constants, opset=13)
    with pytest.raises(ModelError, match=match):
        convert_model(model)


@pytest.mark.parametrize("op,match", [(NLL, "has input size 1 not in range"),
                                      (SCE, "has input size 1 not in range")])  # fmt: skip
def test_losses_without_a_target_are_model_errors(op, match, rng):
    model = single_node_model(op, {"x": rng.standard_normal((4, 3)).astype(np.float32)}, opset=13)
    with pytest.raises(ModelError, match=f"{op} node.*{match}"):
        convert_model(model)


def test_constant_targets_out_of_range_fold_to_a_model_error(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    consts = {"x": x, "t": np.array([0, 3], np.int64)}
    model = single_node_model(NLL, {}, {"reduction": "sum"}, consts, opset=13)
    with pytest.raises(ModelError, match=r"NegativeLogLikelihoodLoss node.*out of range \[0, 3\)"):
        convert_model(model)
