"""AffineGrid: the sampling grid of an affine transform (GridSample's usual companion); a compute.

`size` (N, C, spatial...) is resolved by the frontend. Every output position is theta times the
homogeneous normalized coordinate of its pixel: (x, y[, z], 1), x being the last spatial axis.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, IntImm
from tvmc.ops.common import FLOAT_DTYPES
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef
from tvmc.ops.registry import REQUIRED

AFFINE_GRID_ATTRS = {"size": REQUIRED, "align_corners": 0}


def affine_grid_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (theta,) = types
    size = list(attrs["size"])
    k = len(size) - 2
    if k not in (2, 3) or any(s < 1 for s in size):
        raise ValueError(f"AffineGrid size {size} must be (N, C, H, W) or (N, C, D, H, W)")
    if theta.shape != (size[0], k, k + 1):
        raise ValueError(
            f"AffineGrid theta {list(theta.shape)} must be [{size[0]}, {k}, {k + 1}] "
            f"for size {size}"
        )
    if theta.dtype not in FLOAT_DTYPES:
        raise ValueError(f"AffineGrid takes a float theta, got {theta.dtype}")
    return [TensorType((size[0], *size[2:], k), theta.dtype)]


def base_coordinates(size: int, align_corners: bool) -> np.ndarray:
    """Normalized coordinates of the pixels along one axis: centres (or corners) in [-1, 1].

    With align_corners a single pixel sits at 1, as in onnxruntime (the ONNX function gives -1,
    PyTorch 0: the corners of a one-pixel axis are undefined)."""
    i = np.arange(size, dtype=np.float64)
    if align_corners:
        return i * (2.0 / (size - 1)) - 1 if size > 1 else np.ones(size)
    return (2 * i + 1) / size - 1


def affine_grid(attrs, theta):
    """grid[n, ..., j] = theta[n, j] . (x, y[, z], 1)."""
    spatial = attrs["size"][2:]
    axes = [base_coordinates(s, attrs["align_corners"]) for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    homogeneous = np.stack([*mesh[::-1], np.ones_like(mesh[0])], axis=-1)  # (..., k + 1)
    work = np.float64 if theta.dtype == np.float64 else np.float32
    grid = np.einsum("...m,njm->n...j", homogeneous.astype(work), theta.astype(work))
    return grid.astype(theta.dtype)


def affine_grid_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """theta's row j times the pixel's coordinates, computed from its index."""
    (theta,) = inputs
    spatial = attrs["size"][2:]
    k = len(spatial)
    work = "float64" if theta.dtype == "float64" else "float32"

    def coordinate(i: Expr, size: int) -> Expr:
        x = i.astype(work)
        if attrs["align_corners"]:
            if size == 1:
                return literal(1, work)
            return x * literal(2.0 / (size - 1), work) - literal(1, work)
        return (x * literal(2, work) + literal(1, work)) / literal(size, work) - literal(1, work)

    def read(idx: Indices) -> Expr:
        n, pixel, j = idx[0], idx[1:-1], idx[-1]

        def t(m: int) -> Expr:
            return theta.read((n, j, IntImm(m, "int32"))).astype(work)

        total = t(k)
        for m in range(k):  # theta's column m multiplies the coordinate of axis k - 1 - m
            total = t(m) * coordinate(pixel[k - 1 - m], spatial[k - 1 - m]) + total
        return total.astype(theta.dtype)

    return [read]
