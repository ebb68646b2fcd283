"""DFT and STFT (a MatMul with a constant twiddle matrix), the window functions and
MelWeightMatrix (constants), compiled whole against onnxruntime.

Tolerances: a float32 DFT of n samples sums n products, so results agree to rtol 1e-5 with an
atol of 1e-5 per unit of the signal's size (outputs that are exactly 0 differ by rounding noise).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.frontend.decompositions import (
    assert_outputs_close,
    imported,
    run_compiled,
    run_cuda_interpreted,
    run_oracle,
)
from tests.onnx_helpers import single_node_model
from tvmc.errors import ModelError, NonConstantInputError

F32 = np.float32


def i64(value) -> np.ndarray:
    return np.array(value, np.int64)


def check(op, inputs, attrs, constants, opset, order=None, atol=1e-4, cuda=False):
    model = single_node_model(op, inputs, attrs, constants, opset=opset, input_order=order)
    run = run_cuda_interpreted if cuda else run_compiled
    assert_outputs_close(run(model, inputs), run_oracle(model, inputs), 1e-5, atol)


# ---- DFT -------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [1, 2, -2])
@pytest.mark.parametrize("channels, inverse, onesided", [(1, 0, 0), (2, 0, 0), (1, 1, 0),
                                                         (2, 1, 0), (1, 0, 1)])  # fmt: skip
def test_dft_opset_20(channels, axis, inverse, onesided, rng):
    x = rng.standard_normal((2, 12, 7, channels)).astype(F32)
    check("DFT", {"x": x}, {"inverse": inverse, "onesided": onesided}, {"axis": i64(axis)}, 20,
          order=["x", "", "axis"])  # fmt: skip


@pytest.mark.parametrize("length", [5, 12, 19])
def test_dft_length_cuts_or_pads_opset_17(length, rng):
    x = rng.standard_normal((3, 12, 2)).astype(F32)
    check("DFT", {"x": x}, {"axis": 1}, {"n": i64(length)}, 17)
    real = rng.standard_normal((2, 12, 1)).astype(F32)
    check("DFT", {"x": real}, {"axis": 1, "onesided": 1}, {"n": i64(length)}, 17)


@pytest.mark.parametrize("spectrum, length", [(7, None), (6, None), (7, 13), (5, 12), (7, 9)])
def test_inverse_one_sided_dft(spectrum, length, rng):
    """irfft: a half spectrum of `spectrum` bins to `length` real samples (default 2 (n - 1))."""
    x = rng.standard_normal((2, spectrum, 2)).astype(F32)
    constants = {"axis": i64(1)} if length is None else {"n": i64(length), "axis": i64(1)}
    order = ["x", "" if length is None else "n", "axis"]
    model = single_node_model("DFT", {"x": x}, {"inverse": 1, "onesided": 1}, constants,
                              opset=20, input_order=order)  # fmt: skip
    n = length or 2 * (spectrum - 1)
    want = np.fft.irfft(x[..., 0] + 1j * x[..., 1], n=n, axis=1)[..., None]
    assert_outputs_close(run_compiled(model, {"x": x}), [want.astype(F32)], 1e-5, 1e-5)


def test_dft_float64_and_cuda(rng):
    x = rng.standard_normal((2, 16, 2))
    check("DFT", {"x": x}, {"axis": 1}, {}, 17, atol=1e-12)
    check("DFT", {"x": x.astype(F32)}, {"axis": 1, "inverse": 1}, {}, 17, cuda=True)


def test_dft_errors_name_the_node(rng):
    x = rng.standard_normal((2, 8, 1)).astype(F32)
    last = single_node_model("DFT", {"x": x}, {}, {"axis": i64(-1)}, opset=20,
                             input_order=["x", "", "axis"])  # fmt: skip
    with pytest.raises(ModelError, match="DFT.*last \\(complex\\) axis"):
        imported(last)
    runtime_length = single_node_model("DFT", {"x": x, "n": i64(4)}, {"axis": 1}, opset=17)
    with pytest.raises(NonConstantInputError, match="dft_length"):
        imported(runtime_length)


# ---- STFT ------------------------------------------------------------------------------------
@pytest.mark.parametrize("window", ["constant", "input", None])
def test_stft(window, rng):
    signal = rng.standard_normal((2, 100, 1)).astype(F32)
    hann = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)).astype(F32)
    inputs, constants = {"signal": signal}, {"step": i64(6)}
    if window == "constant":
        constants["window"] = hann
    elif window == "input":
        inputs["window"] = hann
    else:
        constants["length"] = i64(16)
    order = ["signal", "step", "window" if window else "", "length" if not window else ""]
    check("STFT", inputs, {}, constants, 17, order=order)


def test_stft_two_sided_complex(rng):
    signal = rng.standard_normal((1, 40, 2)).astype(F32)
    constants = {"step": i64(4), "window": np.hamming(10).astype(F32), "length": i64(10)}
    check("STFT", {"signal": signal}, {"onesided": 0}, constants, 17)


# ---- windows and mel filters (constants) -----------------------------------------------------
@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [2, 3, 33])
def test_windows(op, periodic, size):
    model = single_node_model(op, {}, {"periodic": periodic}, {"size": np.array(size, np.int32)},
                              opset=17)  # fmt: skip
    (want,) = run_oracle(model, {})
    graph = imported(model)
    assert not graph.nodes  # a constant
    np.testing.assert_allclose(graph.params[graph.outputs[0]], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_one_sample_windows_are_one(op):
    """numpy and PyTorch give 1 (onnxruntime: NaN for the symmetric ones, 0 / 0)."""
    for periodic in (0, 1):
        model = single_node_model(op, {}, {"periodic": periodic},
                                  {"size": np.array(1, np.int64)}, opset=17)  # fmt: skip
        graph = imported(model)
        want = 1.0 if not periodic else run_oracle(model, {})[0][0]
        np.testing.assert_allclose(graph.params[graph.outputs[0]], [want], atol=1e-7)


def test_window_output_datatype():
    model = single_node_model("HannWindow", {}, {"output_datatype": 11},
                              {"size": np.array(8, np.int64)}, opset=17)  # fmt: skip
    graph = imported(model)
    (want,) = run_oracle(model, {})
    assert graph.params[graph.outputs[0]].dtype == np.float64 == want.dtype
    np.testing.assert_allclose(graph.params[graph.outputs[0]], want, rtol=1e-12)


@pytest.mark.parametrize("bins, length, rate, low, high",
                         [(8, 16, 8192, 0.0, 4096.0), (20, 512, 16000, 20.0, 7600.0),
                          (5, 64, 22050, 300.0, 3000.0)])  # fmt: skip
def test_mel_weight_matrix(bins, length, rate, low, high):
    constants = {"bins": np.array(bins, np.int32), "length": np.array(length, np.int32),
                 "rate": np.array(rate, np.int32), "low": np.array(low, F32),
                 "high": np.array(high, F32)}  # fmt: skip
    model = single_node_model("MelWeightMatrix", {}, {}, constants, opset=17)
    (want,) = run_oracle(model, {})
    graph = imported(model)
    np.testing.assert_allclose(graph.params[graph.outputs[0]], want, rtol=1e-6, atol=1e-7)
