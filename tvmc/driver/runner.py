"""`run` (the fourth step): inputs in, a `TVMCResult` (outputs, timings, profile) out."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from tvmc.codegen import set_num_threads
from tvmc.driver.model import TVMCModel
from tvmc.driver.package import TVMCPackage
from tvmc.errors import InputError, UsageError, did_you_mean, unknown_choice
from tvmc.graph import TensorType
from tvmc.runtime import Timings
from tvmc.runtime.cuda import CUDAExecutor

DEVICES = ("cpu", "cuda")
FILL_MODES = ("random", "zeros", "ones")
RANDOM_SEED = 0  # random inputs are the same on every run, so results can be compared


class TVMCResult:
    """Outputs by the model's names (and `output_0`... aliases), timings and profile rows."""

    def __init__(
        self,
        outputs: Mapping[str, np.ndarray],
        times: Timings | None = None,
        profile: list[dict[str, Any]] | None = None,
    ):
        self.output_names = list(outputs)  # the model's own names, in order
        self.outputs = dict(outputs)
        for i, name in enumerate(self.output_names):
            self.outputs.setdefault(f"output_{i}", outputs[name])  # TVMC's names
        self.times = times
        self.profile = profile or []

    def format_times(self) -> str:
        """TVMC's table: `Execution time summary:`, then mean/median/max/min/std in ms."""
        if self.times is None:
            raise UsageError("no timings: run with benchmark=True (--print-time)")
        t = self.times
        return (
            "Execution time summary:\n"
            f"{'mean (ms)':^12} {'median (ms)':^12} {'max (ms)':^12} "
            f"{'min (ms)':^12} {'std (ms)':^12}\n"
            f"{t.mean:^12.4f} {t.median:^12.4f} {t.max:^12.4f} {t.min:^12.4f} {t.std:^12.4f}"
            "               "
        )

    def get_output(self, name: str) -> np.ndarray:
        """One output by its model name or its `output_<i>` alias."""
        if name not in self.outputs:
            raise UsageError(
                f"no output {name!r}; outputs: {', '.join(self.outputs)}."
                + did_you_mean(name, self.outputs)
            )
        return self.outputs[name]

    def top(self, n: int, output: str | None = None) -> list[tuple[int, float]]:
        """The `n` largest (class, value) pairs of the first batch item of an output."""
        values = self.get_output(output or self.output_names[0])
        row = values.reshape(values.shape[0], -1)[0] if values.ndim >= 2 else values.reshape(-1)
        order = np.argsort(-row.astype(np.float64), kind="stable")[: max(n, 0)]
        return [(int(i), row[i].item()) for i in order]

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the outputs (model names and aliases) to an .npz file at exactly `path`."""
        path = os.fspath(path)
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                np.savez(f, **self.outputs)
            os.replace(tmp, path)
        except OSError as exc:
            raise UsageError(f"cannot write outputs to {path!r}: {exc.strerror or exc}") from None
        return path

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        """A JSON-shaped summary: outputs' shapes and dtypes, times, profile, top classes."""
        document: dict[str, Any] = {
            "outputs": {
                name: {
                    "shape": list(self.outputs[name].shape),
                    "dtype": self.outputs[name].dtype.name,
                    "alias": f"output_{i}",
                }
                for i, name in enumerate(self.output_names)
            },
            "time": None,
            "profile": self.profile,
        }
        if self.times is not None:
            results = [round(t * 1e3, 6) for t in self.times.results]
            document["time"] = {**self.times.to_json(), "results_ms": results}
        if top:
            document["top"] = [{"class": c, "value": v} for c, v in self.top(top)]
        return document

    def __repr__(self) -> str:
        timed = f", mean {self.times.mean:.4f} ms" if self.times is not None else ""
        return f"TVMCResult(outputs={self.output_names}{timed})"


def make_inputs(
    expected: Mapping[str, TensorType],
    given: Mapping[str, Any] | str | os.PathLike[str] | None,
    fill_mode: str = "random",
) -> dict[str, np.ndarray]:
    """Every input: the given ones checked, the rest filled by `fill_mode`."""
    if fill_mode not in FILL_MODES:
        raise UsageError(unknown_choice("fill mode", fill_mode, FILL_MODES))
    if given is not None and not isinstance(given, Mapping):
        given = load_inputs(os.fspath(given))
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


