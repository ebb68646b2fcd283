"""The CUDA executor: a whole program's PTX on the GPU, run as one replayed CUDA graph.

Loading a package (once): the driver JIT-compiles the PTX for this GPU (cuda_jit.load_module);
device memory is planned from the program's buffers and allocated once (one allocation per
input, output and param, one for the workspace); params are uploaded once; every launch's
argument array is built once; the launches are captured on a stream as one CUDA graph.
A run copies the inputs in, replays the graph and copies the outputs out. Timings come from
CUDA events: by default the graph alone (what the GPU spends), with `end_to_end` the copies too.
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tvmc.codegen.abi import Launch
from tvmc.dtypes import numpy_dtype
from tvmc.errors import InputError
from tvmc.runtime import cuda_driver
from tvmc.runtime.cuda_driver import CUDAError, check
from tvmc.runtime.cuda_jit import load_module
from tvmc.runtime.executor import ProgramInfo, aligned_empty, bound_inputs
from tvmc.runtime.timing import Timings, measure

logger = logging.getLogger("tvmc")

STREAM_NON_BLOCKING = 1  # CU_STREAM_NON_BLOCKING: capture needs a stream other than the legacy one


class CUDAExecutor:
    """A loaded CUDA program: device memory, kernels and the captured graph, ready to run."""

    def __init__(
        self,
        ptx: str,
        info: ProgramInfo,
        launches: Sequence[Launch],
        params: Mapping[str, np.ndarray],
        use_graph: bool = True,
    ):
        self.info = info
        self.launches = list(launches)
        self.device = cuda_driver.device()
        self.drv = cuda_driver.driver()
        self._allocations: list[int] = []
        self._graph = self._graph_exec = self._module = self._stream = None
        try:
            self._load(ptx, params, use_graph)
        except BaseException:
            self.close()  # what was allocated before the failure
            raise

    # ---- loading ---------------------------------------------------------------------------------
    def _load(self, ptx: str, params: Mapping[str, np.ndarray], use_graph: bool) -> None:
        drv, info = self.drv, self.info
        self._stream = check(drv.cuStreamCreate(STREAM_NON_BLOCKING), "creating a stream")
        self._module = load_module(drv, ptx, self.device)  # errors carry the JIT's log
        names = dict.fromkeys(launch.kernel for launch in self.launches)
        self._functions = {
            name: check(drv.cuModuleGetFunction(self._module, name.encode()), f"kernel {name}")
            for name in names
        }
        self._plan_memory(params)
        self._kernel_args = [self._arguments(launch) for launch in self.launches]
        self._inputs: list[np.ndarray | None] = [None] * len(info.inputs)
        self._outputs = [aligned_empty(info.buffers[n].shape, info.buffers[n].dtype)
                         for n in info.outputs]  # fmt: skip
        if use_graph:
            self._capture()

    def _malloc(self, nbytes: int, what: str) -> int:
        address = int(check(self.drv.cuMemAlloc(max(nbytes, 1)), f"allocating {what} on the GPU"))
        self._allocations.append(address)
        return address

    def _plan_memory(self, params: Mapping[str, np.ndarray]) -> None:
        """One allocation per input, output and param, one workspace; params uploaded now."""
        info = self.info
        self.workspace = self._malloc(info.workspace_bytes, f"{info.workspace_bytes} B workspace")
        self.addresses: dict[str, list[int]] = {}
        for kind, names in (("input", info.inputs), ("output", info.outputs),
                            ("param", info.params)):  # fmt: skip
            slots = []
            for name in names:
                buf = info.buffers[name]
                slots.append(self._malloc(_nbytes(buf.shape, buf.dtype), f"{kind} {name}"))
            self.addresses[kind] = slots
        for name, address in zip(info.params, self.addresses["param"]):
            buf = info.buffers[name]
            array = np.ascontiguousarray(params[name])
            if array.dtype != numpy_dtype(buf.dtype) or array.size != _size(buf.shape):
                raise InputError(f"param {name} is {array.dtype}{list(array.shape)}, "
                                 f"the code expects {buf.dtype}{list(buf.shape)}")  # fmt: skip
            check(self.drv.cuMemcpyHtoD(address, array.ctypes.data, array.nbytes),
                  f"uploading param {name}")  # fmt: skip

    def pointer(self, name: str) -> int:
        """The device address of program buffer `name`."""
        buf = self.info.buffers[name]
        if buf.storage == "workspace":
            return self.workspace + buf.offset
        return self.addresses[buf.storage][buf.index]

    def _arguments(self, launch: Launch) -> tuple[np.ndarray, np.ndarray]:
        """cuLaunchKernel's `void **kernelParams`: pointers to each argument's device pointer."""
        values = np.array([self.pointer(a) for a in launch.args] or [0], dtype=np.uint64)
        slots = values.ctypes.data + 8 * np.arange(len(values), dtype=np.uint64)
        return values, slots  # both kept alive: the driver reads them at every direct launch

    def _launch(self, index: int) -> None:
        launch = self.launches[index]
        slots = self._kernel_args[index][1]
        check(
            self.drv.cuLaunchKernel(
                self._functions[launch.kernel], *launch.grid, *launch.block,
                launch.shared_bytes, self._stream, slots.ctypes.data if launch.args else None, 0,
            ),
            f"launching {launch.kernel} (grid {list(launch.grid)}, block {list(launch.block)})",
        )  # fmt: skip

    def _capture(self) -> None:
        """Record every launch once into a CUDA graph; a run replays it in one call."""
        drv = self.drv
        mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(drv.cuStreamBeginCapture(self._stream, mode), "starting graph capture")
        try:
            for i in range(len(self.launches)):
                self._launch(i)
        except BaseException:
            drv.cuStreamEndCapture(self._stream)  # leave capture mode; the launch error tells
            raise
        self._graph = check(drv.cuStreamEndCapture(self._stream), "ending graph capture")
        self._graph_exec = check(drv.cuGraphInstantiate(self._graph, 0), "instantiating the graph")

    # ---- running ---------------------------------------------------------------------------------
    def set_inputs(self, arrays: list[np.ndarray]) -> None:
        """Bind input arrays (by position); each run copies them to the GPU."""
        for i, array in enumerate(bound_inputs(self.info, arrays)):
            self._inputs[i] = array

    def call(self) -> None:
        """Launch the whole program on the stream (the graph, else each kernel); no sync."""
        if self._graph_exec is not None:
            check(self.drv.cuGraphLaunch(self._graph_exec, self._stream), "launching the graph")
        else:
            for i in range(len(self.launches)):
                self._launch(i)

    def _copy_in(self) -> None:
        if any(array is None for array in self._inputs):
            raise InputError("inputs are not bound; call set_inputs first")
        for array, address in zip(self._inputs, self.addresses["input"]):
            assert array is not None
            host, nbytes = array.ctypes.data, array.nbytes
            copy = self.drv.cuMemcpyHtoDAsync(address, host, nbytes, self._stream)
            check(copy, "copying an input to the GPU")

    def _copy_out(self) -> None:
        for array, address in zip(self._outputs, self.addresses["output"]):
            host, nbytes = array.ctypes.data, array.nbytes
            copy = self.drv.cuMemcpyDtoHAsync(host, address, nbytes, self._stream)
            check(copy, "copying an output from the GPU")

    def step(self) -> None:
        """Copies in, the program, copies out (asynchronous: synchronize to read outputs)."""
        self._copy_in()
        self.call()
        self._copy_out()

    def synchronize(self) -> None:
        """Wait for everything queued on the stream; kernel faults surface here."""
        check(self.drv.cuStreamSynchronize(self._stream), "running the program on the GPU")

    def run(self) -> list[np.ndarray]:
        """One inference on the bound inputs; returns copies of the outputs."""
        self.step()
        self.synchronize()
        return [array.copy() for array in self._outputs]

    def benchmark(
        self, number: int = 1, repeat: int = 10, min_repeat_ms: float = 0.0,
        end_to_end: bool = False, warmup: int = 1, duration: float = 0.0,
    ) -> Timings:  # fmt: skip
        """`repeat` results (more to fill `duration` seconds), each the mean of `number` (or
        more) runs timed by CUDA events, after `warmup` untimed runs."""
        self.step()  # one warm-up at least: it puts the inputs on the GPU for graph-only timing
        self.synchronize()
        step = self.step if end_to_end else self.call
        timings = measure(lambda: self._timed_runs(step, number, min_repeat_ms), step, repeat,
                          max(warmup - 1, 0), duration)  # fmt: skip
        return dataclasses.replace(timings, warmup=max(warmup, 1))

    def _timed_runs(
        self, step: Callable[[], None], number: int, min_repeat_ms: float
    ) -> tuple[float, int]:
        """(mean seconds of `step` between two events, runs in all tries): `number` raised
        until min_repeat_ms, as `timing.timed_runs`."""
        calls = 0
        while True:
            elapsed_ms = self._events_ms(lambda n=number: [step() for _ in range(n)])
            calls += number
            if elapsed_ms >= min_repeat_ms or min_repeat_ms <= 0:
                return elapsed_ms / 1e3 / number, calls
            number = max(number * 2, int(number * min_repeat_ms / max(elapsed_ms, 1e-3)) + 1)

    def _events_ms(self, work: Callable[[], Any]) -> float:
        drv = self.drv
        start = check(drv.cuEventCreate(0), "cuEventCreate")
        end = check(drv.cuEventCreate(0), "cuEventCreate")
        try:
            check(drv.cuEventRecord(start, self._stream), "cuEventRecord")
            work()
            check(drv.cuEventRecord(end, self._stream), "cuEventRecord")
            check(drv.cuEventSynchronize(end), "running the program on the GPU")
            return float(check(drv.cuEventElapsedTime(start, end), "cuEventElapsedTime"))
        finally:
            drv.cuEventDestroy(start)
            drv.cuEventDestroy(end)

    def profile(self, repeat: int = 10) -> list[dict[str, Any]]:
        """Per launch, the median seconds between events around it alone, in run order."""
        self.step()
        self.synchronize()
        rows = []
        for i, launch in enumerate(self.launches):
            times = [self._events_ms(lambda i=i: self._launch(i)) / 1e3 for _ in range(repeat)]
            rows.append({"kernel": launch.kernel, "node": launch.node, "flops": launch.flops,
                         "seconds": statistics.median(times)})  # fmt: skip
        return rows

    def close(self) -> None:
        """Free the GPU memory, graph, module and stream (also done when collected)."""
        drv = getattr(self, "drv", None)
        if drv is None:
            return
        if self._graph_exec is not None:
            drv.cuGraphExecDestroy(self._graph_exec)
        if self._graph is not None:
            drv.cuGraphDestroy(self._graph)
        for address in self._allocations:
            drv.cuMemFree(address)
        if self._module is not None:
            drv.cuModuleUnload(self._module)
        if self._stream is not None:
            drv.cuStreamDestroy(self._stream)
        self.drv = None
        self._allocations, self._graph, self._graph_exec, self._module = [], None, None, None
        self._stream = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the driver may be gone already
            pass


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    return _size(shape) * numpy_dtype(dtype).itemsize


__all__ = ["CUDAError", "CUDAExecutor"]
