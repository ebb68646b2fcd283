"""Small Programs with GPU-bound loops for the CUDA backend's tests (no op lowers for CUDA yet)."""

from __future__ import annotations

import numpy as np

from tests.kernel.examples import gpu_row_sum
from tvmc.kernel import Buffer, Kernel, Stmt, Var, nest
from tvmc.kernel.program import Call, Program, ProgramBuffer

ROWS, COLS, THREADS = 6, 256, 64


def bias_rowsum_program() -> Program:
    """y[r] = sum_c(x[r, c] + b[c]): a bias kernel into the workspace, then a shared-memory sum."""
    x, b, t = Buffer("X", (ROWS, COLS)), Buffer("B", (COLS,)), Buffer("T", (ROWS, COLS))

    def point(r: Var, c: Var) -> Stmt:
        return t.store((r, c), x[r, c] + b[c])

    axes = [("r", ROWS, "blockIdx.x"), ("c", COLS, "threadIdx.x")]
    bias = Kernel("bias_add", (x, b, t), nest(axes, point))
    rowsum = gpu_row_sum(ROWS, COLS, THREADS).kernel
    buffers = {
        "x": ProgramBuffer("x", (ROWS, COLS), "float32", "input", 0),
        "y": ProgramBuffer("y", (ROWS,), "float32", "output", 0),
        "b": ProgramBuffer("b", (COLS,), "float32", "param", 0),
        "t": ProgramBuffer("t", (ROWS, COLS), "float32", "workspace", offset=0),
    }
    calls = [
        Call("bias_add", ("x", "b", "t"), "Add", ROWS * COLS),
        Call("gpu_rowsum", ("t", "y"), "ReduceSum", ROWS * COLS),
    ]
    program = Program([bias, rowsum], buffers, calls, ["x"], ["y"], ["b"], ROWS * COLS * 4)
    program.validate()
    return program


def bias_rowsum_reference(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What bias_rowsum_program computes, in float64."""
    return (x.astype(np.float64) + b).sum(axis=1)


def bias_rowsum_params(seed: int = 0) -> dict[str, np.ndarray]:
    """The program's one param, `b`."""
    return {"b": np.random.default_rng(seed).standard_normal(COLS).astype(np.float32)}
