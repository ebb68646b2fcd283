"""Sliding windows: the attributes, output sizes and padding that convs and pools share.

Normalized form: `kernel_shape`, `strides`, `dilations` and `pads` (begin values of every spatial
axis, then end values) are always explicit; the frontend resolves `auto_pad` (`same_pads`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tvmc.ops.registry import REQUIRED, Attrs

WINDOW_ATTRS = {
    "kernel_shape": REQUIRED,
    "strides": REQUIRED,
    "pads": REQUIRED,
    "dilations": REQUIRED,
}


def check_window_attrs(op: str, attrs: Attrs, spatial: int) -> None:
    """ValueError unless the window attributes fit `spatial` spatial axes."""
    for key, length, least in (
        ("kernel_shape", spatial, 1),
        ("strides", spatial, 1),
        ("dilations", spatial, 1),
        ("pads", 2 * spatial, 0),
    ):
        value = attrs[key]
        if len(value) != length:
            raise ValueError(
                f"{op} {key} {list(value)} needs {length} values for {spatial} spatial axes"
            )
        if any(v < least for v in value):
            raise ValueError(f"{op} {key} {list(value)} must all be >= {least}")


def window_output_size(
    size: int,
    kernel: int,
    stride: int,
    dilation: int,
    pad_begin: int,
    pad_end: int,
    ceil_mode: bool = False,
) -> int:
    """Window positions along one axis; ceil mode drops windows that start in the end padding.

    A window longer than the padded axis fits nowhere (0), but in ceil mode the first window
    still starts inside the input: one position, its overhang padded (onnxruntime's and
    PyTorch's rule, which adaptive pooling exported at a small input relies on)."""
    span = dilation * (kernel - 1) + 1
    room = size + pad_begin + pad_end - span
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1
    return max(out, 0)


def window_output_shape(
    spatial_shape: Sequence[int], attrs: Attrs, ceil_mode: bool = False
) -> list[int]:
    """Window positions along every spatial axis, by the window attributes in `attrs`."""
    k, s, d, pads = attrs["kernel_shape"], attrs["strides"], attrs["dilations"], attrs["pads"]
    n = len(spatial_shape)
    return [
        window_output_size(spatial_shape[i], k[i], s[i], d[i], pads[i], pads[i + n], ceil_mode)
        for i in range(n)
    ]


def same_pads(size: int, kernel: int, stride: int, dilation: int, mode: str) -> tuple[int, int]:
    """(begin, end) padding of auto_pad SAME_UPPER/SAME_LOWER: output size ceil(size / stride)."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + dilation * (kernel - 1) + 1 - size)
    small, large = total // 2, total - total // 2
    return (small, large) if mode == "SAME_UPPER" else (large, small)


def pad_spatial(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value=0) -> np.ndarray:
    """`x` padded (or, for negative amounts, cropped) on its trailing spatial axes."""
    lead = x.ndim - len(begin)
    crop = tuple(
        slice(max(-b, 0), x.shape[lead + i] - max(-e, 0))
        for i, (b, e) in enumerate(zip(begin, end))
    )
    x = x[(slice(None),) * lead + crop]
    widths = [(0, 0)] * lead + [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if not any(w for pair in widths for w in pair):
        return x
    return np.pad(x, widths, constant_values=value)


def windows(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
) -> np.ndarray:
    """A view (..., *out, *kernel) of every window of an already padded `x` (no copy)."""
    lead = x.ndim - len(kernel)
    spans = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilations))
    view = sliding_window_view(x, spans, axis=tuple(range(lead, x.ndim)))
    index = (slice(None),) * lead
    index += tuple(slice(0, o * s, s) for o, s in zip(out_shape, strides))
    index += tuple(slice(None, None, d) for d in dilations)
    return view[index]
