"""Kernels -> NVPTX LLVM IR -> PTX text for CUDA, with launch dimensions per kernel.

A loop bound to `threadIdx.x` (or blockIdx.*, threadIdx.y/z) is not a loop on the GPU: its
variable is the hardware index. The launch extent of an axis is the largest extent bound to it
in the kernel; a loop with a smaller extent is guarded by `if (i < extent)`. Shared scratch is
an addrspace(3) global, `Barrier` is `llvm.nvvm.barrier.cta.sync.aligned.all(0)`, `WarpShuffle`
is `llvm.nvvm.shfl.sync.bfly.{f32,i32}` over the full warp. Params and scratch are declared
16-byte aligned, so a contiguous 4-lane access whose index is provably a multiple of 4
(`known_multiple`) becomes one 128-bit load or store (ld.global.nc.v4, st.shared.v4).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from tvmc.codegen.llvm_cpu import KernelSignature
from tvmc.codegen.llvm_util import I32, PTR, VOID, declare, element, mem_type
from tvmc.codegen.lower_stmt import Lowering, ModuleState
from tvmc.codegen.mathfuncs import math_function
from tvmc.codegen.target import init_llvm, optimize
from tvmc.errors import UnsupportedModelError
from tvmc.kernel import (
    Barrier,
    Buffer,
    Expr,
    For,
    Kernel,
    KernelIRError,
    WarpShuffle,
    kernel_str,
    validate,
)
from tvmc.kernel.legalize import legalize
from tvmc.kernel.transform import MAX_THREADS_PER_BLOCK, contains, gpu_extents

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
PARAM_ALIGN = 16  # what every kernel param and scratch buffer is aligned to: a float4
_SREG = {"threadIdx": "tid", "blockIdx": "ctaid"}


@dataclass(frozen=True)
class LaunchDims:
    """How to launch one kernel: grid and block extents (x, y, z) and static shared bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int

    def to_json(self) -> dict:
        """A JSON-shaped dict (for package metadata)."""
        return {"grid": list(self.grid), "block": list(self.block), "shared": self.shared_bytes}


@dataclass(frozen=True)
class PTXArtifact:
    """PTX for one module, the LLVM IR it came from, and each kernel's launch dimensions."""

    arch: str
    ptx: str
    llvm_ir: str
    kernels: tuple[KernelSignature, ...]
    launch: dict[str, LaunchDims]
    kernel_text: str = ""


def launch_dims(kernel: Kernel) -> tuple[dict[str, int], LaunchDims]:
    """Per GPU axis, the launch extent (the largest constant extent bound to it)."""
    axes, shared = gpu_extents(kernel.name, kernel.body)
    grid = tuple(axes.get(f"blockIdx.{d}", 1) for d in "xyz")
    block = tuple(axes.get(f"threadIdx.{d}", 1) for d in "xyz")
    if block[0] * block[1] * block[2] > MAX_THREADS_PER_BLOCK:
        raise KernelIRError(
            f"kernel {kernel.name}: {block} threads per block exceeds {MAX_THREADS_PER_BLOCK}"
        )
    return axes, LaunchDims(grid, block, shared)  # type: ignore[arg-type]


