"""The objects users hold: `TVMCModel`, `TVMCPackage`, `TVMCResult`, and their methods.

The methods that run a step (`model.compile`, `model.tune`, `package.run`) call the step modules
below (`package.compile_graph`, `tuning.tune_graph`, `runner.execute`), which work on graphs,
package contents and executors and never import this module: the objects sit above the steps, so
each step is imported one way. `tvmc.driver.api` (load, compile, run, tune) sits above both.
`TVMCModel`'s methods import their step when called: running a package (`TVMCPackage`,
`TVMCResult`) loads neither the ONNX frontend, the compile pipeline nor the tuner.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from tvmc.codegen.host import is_host_arch
from tvmc.codegen.threads import set_num_threads
from tvmc.driver.runner import check_device, check_run_options, execute, make_inputs
from tvmc.errors import UsageError, did_you_mean
from tvmc.graph import Graph, TensorType
from tvmc.runtime import Executor, ProgramInfo, Timings
from tvmc.runtime.cuda import CUDAExecutor
from tvmc.runtime.package import PackageContents, load_cuda, load_module, read_package
from tvmc.runtime.timing import PERCENTILES

if TYPE_CHECKING:
    from tvmc.driver.package import CompiledPackage
    from tvmc.driver.pipeline import PassTime
    from tvmc.driver.tune_options import TuneOptions
    from tvmc.driver.tuning_report import TuningProgress


class TVMCModel:
    """A loaded model: the graph IR (static shapes) and its constant params.

    `TVMCModel(model_path="model.tvmc")` (TVMC's form) loads a saved model, or an ONNX file as
    `tvmc.load` does; `TVMCModel(graph)` wraps a graph already made."""

    def __init__(
        self,
        graph: Graph | None = None,
        source: str | None = None,
        load_seconds: float = 0.0,
        load_times: list[PassTime] | None = None,
        *,
        model_path: str | os.PathLike[str] | None = None,
    ):
        if graph is not None and model_path is not None:
            raise UsageError("TVMCModel takes a graph or model_path=, not both")
        if graph is None and model_path is None:
            raise UsageError("TVMCModel needs a graph or model_path= (a saved .tvmc model or an "
                             "ONNX file)")  # fmt: skip
        if model_path is not None:
            from tvmc.driver.model import load_graph  # the frontend only when a file is loaded

            start, load_times = time.perf_counter(), []
            source = os.fspath(model_path)
            graph = load_graph(source, times=load_times)
            load_seconds = time.perf_counter() - start
        assert graph is not None
        self.graph = graph
        self.source = source
        self.load_seconds = load_seconds
        self.load_times = list(load_times or [])  # the passes of loading, when timed

    @property
    def params(self) -> dict[str, np.ndarray]:
        """The constants by name."""
        return self.graph.params

    @property
    def inputs(self) -> dict[str, TensorType]:
        """Runtime inputs by name, in the model's order."""
        return {name: self.graph.types[name] for name in self.graph.inputs}

    @property
    def outputs(self) -> dict[str, TensorType]:
        """Outputs by the model's own names."""
        return {name: self.graph.types[name] for name in self.graph.outputs}

    def summary(self) -> str:
        """Inputs, outputs, op counts and the graph listing, as text."""
        lines = [f"model {self.graph.name}" + (f" (from {self.source})" if self.source else "")]
        lines += [f"  input  {name}: {typ}" for name, typ in self.inputs.items()]
        lines += [f"  output {name}: {typ}" for name, typ in self.outputs.items()]
        counts = ", ".join(f"{op} x{n}" for op, n in self.graph.op_counts().items())
        lines.append(f"  {len(self.graph.nodes)} nodes: {counts}")
        lines.append(f"  {len(self.params)} params, {self.graph.param_bytes() / 1e6:.2f} MB")
        return "\n".join(lines) + "\n\n" + self.graph.dump()

    def save(self, path: str, force: bool = False) -> str:
        """Write the model as a tar (graph.json, params.npz, metadata.json); returns the path.

        An existing file is replaced only if it is a saved model other than this one's source,
        or if `force`."""
        from tvmc.driver.model import SAVED_MODEL_FORMAT, save_graph
        from tvmc.driver.outputs import check_output

        check_output(path, SAVED_MODEL_FORMAT, {"the model": self.source}, force)
        return save_graph(self.graph, path)

    @classmethod
    def load(cls, path: str) -> TVMCModel:
        """Read a model written by `save`."""
        from tvmc.driver.model import read_saved_graph

        start = time.perf_counter()
        graph = read_saved_graph(path)
        return cls(graph, source=path, load_seconds=time.perf_counter() - start)

    def compile(
        self, target: str = "llvm", package_path: str | None = None, **options: Any
    ) -> TVMCPackage:
        """`tvmc.compile(self, target, package_path, **options)`: a TVMCPackage."""
        from tvmc.driver.package import compile_graph

        return TVMCPackage._compiled(
            compile_graph(self.graph, self.source, target, package_path, **options)
        )

    def tune(
        self,
        target: str | None = None,
        tuning_records: str | os.PathLike[str] | None = None,
        trials: int | None = None,
        *,
        options: TuneOptions | None = None,
        progress: TuningProgress | None = None,
        measurer: Any = None,
        **keywords: Any,
    ) -> str:
        """`tvmc.tune(self, target, tuning_records, trials, options=..., **keywords)`: the
        records path."""
        from tvmc.driver.tune_options import tune_options
        from tvmc.driver.tuning import tune_graph

        chosen = tune_options(options, target=target, trials=trials, **keywords)
        return tune_graph(self.graph, tuning_records, chosen, progress, measurer, self.source)

    def __repr__(self) -> str:
        return f"TVMCModel({self.graph.name!r}, {len(self.graph.nodes)} nodes)"


class TVMCPackage:
    """A compiled model package (a .tar): its metadata, and its code loaded once to run."""

    def __init__(self, package_path: str | os.PathLike[str], use_shared_library: bool = True):
        self.package_path = os.fspath(package_path)
        self.use_shared_library = use_shared_library  # False: load mod.o without a linker
        self.dumps: dict[str, str] = {}  # --dump-code files written by compile_model
        start = time.perf_counter()
        self._contents = read_package(self.package_path)
        self._read_seconds = time.perf_counter() - start
        self._executor: Executor | CUDAExecutor | None = None
        self.load_seconds: float | None = None  # read + code loaded, once executor() has run

    @classmethod
    def _written(cls, path: str, contents: PackageContents) -> TVMCPackage:
        """The package compile_model just wrote, without reading it back."""
        package = cls.__new__(cls)
        package.package_path, package.use_shared_library = path, True
        package.dumps, package._contents, package._executor = {}, contents, None
        package._read_seconds, package.load_seconds = 0.0, None  # in memory: nothing to read
        return package

    @classmethod
    def _compiled(cls, compiled: CompiledPackage) -> TVMCPackage:
        """The package `compile_graph` wrote; a temporary one lives as long as the object."""
        package = cls._written(compiled.path, compiled.contents)
        package.dumps = dict(compiled.dumps)
        if compiled.temp_dir is not None:
            weakref.finalize(package, shutil.rmtree, compiled.temp_dir, True)
        return package

    @property
    def metadata(self) -> dict[str, Any]:
        """The parsed metadata.json."""
        return self._contents.metadata

    @property
    def inputs(self) -> dict[str, TensorType]:
        """Runtime inputs by the model's names, in order."""
        return _types(self.metadata["inputs"])

    @property
    def outputs(self) -> dict[str, TensorType]:
        """Outputs by the model's names, in order."""
        return _types(self.metadata["outputs"])

    @property
    def device(self) -> str:
        """Where the package's code runs: "cpu" or "cuda"."""
        return self._contents.device

    @property
    def program(self) -> ProgramInfo:
        """The entry function's plan (mod.json)."""
        return self._contents.program

    def executor(self) -> Executor | CUDAExecutor:
        """The loaded code with its params bound (loaded on first use, then reused).

        A CUDA package loads on the GPU: device memory, kernels and the CUDA graph, once.
        """
        if self._executor is None:
            start = time.perf_counter()
            contents = self._contents
            if contents.device == "cuda":
                self._executor = load_cuda(self.package_path, contents)
            else:
                module = load_module(self.package_path, contents, self.use_shared_library)
                self._executor = Executor(module, contents.program, contents.params)
            self.load_seconds = self._read_seconds + time.perf_counter() - start
        return self._executor

    def run(
        self,
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
        *,
        warmup: int = 1,
        duration: float = 0.0,
    ) -> TVMCResult:
        """`tvmc.run(self, ...)`: run once on `device` (the one compiled for); optionally time
        and profile. `end_to_end`: on cuda, timings include copying inputs in and outputs out.
        `warmup`: untimed runs before timing; `duration`: keep measuring until this many
        seconds have passed (at least `repeat` measurements)."""
        check_run_options(device, repeat, number, min_repeat_ms, num_threads, warmup, duration)
        check_device(self.device, device, self.metadata["target"], self.package_path)
        arrays = make_inputs(self.inputs, inputs, fill_mode)
        if num_threads is not None:
            set_num_threads(num_threads)  # process-wide, like TVMC_NUM_THREADS
        cold = self._executor is None
        executor = self.executor()
        outputs, times, rows = execute(
            executor, [arrays[name] for name in self.inputs], self.outputs, benchmark,
            repeat, number, min_repeat_ms, profile, end_to_end,
            warmup=warmup, duration=duration, load_seconds=self.load_seconds,
        )  # fmt: skip
        if times is not None and not cold:  # loaded and run before: no cold start to report
            times = dataclasses.replace(times, load_seconds=None, first_seconds=None)
        return TVMCResult(outputs, times, rows)

    def summary(self) -> dict[str, Any]:
        """What `tvmc compile --format json` prints: the package at a glance."""
        meta = self.metadata
        return {
            "package": self.package_path,
            "device": self.device,
            "target": meta["target"],
            "triple": meta["triple"],
            "cpu": meta["cpu"],
            "inputs": {
                e["name"]: {"shape": e["shape"], "dtype": e["dtype"]} for e in meta["inputs"]
            },
            "outputs": {
                e["name"]: {"shape": e["shape"], "dtype": e["dtype"]} for e in meta["outputs"]
            },
            "nodes": meta.get("nodes"),
            "kernels": meta.get("kernels"),
            "calls": meta.get("calls"),
            "images": self.program.images,
            "workspace_bytes": meta["workspace_bytes"],
            "image_workspace_bytes": (
                self.program.workspace_bytes if self.program.images > 1 else None
            ),  # fmt: skip
            "naive_bytes": meta["naive_bytes"],
            "heap_scratch_bytes": meta.get("heap_scratch_bytes"),
            "heap_scratch_threads": meta.get("heap_scratch_threads"),
            "param_bytes": meta.get("param_bytes"),
            "shared_library": self._contents.shared_library is not None,
            "cross": self.device == "cpu" and not is_host_arch(meta["triple"]),
            "compile_seconds": meta.get("compile_seconds", {}),
            "pass_seconds": meta.get("pass_seconds", []),
            "tuning": meta.get("tuning"),
            "dumps": dict(self.dumps),
        }

    def __repr__(self) -> str:
        return f"TVMCPackage({self.package_path!r}, target={self.metadata['target']!r})"


def _types(entries: list[dict[str, Any]]) -> dict[str, TensorType]:
    return {e["name"]: TensorType(tuple(e["shape"]), e["dtype"]) for e in entries}


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
        self.profile = profile or []  # one row per kernel call, in run order
        self.worker: str | None = None  # the Dask worker a remote run ran on (None: here)

    @property
    def profile_nodes(self) -> list[dict[str, Any]]:
        """The profile summed per model node (ONNX name, op type, shapes), its kernels listed."""
        from tvmc.driver.profile import node_rows

        return node_rows(self.profile)

    def format_times(self) -> str:
        """TVMC's table (`Execution time summary:`, then mean/median/max/min/std in ms), then
        percentiles, throughput, load and first-inference times."""
        if self.times is None:
            raise UsageError("no timings: run with benchmark=True (--print-time)")
        t = self.times
        return (
            "Execution time summary:\n"
            f"{'mean (ms)':^12} {'median (ms)':^12} {'max (ms)':^12} "
            f"{'min (ms)':^12} {'std (ms)':^12}\n"
            f"{t.mean:^12.4f} {t.median:^12.4f} {t.max:^12.4f} {t.min:^12.4f} {t.std:^12.4f}"
            "               \n" + format_more_times(t)
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
            "profile_nodes": self.profile_nodes,
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


def format_more_times(t: Timings) -> str:
    """What trtexec and benchmark_app print beyond TVMC's table, in the same column style."""
    heads = [f"p{q} (ms)" for q in PERCENTILES] + ["inferences/s"]
    values = [t.percentile(q) for q in PERCENTILES] + [t.throughput]
    lines = [" ".join(f"{h:^12}" for h in heads), " ".join(f"{v:^12.4f}" for v in values)]
    cold = []
    if t.load_seconds is not None:
        cold.append(f"load {t.load_seconds * 1e3:.2f} ms")
    if t.first_seconds is not None:
        cold.append(f"first inference {t.first_seconds * 1e3:.4f} ms")
    runs = "run" if t.warmup == 1 else "runs"
    cold.append(f"{t.warmup} warm-up {runs}, {t.runs} timed in {len(t.results)} measurements "
                f"over {t.seconds:.3f} s")  # fmt: skip
    if len(t.thread_runs) > 1:  # the executor took fewer threads on some runs: say so
        (full, on_full), *rest = t.thread_runs
        fewer = ", ".join(f"{r} on {n}" for n, r in rest)
        cold.append(f"runs on {full} threads {on_full}, {fewer} (tried, and kept while faster; "
                    f"TVMC_ADAPTIVE_THREADS=0: always {full})")  # fmt: skip
    return "\n".join([*lines, ", ".join(cold)])
