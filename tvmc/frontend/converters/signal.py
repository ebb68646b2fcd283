"""Converters of the signal ops: DFT and STFT become one MatMul with a constant matrix of
twiddle factors (the transform is linear: a tuned GEMM on every target, exact in its float64
coefficients rounded once); the window functions and MelWeightMatrix, whose sizes decide their
shapes, are constants computed here.

Complex values are a trailing axis of 2 (real, imaginary) as in ONNX; a real signal has 1.
A transform of length n costs n times the output's length in multiply-adds (no FFT), which
suits the frame sizes of audio models (a few hundred to a few thousand samples).
"""

from __future__ import annotations

import math

import numpy as np

from tvmc.frontend.context import ConvertContext, OnnxNode, onnx_dtype
from tvmc.frontend.converters.registry import converter
from tvmc.ops.common import FLOAT_DTYPES, normalize_axis


def _angles(rows: int, cols: int, length: int, sign: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sign * sin of 2 pi j k / length, j < rows, k < cols; j k reduced mod length first
    so that large products keep float64's accuracy."""
    jk = (np.arange(rows)[:, None] * np.arange(cols)[None, :]) % length
    theta = 2 * np.pi * jk / length
    return np.cos(theta), sign * np.sin(theta)


def dft_matrix(
    n: int, channels: int, length: int, inverse: bool, onesided: bool
) -> tuple[np.ndarray, int, int]:
    """(matrix (n * channels, m * out channels), m, out channels) of the DFT along an axis of n
    samples padded or cut to `length`: x flattened over (sample, channel) times it is the result.
    """
    sign = 1 if inverse else -1
    used = min(n, length)  # samples past `length` are cut: their rows stay 0
    if inverse and onesided:  # irfft: Hermitian half spectrum in, `length` real samples out
        bins = min(used, length // 2 + 1)
        cos, sin = _angles(bins, length, length, sign)
        twice = np.full((bins, 1), 2.0)
        twice[0] = 1.0
        if length % 2 == 0 and bins > length // 2:
            twice[length // 2] = 1.0
            sin[length // 2] = 0.0  # its imaginary part is dropped, as numpy's irfft does
        sin[0] = 0.0
        w = np.zeros((n, channels, length))
        w[:bins, 0] = twice * cos / length
        if channels == 2:
            w[:bins, 1] = -twice * sin / length
        return w.reshape(n * channels, length), length, 1
    m = length // 2 + 1 if onesided else length
    cos, sin = _angles(used, m, length, sign)
    w = np.zeros((n, channels, m, 2))
    w[:used, 0, :, 0], w[:used, 0, :, 1] = cos, sin  # (a + ib)(cos + i sin): a's share
    if channels == 2:
        w[:used, 1, :, 0], w[:used, 1, :, 1] = -sin, cos
    if inverse:
        w /= length
    return w.reshape(n * channels, m * 2), m, 2


def _along_last_but_one(ctx: ConvertContext, x: str, axis: int, ndim: int) -> tuple[str, list]:
    """`x` with `axis` moved next to the trailing (complex) axis, and the permutation back."""
    if axis == ndim - 2:
        return x, []
    perm = [a for a in range(ndim - 1) if a != axis] + [axis, ndim - 1]
    (moved,) = ctx.add("Transpose", [x], {"perm": tuple(perm)})
    return moved, [perm.index(a) for a in range(ndim)]


def transform(ctx: ConvertContext, x: str, matrix: np.ndarray, m: int, out_channels: int,
              outputs: list[str] | None = None) -> list[str]:  # fmt: skip
    """x (..., n, channels) times `matrix`: (..., m, out_channels)."""
    t = ctx.type(x)
    lead = t.shape[:-2]
    (flat,) = ctx.add("Reshape", [x], {"shape": (math.prod(lead), t.shape[-2] * t.shape[-1])})
    (y,) = ctx.add("MatMul", [flat, ctx.add_const(matrix.astype(t.dtype))])
    return ctx.add("Reshape", [y], {"shape": (*lead, m, out_channels)}, outputs=outputs)


def _float_signal(ctx: ConvertContext, node: OnnxNode, index: int = 0) -> tuple:
    t = ctx.type(node.inputs[index])
    if t.dtype not in FLOAT_DTYPES or t.ndim < 2 or t.shape[-1] not in (1, 2):
        raise ValueError(f"{node.op_type} needs a float signal (..., 1 or 2), got {t}")
    return t


@converter("DFT")
def DFT(ctx: ConvertContext, node: OnnxNode) -> None:
    t = _float_signal(ctx, node)
    axis = node.attrs.get("axis", 1)
    if ctx.opset >= 20:  # the axis became an input
        axis = int(ctx.require_const(node, 2, "axis")) if node.input(2) else -2
    axis = normalize_axis(axis, t.ndim, "DFT")
    if axis == t.ndim - 1:
        raise ValueError("DFT axis cannot be the last (complex) axis")
    inverse, onesided = bool(node.attrs.get("inverse", 0)), bool(node.attrs.get("onesided", 0))
    n = t.shape[axis]
    length = 2 * (n - 1) if inverse and onesided else n
    if node.input(1):
        length = int(ctx.require_const(node, 1, "dft_length"))
    if length < 1:
        raise ValueError(f"DFT length {length} must be positive")
    if inverse and onesided and t.shape[-1] != 2:
        raise ValueError("an inverse one-sided DFT needs a complex (..., 2) input")
    moved, back = _along_last_but_one(ctx, node.inputs[0], axis, t.ndim)
    matrix, m, out_channels = dft_matrix(n, t.shape[-1], length, inverse, onesided)
    if not back:
        transform(ctx, moved, matrix, m, out_channels, outputs=node.outputs)
        return
    (y,) = transform(ctx, moved, matrix, m, out_channels)
    ctx.add("Transpose", [y], {"perm": tuple(back)}, outputs=node.outputs)


@converter("STFT")
def STFT(ctx: ConvertContext, node: OnnxNode) -> None:
    """Frames gathered (batch, frames, frame_length, channels), weighted by the window (folded
    into the matrix when constant), then one DFT of each frame."""
    t = _float_signal(ctx, node)
    if t.ndim != 3:
        raise ValueError(f"STFT needs a signal (batch, length, 1 or 2), got {t}")
    step = int(ctx.require_const(node, 1, "frame_step"))
    window = ctx.const(node.input(2)) if node.input(2) else None
    if node.input(3):
        frame = int(ctx.require_const(node, 3, "frame_length"))
    elif node.input(2):
        frame = ctx.type(node.input(2)).shape[0]
    else:
        raise ValueError("STFT needs a window or a frame_length")
    if node.input(2) and ctx.type(node.input(2)).shape != (frame,):
        raise ValueError(f"STFT window {ctx.type(node.input(2))} must hold frame_length {frame}")
    onesided = bool(node.attrs.get("onesided", 1))
    if onesided and t.shape[-1] == 2:
        raise ValueError("a one-sided STFT needs a real signal")
    if step < 1 or not 1 <= frame <= t.shape[1]:
        raise ValueError(f"STFT frame_step {step} and frame_length {frame} do not fit {t}")
    frames = 1 + (t.shape[1] - frame) // step
    starts = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    (framed,) = ctx.add("Gather", [node.inputs[0], ctx.add_const(starts.astype(np.int64))],
                        {"axis": 1})  # fmt: skip
    matrix, m, out_channels = dft_matrix(frame, t.shape[-1], frame, False, onesided)
    if window is not None:  # row (j, channel) of the matrix scales sample j
        matrix = matrix * np.repeat(window.astype(np.float64), t.shape[-1])[:, None]
    elif node.input(2):
        (shaped,) = ctx.add("Reshape", [node.input(2)], {"shape": (frame, 1)})
        (framed,) = ctx.add("Mul", [framed, shaped])
    transform(ctx, framed, matrix, m, out_channels, outputs=node.outputs)


# ---- constants: windows and the mel filter bank ----------------------------------------------
_WINDOWS = {  # coefficients of cos(2 pi k n / N), k = 0, 1, 2
    "HannWindow": (0.5, -0.5, 0.0),
    "HammingWindow": (25 / 46, -21 / 46, 0.0),
    "BlackmanWindow": (0.42, -0.5, 0.08),
}


def window(op: str, size: int, periodic: bool) -> np.ndarray:
    """The generalized cosine window of `op`, periodic (N = size) or symmetric (N = size - 1);
    a symmetric window of one sample is 1, as in numpy and PyTorch (onnxruntime gives NaN)."""
    n, span = np.arange(size), size if periodic else size - 1
    if span == 0:
        return np.ones(size)
    a0, a1, a2 = _WINDOWS[op]
    angle = 2 * np.pi * n / span
    return a0 + a1 * np.cos(angle) + a2 * np.cos(2 * angle)


def _output_dtype(node: OnnxNode) -> str:
    dtype = onnx_dtype(node.attrs.get("output_datatype", 1), f"{node.describe()} output_datatype")
    return dtype


@converter(*_WINDOWS)
def Window(ctx: ConvertContext, node: OnnxNode) -> None:
    size = int(ctx.require_const(node, 0, "size"))
    if size < 0:
        raise ValueError(f"window size {size} is negative")
    values = window(node.op_type, size, bool(node.attrs.get("periodic", 1)))
    ctx.add_const(values.astype(_output_dtype(node)), node.outputs[0])


def mel_weight_matrix(bins: int, dft_length: int, rate: int, low: float, high: float) -> np.ndarray:
    """(dft_length // 2 + 1, bins) triangular filters on the mel scale, as ONNX's reference and
    onnxruntime compute them (bin edges floored to DFT bins)."""
    edges = np.arange(bins + 2)
    low_mel = 2595 * np.log1p(low / 700) / np.log(10)
    high_mel = 2595 * np.log1p(high / 700) / np.log(10)
    hertz = 700 * np.expm1(
        (edges * ((high_mel - low_mel) / (bins + 2)) + low_mel) / 2595 * np.log(10)
    )
    points = (((dft_length + 1) * hertz) // rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, bins))
    for i in range(bins):
        left, centre, right = points[i : i + 3]
        if centre == left:
            out[centre, i] = 1
        else:
            out[left : centre + 1, i] = (np.arange(left, centre + 1) - left) / (centre - left)
        if right > centre:
            out[centre:right, i] = (right - np.arange(centre, right)) / (right - centre)
    return out


@converter("MelWeightMatrix")
def MelWeightMatrix(ctx: ConvertContext, node: OnnxNode) -> None:
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    bins, length, rate, low, high = (ctx.require_const(node, i, what).item()
                                     for i, what in enumerate(names))  # fmt: skip
    if bins < 1 or length < 1 or rate <= 0 or not 0 <= low < high:
        raise ValueError(f"MelWeightMatrix needs positive sizes and rate and 0 <= lower < upper "
                         f"edge, got {bins}, {length}, {rate}, {low}, {high}")  # fmt: skip
    matrix = mel_weight_matrix(int(bins), int(length), rate, low, high)
    ctx.add_const(matrix.astype(_output_dtype(node)), node.outputs[0])