class NVPTXLowering(Lowering):
    """Lowering where GPU-bound loops read special registers instead of counting."""

    def __init__(self, state: ModuleState, fn: ir.Function, kernel: Kernel, axes: dict[str, int]):
        super().__init__(state, fn, kernel.name)
        self.axes = axes

    def gpu_loop(self, s: For) -> None:
        """The loop variable is the hardware index, guarded if the launch is wider."""
        axis, dim = s.kind.split(".")
        sreg = declare(self.module, f"llvm.nvvm.read.ptx.sreg.{_SREG[axis]}.{dim}", I32, [])
        index = self.cast(self.b.call(sreg, []), "int32", s.var.dtype)
        self.vars[s.var] = index
        extent = s.extent.value  # type: ignore[attr-defined]
        if self.axes[s.kind] > extent:
            if contains(s.body, Barrier) or contains(s.body, WarpShuffle):
                raise KernelIRError(
                    f"{s.kind} loop {s.var.name} of extent {extent} under a launch of "
                    f"{self.axes[s.kind]} needs a guard, and a barrier under a guard deadlocks "
                    "(a warp shuffle too)"
                )
            with self.b.if_then(self.b.icmp_signed("<", index, ir.Constant(index.type, extent))):
                self.stmt(s.body)
        else:
            self.stmt(s.body)
        del self.vars[s.var]

    def parallel_loop(self, s: For) -> None:
        """GPUs have no thread pool: parallel loops must be bound instead."""
        raise KernelIRError(f"loop {s.var.name} is parallel; bind it to blockIdx/threadIdx on GPUs")

    def visit_WarpShuffle(self, s: WarpShuffle) -> None:
        """`llvm.nvvm.shfl.sync.bfly` over the full warp, stored into local scratch."""
        if self.axes.get("threadIdx.x", 1) % 32:
            raise KernelIRError(
                f"a warp shuffle needs blockDim.x a multiple of 32, not {self.axes['threadIdx.x']}"
            )
        kind = "f32" if s.buffer.dtype == "float32" else "i32"
        t = mem_type(s.buffer.dtype)
        fn = declare(self.module, f"llvm.nvvm.shfl.sync.bfly.{kind}", t, [I32, t, I32, I32])
        full, mask, clamp = (ir.Constant(I32, v) for v in (-1, s.lane_mask, 31))
        value = self.b.call(fn, [full, self.expr(s.value), mask, clamp])
        ptr = self.element_ptr(s.buffer, self.flat_offset(s.buffer, s.indices))
        self.b.store(value, ptr, align=s.buffer.itemsize)

    def buffer_align(self, buf: Buffer) -> int:
        """Shared and local scratch are 16-byte aligned here, and so are params: a Program's
        buffers start on 64-byte boundaries (cuMemAlloc, WORKSPACE_ALIGN)."""
        return PARAM_ALIGN

    def prefetch(self, buf: Buffer, indices: tuple[Expr, ...]) -> None:
        """Nothing: no GPU template asks for one, and a hint may be dropped."""

    def barrier(self) -> None:
        """__syncthreads()."""
        fn = declare(self.module, "llvm.nvvm.barrier.cta.sync.aligned.all", VOID, [I32])
        self.b.call(fn, [ir.Constant(I32, 0)])

    def allocate(self, buf: Buffer) -> tuple[ir.Value, Callable[[], object], bool]:
        """Shared scratch is an addrspace(3) global; local scratch an alloca."""
        if buf.scope != "shared":  # per-thread local memory: always an alloca, never malloc
            ptr = self.alloca_b.alloca(ir.ArrayType(mem_type(buf.dtype), buf.size), name=buf.name)
            ptr.align = 16
            ptr.type = PTR
            return ptr, lambda: None, False
        t = ir.ArrayType(mem_type(buf.dtype), buf.size)
        gv = ir.GlobalVariable(self.module, t, self.state.unique(f"{buf.name}_shared"), addrspace=3)
        gv.linkage = "internal"
        gv.align = 16
        gv.initializer = ir.Constant(t, ir.Undefined)
        gv.type = ir.PointerType(addrspace=3)  # opaque, so geps and loads type-check
        return gv, lambda: None, False

    def float_call(self, name: str, args: list[ir.Value], t: ir.Type) -> ir.Value:
        """Float intrinsics, refusing the ones that would need libm."""
        f32 = str(element(t)) == "float"
        if name in ("exp", "log", "tanh", "erf", "sigmoid", "pow") and not f32:
            # a model's float64 op can ask for it: the user's error to fix, not a template bug
            raise UnsupportedModelError(
                f"{name} on float64 has no CUDA lowering (tvmc's {name} is float32 code; the "
                "GPU has no libm): compute it in float32, or compile for llvm"
            )
        return super().float_call(name, args, t)

    def pow(self, x: ir.Value, y: ir.Value, t: ir.Type) -> ir.Value:
        """exp(y * log(x)): no libm on the GPU; valid for x > 0, which is what models use."""
        log = self.b.call(math_function(self.module, "log", t), [x])
        return self.b.call(math_function(self.module, "exp", t), [self.b.fmul(y, log)])


def with_launch_bounds(text: str, launch: dict[str, LaunchDims]) -> str:
    """The module's IR with each kernel's block size as its `nvvm.maxntid` (PTX `.maxntid`, CUDA's
    __launch_bounds__): ptxas then fits registers to the block (a 1024-thread kernel gets at
    most 64 per thread and spills rather than failing to launch) and allocates for it."""
    groups: dict[str, int] = {}
    for name, dims in launch.items():
        bounds = ",".join(str(d) for d in dims.block)
        group = groups.setdefault(bounds, len(groups))
        head = re.compile(rf'^(define ptx_kernel void @"?{re.escape(name)}"?\([^)]*\))', re.M)
        text, found = head.subn(rf"\1 #{group}", text, count=1)
        if not found:
            raise KernelIRError(f"kernel {name}: no definition to bound in the NVPTX module")
    attributes = [f'attributes #{g} = {{ "nvvm.maxntid"="{b}" }}' for b, g in groups.items()]
    return text + "\n" + "\n".join(attributes) + "\n"


def emit_ptx(kernels: list[Kernel], arch: str = "sm_90", ptx_version: str = "ptx86") -> PTXArtifact:
    """Compiles `kernels` into one PTX module for `arch` (e.g. sm_90)."""
    init_llvm()
    module = ir.Module("tvmc_cuda")
    module.triple = NVPTX_TRIPLE
    state = ModuleState(module)
    launch: dict[str, LaunchDims] = {}
    for kernel in kernels:
        kernel = legalize(validate(kernel))  # narrow types computed wide
        axes, launch[kernel.name] = launch_dims(kernel)
        fn = ir.Function(module, ir.FunctionType(VOID, [PTR] * len(kernel.params)), kernel.name)
        fn.calling_convention = "ptx_kernel"
        for arg, buf in zip(fn.args, kernel.params):
            arg.name = buf.name
            arg.attributes.align = PARAM_ALIGN
            if kernel.noalias(buf):
                arg.add_attribute("noalias")
        low = NVPTXLowering(state, fn, kernel, axes)
        low.bufs.update(zip(kernel.params, fn.args))
        low.stmt(kernel.body)
        low.finish()
    target = llvm.Target.from_triple(NVPTX_TRIPLE)
    tm = target.create_target_machine(cpu=arch, features=f"+{ptx_version}", opt=3)
    mod = llvm.parse_assembly(with_launch_bounds(str(module), launch))
    mod.verify()
    optimize(mod, tm)
    return PTXArtifact(
        arch=arch,
        ptx=tm.emit_assembly(mod),
        llvm_ir=str(mod),
        kernels=tuple(KernelSignature.of(k) for k in kernels),
        launch=launch,
        kernel_text="\n\n".join(kernel_str(k) for k in kernels),
    )