def load_inputs(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz inputs file (no pickles)."""
    if not os.path.isfile(path):
        raise InputError(f"inputs file {path!r} does not exist")
    if not zipfile.is_zipfile(path):
        raise InputError(
            f"cannot read inputs file {path!r}: not an .npz archive; write one with "
            "numpy.savez(path, input_name=array, ...)"
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            if not hasattr(npz, "files"):
                raise ValueError("not an .npz archive")
            return {name: npz[name] for name in npz.files}
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"cannot read inputs file {path!r} (an .npz of arrays): {exc}") from None


def _checked(name: str, value: Any, typ: TensorType) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        value = np.asarray(value, dtype=typ.dtype)  # lists and scalars take the model's dtype
    if value.dtype != np.dtype(typ.dtype):
        raise InputError(
            f"input {name!r} is {value.dtype.name}, the model expects {typ}; "
            f"convert it with .astype({typ.dtype!r})"
        )
    if tuple(value.shape) != typ.shape:
        raise InputError(f"input {name!r} has shape {list(value.shape)}, the model expects {typ}")
    return np.ascontiguousarray(value)


def fill(typ: TensorType, fill_mode: str, rng: np.random.Generator) -> np.ndarray:
    """An input of type `typ`: zeros, ones, or random (normal floats; 0 or 1 for integers)."""
    if fill_mode == "zeros":
        return np.zeros(typ.shape, typ.dtype)
    if fill_mode == "ones":
        return np.ones(typ.shape, typ.dtype)
    kind = np.dtype(typ.dtype).kind
    if kind == "f":
        return rng.standard_normal(typ.shape).astype(typ.dtype)
    if kind == "b":
        return rng.random(typ.shape) < 0.5
    return rng.integers(0, 2, typ.shape).astype(typ.dtype)  # small: safe as indices too


def run(
    package: TVMCPackage | str | os.PathLike[str],
    device: str = "cpu",
    inputs: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    fill_mode: str = "random",
    benchmark: bool = False,
    repeat: int = 10,
    number: int = 1,
    min_repeat_ms: float = 0.0,
    profile: bool = False,
    num_threads: int | None = None,
    end_to_end: bool = False,
) -> TVMCResult:
    """Run a compiled package (or its path) once; optionally time it and profile its kernels.

    `device` must be the one the package was compiled for ("cuda" for `--target cuda`).
    `end_to_end`: on cuda, timings include copying inputs in and outputs out (by default they
    time the GPU work alone); on the CPU inputs and outputs are not copied, so it changes nothing.
    """
    if device not in DEVICES:
        raise UsageError(unknown_choice("device", device, DEVICES))
    if isinstance(package, TVMCModel):
        raise UsageError("this model is not compiled yet: run tvmc.compile(model) first")
    for value, what, low in (
        (repeat, "repeat", 1),
        (number, "number", 1),
        (min_repeat_ms, "min_repeat_ms", 0),
    ):
        if value < low:
            raise UsageError(f"{what} must be at least {low}, got {value}")
    if num_threads is not None and num_threads < 1:
        raise UsageError(f"num_threads must be at least 1, got {num_threads}")
    if not isinstance(package, TVMCPackage):
        package = TVMCPackage(package)
    if package.device != device:
        target = package.metadata["target"]
        fix = ("compile it for the GPU with --target cuda" if device == "cuda"
               else "compile it for this CPU with --target llvm")  # fmt: skip
        raise UsageError(
            f"{package.package_path!r} was compiled for {target} and runs with --device "
            f"{package.device} (device={package.device!r}); to run on {device}, {fix}"
        )
    arrays = make_inputs(package.inputs, inputs, fill_mode)
    if num_threads is not None:
        set_num_threads(num_threads)  # process-wide, like TVMC_NUM_THREADS
    executor = package.executor()
    executor.set_inputs([arrays[name] for name in package.inputs])
    raw = executor.run()
    outputs = {
        name: array.reshape(typ.shape) for (name, typ), array in zip(package.outputs.items(), raw)
    }
    times = None
    if benchmark and isinstance(executor, CUDAExecutor):
        times = executor.benchmark(number, repeat, min_repeat_ms, end_to_end=end_to_end)
    elif benchmark:
        times = executor.benchmark(number, repeat, min_repeat_ms)
    rows = profile_rows(executor.profile(repeat)) if profile else None
    return TVMCResult(outputs, times, rows)


def profile_rows(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Executor profile rows with milliseconds, share of the total and GFLOP/s."""
    total = sum(row["seconds"] for row in calls) or 1.0
    rows = []
    for row in calls:
        seconds, flops = row["seconds"], row["flops"]
        rows.append(
            {
                "node": row["node"],
                "kernel": row["kernel"],
                "time_ms": seconds * 1e3,
                "share_percent": 100.0 * seconds / total,
                "flops": flops,
                "gflops": flops / seconds / 1e9 if flops and seconds > 0 else None,
            }
        )
    return rows
