"""Measuring configs on the GPU: the CUDA counterparts of `measure_cpu.build` and `.run`.

`build_cuda` lowers the task's op with `LoweringTarget(kind="cuda")`, rejects configs no GPU can
launch before generating code (more than 1024 threads per block, more than 48 KiB of static
shared memory: error 1), emits PTX (error 2 when that fails) and, when `ptxas` is installed,
assembles it to count registers (error 3 when ptxas refuses the PTX, error 1 when registers x
threads exceed a block's register file). `run_cuda` loads the PTX on the GPU in the worker
process, checks the outputs and times the kernels with CUDA events. Without a GPU the run
step fails (error 4) with the runtime's message saying why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tvmc.autotune.measure import (
    MESSAGE_CHARS,
    BuildResult,
    MeasureBackend,
    MeasureInput,
    MeasureOptions,
    MeasureResult,
    TaskOp,
    output_mismatch,
    random_inputs,
)
from tvmc.autotune.records import FAILED_COST
from tvmc.codegen.cuda_program import Launch, check_launch
from tvmc.codegen.nvptx import emit_ptx, launch_dims
from tvmc.codegen.target import CUDATarget
from tvmc.errors import UsageError
from tvmc.graph import TensorType
from tvmc.kernel import Kernel
from tvmc.kernel.program import WORKSPACE_ALIGN, ProgramBuffer
from tvmc.ops.lowering import LowerContext, LoweringTarget
from tvmc.runtime.executor import ProgramInfo

CUDA_MIN_REPEAT_MS = 1000.0  # TVMC's default on GPUs: short kernels are timed over >= 1 s
REGISTERS_PER_BLOCK = 65536  # every arch since sm_50
PTXAS_TIMEOUT = 60.0


def cuda_options(options: MeasureOptions) -> MeasureOptions:
    """`options` with TVMC's GPU default: min_repeat_ms 0 (unset) means CUDA_MIN_REPEAT_MS."""
    if options.min_repeat_ms > 0:
        return options
    return replace(options, min_repeat_ms=CUDA_MIN_REPEAT_MS)


@dataclass
class CUDABuildResult(BuildResult):
    """A config built for the GPU: its PTX, launches and the buffers they run on."""

    ptx: str = ""
    launches: tuple[Launch, ...] = ()
    program: dict[str, Any] | None = None  # ProgramInfo.to_json() of the buffers
    registers: dict[str, int] | None = None  # per kernel, from ptxas -v (None: not checked)


def launch_error(kernels: list[Kernel]) -> str:
    """Why no GPU could launch these kernels ('' when every one fits)."""
    try:
        for kernel in kernels:
            dims = launch_dims(kernel)[1]
            check_launch(kernel.name, dims.block, dims.shared_bytes)
    except Exception as exc:  # KernelIRError: the threads or shared memory of a launch
        return str(exc)
    return ""


@dataclass(frozen=True)
class KernelResources:
    """What `ptxas -v` reports of one kernel: registers per thread, bytes spilled to local."""

    registers: int
    spill_bytes: int


def ptxas_report(ptx: str, arch: str) -> dict[str, KernelResources] | None:
    """Each kernel's registers and spill stores (`ptxas -v`); None when ptxas cannot check `arch`.

    Raises RuntimeError when ptxas refuses the PTX itself.
    """
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tvmc-ptxas-") as tmp:
        src = f"{tmp}/k.ptx"
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [ptxas, "-v", f"-arch={arch}", src, "-o", f"{tmp}/k.cubin"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PTXAS_TIMEOUT)
    text = done.stderr + done.stdout
    if done.returncode != 0:
        if "is not defined for option 'gpu-name'" in text or "Unsupported gpu architecture" in text:
            return None  # this ptxas is too new or too old for the arch: the driver will judge
        raise RuntimeError(f"ptxas refused the PTX: {text.strip()[-MESSAGE_CHARS:]}")
    registers: dict[str, int] = {}
    spills: dict[str, int] = {}
    current = None
    for line in text.splitlines():
        m = re.search(r"(?:Compiling entry function '|Function properties for )(\w+)", line)
        if m:
            current = m.group(1)
        m = re.search(r"(\d+) bytes spill stores", line)
        if m and current:
            spills[current] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            registers[current] = int(m.group(1))
    return {k: KernelResources(r, spills.get(k, 0)) for k, r in registers.items()}


def ptxas_registers(ptx: str, arch: str) -> dict[str, int] | None:
    """Registers per thread of each kernel (`ptxas -v`); None when ptxas cannot check `arch`.

    Raises RuntimeError when ptxas refuses the PTX itself.
    """
    report = ptxas_report(ptx, arch)
    return None if report is None else {k: r.registers for k, r in report.items()}


