"""Running, the fourth step: inputs checked or filled, the loaded code run once, then timed and
profiled when asked.

Works on executors and tensor types (`tvmc.driver.objects.TVMCPackage.run` calls it and wraps
the outputs in a `TVMCResult`); never prints.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from tvmc.driver.npz import read_npz
from tvmc.driver.profile import profile_rows
from tvmc.dtypes import FLOATS, as_dtype, numpy_dtype
from tvmc.errors import InputError, UsageError, did_you_mean, unknown_choice
from tvmc.graph import TensorType
from tvmc.runtime import Executor, Timings
from tvmc.runtime.cuda import CUDAExecutor

DEVICES = ("cpu", "cuda")
FILL_MODES = ("random", "zeros", "ones")
RANDOM_SEED = 0  # random inputs are the same on every run, so results can be compared


def make_inputs(
    expected: Mapping[str, TensorType],
    given: Mapping[str, Any] | str | os.PathLike[str] | None,
    fill_mode: str = "random",
) -> dict[str, np.ndarray]:
    """Every input: the given ones checked, the rest filled by `fill_mode`."""
    if fill_mode not in FILL_MODES:
        raise UsageError(unknown_choice("fill mode", fill_mode, FILL_MODES))
    if given is not None and not isinstance(given, Mapping):
        given = load_inputs(os.fspath(given), expected)
    given = dict(given or {})
    described = ", ".join(f"{n} ({t})" for n, t in expected.items()) or "none"
    for name in given:
        if name not in expected:
            raise InputError(
                f"unknown input {name!r}; the model's inputs: {described}."
                + did_you_mean(name, expected)
            )
    rng = np.random.default_rng(RANDOM_SEED)
    arrays = {}
    for name, typ in expected.items():
        if name in given:
            arrays[name] = _checked(name, given[name], typ)
        else:
            arrays[name] = fill(typ, fill_mode, rng)
    return arrays


def load_inputs(
    path: str, expected: Mapping[str, TensorType] | None = None
) -> dict[str, np.ndarray]:
    """The arrays of an .npz inputs file (no pickles), checked against `expected` when given."""
    return read_npz(path, expected)


def _checked(name: str, value: Any, typ: TensorType) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        value = np.asarray(value, dtype=typ.dtype)  # lists and scalars take the model's dtype
    value = as_dtype(value, typ.dtype)  # the raw bytes .npz keeps of bfloat16, float8, int4...
    if value.dtype != numpy_dtype(typ.dtype):
        raise InputError(
            f"input {name!r} is {value.dtype.name}, the model expects {typ}; "
            f"convert it with .astype({typ.dtype!r})"
        )
    if tuple(value.shape) != typ.shape:
        raise InputError(f"input {name!r} has shape {list(value.shape)}, the model expects {typ}")
    return np.ascontiguousarray(value)


def fill(typ: TensorType, fill_mode: str, rng: np.random.Generator) -> np.ndarray:
    """An input of type `typ`: zeros, ones, or random (normal floats, powers of two for
    float8_e8m0fnu, which has neither zero nor negatives; 0 or 1 for integers)."""
    if fill_mode == "zeros":
        return np.zeros(typ.shape, typ.dtype)
    if fill_mode == "ones":
        return np.ones(typ.shape, typ.dtype)
    if typ.dtype == "float8_e8m0fnu":
        return np.exp2(rng.integers(-4, 5, typ.shape)).astype(typ.dtype)
    if typ.dtype in FLOATS:
        return rng.standard_normal(typ.shape).astype(typ.dtype)
    kind = numpy_dtype(typ.dtype).kind
    if kind == "b":
        return rng.random(typ.shape) < 0.5
    return rng.integers(0, 2, typ.shape).astype(typ.dtype)  # small: safe as indices too


def check_run_options(
    device: str,
    repeat: int,
    number: int,
    min_repeat_ms: float,
    num_threads: int | None,
    warmup: int = 1,
    duration: float = 0.0,
) -> None:
    """A UsageError for an unknown device or a count out of range."""
    if device not in DEVICES:
        raise UsageError(unknown_choice("device", device, DEVICES))
    for value, what, low in (
        (repeat, "repeat", 1),
        (number, "number", 1),
        (min_repeat_ms, "min_repeat_ms", 0),
        (warmup, "warmup", 0),
        (duration, "duration", 0),
    ):
        if not value >= low:  # NaN fails too
            raise UsageError(f"{what} must be at least {low}, got {value}")
    if duration == float("inf"):
        raise UsageError("duration must be a finite number of seconds")
    if num_threads is not None and num_threads < 1:
        raise UsageError(f"num_threads must be at least 1, got {num_threads}")


def check_device(compiled_for: str, device: str, target: str, package_path: str) -> None:
    """A UsageError when a package compiled for one device is run on the other."""
    if compiled_for != device:
        fix = ("compile it for the GPU with --target cuda" if device == "cuda"
               else "compile it for this CPU with --target llvm")  # fmt: skip
        raise UsageError(
            f"{package_path!r} was compiled for {target} and runs with --device "
            f"{compiled_for} (device={compiled_for!r}); to run on {device}, {fix}"
        )


def execute(
    executor: Executor | CUDAExecutor,
    inputs: list[np.ndarray],
    outputs: Mapping[str, TensorType],
    benchmark: bool = False,
    repeat: int = 10,
    number: int = 1,
    min_repeat_ms: float = 0.0,
    profile: bool = False,
    end_to_end: bool = False,
    *,
    warmup: int = 1,
    duration: float = 0.0,
    load_seconds: float | None = None,
) -> tuple[dict[str, np.ndarray], Timings | None, list[dict[str, Any]] | None]:
    """Run loaded code once on `inputs` (in the entry's order): (outputs by name, timings when
    `benchmark`, profile rows when `profile`). The timings carry `load_seconds` and the first
    run's time (cold: it pages code in and starts the threads)."""
    executor.set_inputs(inputs)
    start = time.perf_counter()
    raw = executor.run()
    first_seconds = time.perf_counter() - start
    arrays = {name: array.reshape(typ.shape) for (name, typ), array in zip(outputs.items(), raw)}
    times = None
    if benchmark:
        extra = {"end_to_end": end_to_end} if isinstance(executor, CUDAExecutor) else {}
        times = executor.benchmark(number, repeat, min_repeat_ms, warmup=warmup,
                                   duration=duration, **extra)  # fmt: skip
        times = dataclasses.replace(times, load_seconds=load_seconds, first_seconds=first_seconds)
    rows = profile_rows(executor.profile(repeat), executor.info) if profile else None
    return arrays, times, rows
