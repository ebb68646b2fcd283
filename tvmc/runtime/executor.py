"""The executor: bind inputs, call the model's entry function, time it, profile its kernels."""

from __future__ import annotations

import ctypes
import dataclasses
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import numpy as np

from tvmc.codegen.loader import LoadedModule
from tvmc.config import ADAPTIVE_THREADS_ENV, env_on
from tvmc.dtypes import numpy_dtype
from tvmc.errors import InputError, ScratchMemoryError
from tvmc.plan import Call, ProgramBuffer, Source
from tvmc.runtime.package_check import check_layout, check_plan, image_slots_wanted
from tvmc.runtime.thread_choice import ThreadChoice
from tvmc.runtime.timing import Timings, measure, timed_runs

ALIGN = 64


def aligned_empty(shape: tuple[int, ...], dtype: str | np.dtype, align: int = ALIGN) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an `align`-byte boundary."""
    dtype = numpy_dtype(dtype)
    nbytes = max(int(np.prod(shape, dtype=np.int64)), 1) * dtype.itemsize  # empty: a placeholder
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start : start + nbytes].view(dtype)[: int(np.prod(shape))].reshape(shape)


@dataclass
class ProgramInfo:
    """What the runtime needs of a compiled Program (read from a package's mod.json)."""

    entry: str
    inputs: list[str]  # program buffer names, in order
    outputs: list[str]
    params: list[str]
    buffers: dict[str, ProgramBuffer]
    calls: list[Call]
    workspace_bytes: int  # one image's, where images > 1
    naive_bytes: int = 0
    images: int = 1  # the batch the entry runs image by image (tvmc.kernel.program.Program)
    slots: int = 1  # image workspaces on the compiling machine's threads (the code's default)

    @classmethod
    def of(cls, program: Any) -> ProgramInfo:
        """What the runtime needs of `program` (a tvmc.kernel.program.Program)."""
        return cls(program.entry, list(program.inputs), list(program.outputs),
                   list(program.params), dict(program.buffers), list(program.calls),
                   program.workspace_bytes, program.naive_bytes, program.images,
                   program.slots)  # fmt: skip

    @property
    def all_workspace_bytes(self) -> int:
        """Bytes of every slot's image workspace on the compiling machine's threads (what
        metadata.json states; a run allocates `Executor.image_slots` of them)."""
        return self.workspace_bytes * self.slots

    def caller_shape(self, name: str) -> tuple[int, ...]:
        """The shape of the array a caller passes or gets for input or output `name`: its
        buffer's, with the leading (batch) dim times `images`."""
        shape = self.buffers[name].shape
        return (shape[0] * self.images, *shape[1:]) if self.images > 1 and shape else shape

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "params": self.params,
            "buffers": [b.to_json() for b in self.buffers.values()],
            "calls": [
                {
                    "kernel": c.kernel,
                    "args": list(c.args),
                    "node": c.node,
                    "flops": c.flops,
                    "sources": [s.to_json() for s in c.sources],
                }
                for c in self.calls
            ],  # fmt: skip
            "workspace_bytes": self.workspace_bytes,
            "naive_bytes": self.naive_bytes,
            "images": self.images,
            "slots": self.slots,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ProgramInfo:
        buffers = [ProgramBuffer.from_json(b) for b in d["buffers"]]
        calls = [Call(c["kernel"], tuple(c["args"]), c.get("node", ""), c.get("flops", 0),
                      tuple(Source.from_json(s) for s in c.get("sources", ())))
                 for c in d["calls"]]  # fmt: skip
        images = int(d.get("images", 1))
        slots = int(d.get("slots", images))  # a package from before slots: one an image
        return cls(d["entry"], list(d["inputs"]), list(d["outputs"]), list(d["params"]),
                   {b.name: b for b in buffers}, calls, int(d["workspace_bytes"]),
                   int(d.get("naive_bytes", 0)), images, slots)  # fmt: skip


def _image_slots(module: LoadedModule, info: ProgramInfo) -> int:
    """The image workspaces a run's workspace holds: one for each image that can run at once
    on this machine (its thread count or cores, whichever is more; at most the images) where
    the code reads the count, else the plan's `slots`, which the code then fixes."""
    wanted = image_slots_wanted(info.images, module.max_threads)
    return module.hold_image_slots(wanted) or info.slots


class Executor:
    """A loaded model: fixed params and workspace, one `run` = one call of the entry function.

    The plan is checked against the module's kernels first (and against the code's layout
    digest when it has one), so neither a run nor a profile's per-kernel calls can pass a
    kernel a buffer smaller than it takes.
    """

    def __init__(self, module: LoadedModule, info: ProgramInfo, params: Mapping[str, np.ndarray]):
        kernels = list(module.signatures.values())
        check_plan("the program", info, kernels)
        if module.layout is not None:
            plan = {**info.to_json(), "kernels": [k.to_json() for k in kernels]}
            check_layout("the program", "its code", module.layout, plan)
        self.module = module
        self.info = info
        self.image_slots = _image_slots(module, info)
        self.workspace = aligned_empty((max(info.workspace_bytes * self.image_slots, 1),),
                                       np.uint8)  # fmt: skip
        self._params = []
        for name in info.params:
            buf = info.buffers[name]
            array = params[name]
            if array.dtype != numpy_dtype(buf.dtype) or array.size != _size(buf.shape):
                raise InputError(f"param {name} is {array.dtype}{list(array.shape)}, "
                                 f"the code expects {buf.dtype}{list(buf.shape)}")  # fmt: skip
            copy = aligned_empty(buf.shape, buf.dtype)
            copy[...] = array.reshape(buf.shape)
            self._params.append(copy)
        self._outputs = [aligned_empty(info.caller_shape(n), info.buffers[n].dtype)
                         for n in info.outputs]  # fmt: skip
        slots = len(info.inputs) + len(info.outputs) + len(info.params)
        self._args = (ctypes.c_void_p * max(slots, 1))()
        first_param = len(info.inputs) + len(info.outputs)
        for i, array in enumerate(self._outputs):
            self._args[len(info.inputs) + i] = array.ctypes.data
        for i, array in enumerate(self._params):
            self._args[first_param + i] = array.ctypes.data
        self._inputs: list[np.ndarray | None] = [None] * len(info.inputs)
        self._unbound = bool(info.inputs)  # some input not bound yet
        self._entry = module[info.entry]
        self._args_ptr = ctypes.cast(self._args, ctypes.c_void_p)
        self._workspace_ptr = ctypes.c_void_p(self.workspace.ctypes.data)
        self.adaptive_threads = env_on(ADAPTIVE_THREADS_ENV, default=True)  # thread_choice.py
        self._choices: dict[int, ThreadChoice] = {}

    def set_inputs(self, arrays: list[np.ndarray]) -> None:
        """Bind input arrays (by position); they are checked and kept alive, never copied twice."""
        for i, array in enumerate(bound_inputs(self.info, arrays)):
            self._inputs[i] = array
            self._args[i] = array.ctypes.data
        self._unbound = any(array is None for array in self._inputs)

    def run(self) -> list[np.ndarray]:
        """One inference on the bound inputs; returns copies of the outputs."""
        self.call()
        return [array.copy() for array in self._outputs]

    def call(self) -> None:
        """One call of the entry function (what benchmarks time); with `adaptive_threads` (the
        default; $TVMC_ADAPTIVE_THREADS=0 turns it off), on the thread count the executor's
        ThreadChoice picks for it (the count set, or fewer when that has been faster lately)."""
        if self._unbound:
            raise InputError("inputs are not bound; call set_inputs first")
        choice = self._thread_choice() if self.adaptive_threads else None
        if choice is None:  # on the count set, whatever count an adaptive run used last
            self.module.use_threads(self.module.max_threads)
            self._entry(self._args_ptr, self._workspace_ptr)
            self._check_scratch()
            return
        threads = choice.next_threads()
        self.module.use_threads(threads)
        start = perf_counter()
        self._entry(self._args_ptr, self._workspace_ptr)
        self._check_scratch()
        choice.observe(threads, perf_counter() - start)

    def _check_scratch(self, kernel: str | None = None) -> None:
        if self.module.scratch_failed():
            what = f"kernel {kernel}" if kernel else "a kernel of the model"
            raise ScratchMemoryError(
                f"{what} found no memory for its scratch (heap), so the run's outputs are not "
                "valid; free memory and run again"
            )

    @property
    def thread_runs(self) -> dict[int, int]:
        """Runs per thread count under the thread count set now (empty: not adaptive)."""
        choice = self._choices.get(self.module.max_threads)
        return {n: runs for n, runs in choice.runs.items() if runs} if choice is not None else {}

    def _thread_choice(self) -> ThreadChoice | None:
        full = self.module.max_threads
        if not self.adaptive_threads or full <= 1 or not self.module.has_parallel_loops:
            return None
        if full not in self._choices:  # one per count set: going back to a count resumes it
            self._choices[full] = ThreadChoice(full)
        return self._choices[full]

    def benchmark(
        self, number: int = 1, repeat: int = 10, min_repeat_ms: float = 0.0, warmup: int = 1,
        duration: float = 0.0,
    ) -> Timings:  # fmt: skip
        """TVM's time_evaluator: `repeat` results (more to fill `duration` seconds), each the
        mean over `number` (or more) runs, after `warmup` untimed runs (they page in code and
        workspace and start the thread pool)."""
        before = self.thread_runs
        times = measure(lambda: timed_runs(self.call, number, min_repeat_ms), self.call, repeat,
                        warmup, duration)  # fmt: skip
        used = {n: runs - before.get(n, 0) for n, runs in self.thread_runs.items()}
        counts = tuple((n, runs) for n, runs in sorted(used.items(), reverse=True) if runs)
        return dataclasses.replace(times, thread_runs=counts)

    def profile(self, repeat: int = 10) -> list[dict[str, Any]]:
        """Per-call median seconds, by kernel, in run order (calls from Python: slower overall),
        on the thread count set."""
        self.call()
        self.module.use_threads(self.module.max_threads)
        arg_slots = {**{n: i for i, n in enumerate(self.info.inputs)}}
        base = len(self.info.inputs)
        arg_slots.update({n: base + i for i, n in enumerate(self.info.outputs)})
        base += len(self.info.outputs)
        arg_slots.update({n: base + i for i, n in enumerate(self.info.params)})
        rows = []
        # call by call, every image's intermediates are live at once: one workspace an image
        workspace = self.workspace
        if self.image_slots < self.info.images:
            workspace = aligned_empty((self.info.workspace_bytes * self.info.images,), np.uint8)
        for call in self.info.calls:
            per_image = [[ctypes.c_void_p(self._pointer(a, arg_slots, n, workspace))
                          for a in call.args] for n in range(self.info.images)]  # fmt: skip
            fn = self.module[call.kernel]
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                for pointers in per_image:  # image by image, each kernel on every thread
                    fn(*pointers)
                times.append(time.perf_counter() - start)
            self._check_scratch(call.kernel)
            rows.append({"kernel": call.kernel, "node": call.node,
                         "flops": call.flops * self.info.images,
                         "seconds": statistics.median(times)})  # fmt: skip
        return rows

    def _pointer(
        self, name: str, arg_slots: Mapping[str, int], image: int, workspace: np.ndarray
    ) -> int:  # fmt: skip
        """Where buffer `name` of image `image` starts, image n's workspace n workspaces into
        `workspace`."""
        info, buf = self.info, self.info.buffers[name]
        if buf.storage == "workspace":
            return workspace.ctypes.data + image * info.workspace_bytes + buf.offset
        owner = {"input": info.inputs, "output": info.outputs, "param": info.params}
        slot = owner[buf.storage][buf.index]
        step = 0 if buf.storage == "param" else info.buffers[slot].nbytes
        return int(self._args[arg_slots[slot]]) + image * step


def bound_inputs(info: ProgramInfo, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The input arrays (by position) as contiguous arrays, each checked against its buffer."""
    bound = []
    for i, (name, array) in enumerate(zip(info.inputs, arrays)):
        buf, shape = info.buffers[name], info.caller_shape(name)
        array = np.ascontiguousarray(array)
        if array.dtype != numpy_dtype(buf.dtype) or array.size != _size(shape):
            raise InputError(f"input {i} is {array.dtype}{list(array.shape)}, "
                             f"the model expects {buf.dtype}{list(shape)}")  # fmt: skip
        bound.append(array)
    return bound


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))