def _buffers(kernels: list[Kernel], params: dict[str, np.ndarray]) -> ProgramInfo:
    """in<i> are inputs, out<i> outputs, packed constants params; the rest is workspace."""
    buffers: dict[str, ProgramBuffer] = {}
    lists: dict[str, list[str]] = {"input": [], "output": [], "param": []}
    offset = 0
    for buf in (b for k in kernels for b in k.params):
        if buf.name in buffers:
            continue
        kind = ("param" if buf.name in params else "input" if _numbered(buf.name, "in")
                else "output" if _numbered(buf.name, "out") else "workspace")  # fmt: skip
        if kind == "workspace":
            buffers[buf.name] = ProgramBuffer(buf.name, buf.shape, buf.dtype, kind, 0, offset)
            offset += -(-buf.nbytes // WORKSPACE_ALIGN) * WORKSPACE_ALIGN
        else:
            index = len(lists[kind])
            lists[kind].append(buf.name)
            buffers[buf.name] = ProgramBuffer(buf.name, buf.shape, buf.dtype, kind, index)
    return ProgramInfo("", lists["input"], lists["output"], lists["param"], buffers, [], offset)


def _numbered(name: str, prefix: str) -> bool:
    return name.startswith(prefix) and name[len(prefix) :].isdigit()


def build_cuda(
    inp: MeasureInput, check_correctness: bool = True, threads: int | None = None
) -> CUDABuildResult:
    """Lower the task's op for CUDA with the config's knobs, check its launches, emit PTX."""
    start = time.perf_counter()
    task = inp.task
    target = CUDATarget.parse(task.target)
    op = TaskOp.of(task)
    ctx = LowerContext(LoweringTarget(kind="cuda"), inp.config.values, "k")

    def failed(error_no: int, message: str = "") -> CUDABuildResult:
        text = (message or traceback.format_exc())[-MESSAGE_CHARS:]
        return CUDABuildResult(seconds=time.perf_counter() - start, error_no=error_no,
                               error_msg=text)  # fmt: skip

    try:
        kernels = op.lower(ctx)
    except Exception:
        return failed(1)
    invalid = launch_error(kernels)
    if invalid:
        return failed(1, f"invalid config for the GPU: {invalid}")
    try:
        artifact = emit_ptx(kernels, target.arch, target.ptx_version)
    except Exception:
        return failed(2)
    try:
        registers = ptxas_registers(artifact.ptx, target.arch)
    except Exception:
        return failed(3)
    for kernel in kernels:
        used = (registers or {}).get(kernel.name, 0)
        dims = artifact.launch[kernel.name]
        threads_per_block = dims.block[0] * dims.block[1] * dims.block[2]
        if used * threads_per_block > REGISTERS_PER_BLOCK:
            return failed(1, f"invalid config for the GPU: kernel {kernel.name} uses {used} "
                             f"registers x {threads_per_block} threads, more than a block's "
                             f"{REGISTERS_PER_BLOCK}")  # fmt: skip
    try:
        reference = op.reference() if check_correctness else None
    except Exception:
        return failed(8)
    params = {b.name: v for b, v in ctx.params}
    launches = tuple(
        Launch(k.name, artifact.launch[k.name].grid, artifact.launch[k.name].block,
               artifact.launch[k.name].shared_bytes, tuple(b.name for b in k.params))
        for k in kernels
    )  # fmt: skip
    return CUDABuildResult(
        b"", artifact.kernels, tuple((t.shape, t.dtype) for t in op.types),
        tuple(t.shape for t in op.out_types), params, reference, time.perf_counter() - start,
        ptx=artifact.ptx, launches=launches, program=_buffers(kernels, params).to_json(),
        registers=registers,
    )  # fmt: skip


def run_cuda(built: CUDABuildResult, options: MeasureOptions) -> MeasureResult:
    """Load the PTX on this process's GPU, check the outputs, time `repeat` event-timed means."""
    from tvmc.runtime.cuda import CUDAExecutor  # the driver loads only in the worker that runs

    start = time.perf_counter()
    assert built.program is not None
    info = ProgramInfo.from_json(built.program)
    executor = CUDAExecutor(built.ptx, info, built.launches, built.params)
    try:
        inputs = random_inputs([TensorType(s, d) for s, d in built.inputs])
        executor.set_inputs([inputs[int(name[2:])].reshape(info.buffers[name].shape)
                             for name in info.inputs])  # fmt: skip
        outputs = dict(zip(info.outputs, executor.run()))
        if built.reference is not None:
            wrong = output_mismatch(built, outputs)
            if wrong:
                return MeasureResult([FAILED_COST], 5, time.perf_counter() - start, time.time(),
                                     wrong)  # fmt: skip
        times = executor.benchmark(options.number, options.repeat, options.min_repeat_ms)
    finally:
        executor.close()
    return MeasureResult(list(times.results), 0, time.perf_counter() - start, time.time())


def gpu_problem() -> str | None:
    """Why this process cannot run CUDA kernels (no extra, driver or GPU), or None if it can."""
    from tvmc.runtime.cuda_driver import CUDAError, device

    try:
        device()
    except (CUDAError, UsageError) as exc:
        return str(exc)
    return None


def check_target(target: str, here: bool) -> None:
    """A UsageError when `target` is no CUDA target or names an unknown arch (a bad arch fails
    now, not in every build); whether a GPU is here, the runner finds out (`gpu_problem`)."""
    CUDATarget.parse(target)


# PTX is built in the build workers and run on this machine's GPU by the runner, which checks
# there is one first; GPU kernels are timed by events, so builds may share the host beside them
BACKEND = MeasureBackend(
    "cuda", build_cuda, run_cuda, check_target, ("tvmc.autotune.measure_cuda",), cuda_options,
    gpu_problem, exclusive_runs=False,
)  # fmt: skip
