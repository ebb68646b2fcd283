"""Kernels -> one LLVM module for a CPU -> optimised LLVM IR, assembly and an object file.

Each kernel becomes `void name(ptr p0, ptr p1, ...)` over raw, contiguous buffers. A parallel
loop is outlined into `void chunk(ptr closure, i64 begin, i64 end)`: the closure struct carries
the buffers and values the body uses, and the kernel calls
`tvmc_parallel_for(chunk, &closure, extent, __tvmc_num_threads)` (the runtime's thread pool,
tvmc/codegen/pool.c, which cuts [0, extent) into chunks; the global is set by the loader).
Other code (e.g. a whole-graph entry function) may add functions to `CPUModule.module` before
`build()`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import llvmlite.binding as llvm
from llvmlite import ir

from tvmc.codegen.abi import NUM_THREADS_SYMBOL, KernelSignature
from tvmc.codegen.llvm_util import (
    I8,
    I32,
    I64,
    PTR,
    VOID,
    declare,
    ir_type,
    mem_type,
    shared_i32,
    type_suffix,
)
from tvmc.codegen.lower_stmt import STACK_LIMIT, Lowering, ModuleState
from tvmc.codegen.pool import PARALLEL_FOR, load_pool
from tvmc.codegen.target import CPUTarget, optimize
from tvmc.kernel import Buffer, For, Kernel, KernelIRError, Var, kernel_str, validate
from tvmc.kernel.legalize import legalize
from tvmc.kernel.transform import free_buffers, free_vars


@dataclass(frozen=True)
class CodegenOptions:
    """Choices that change the generated code (not the target)."""

    aligned_params: bool = False  # the caller promises 64-byte aligned buffers: `align 64`
    parallel: bool | None = None  # None: the thread pool when it builds (always when cross)
    opt_level: int = 3
    stack_limit: int = STACK_LIMIT  # local scratch above this many bytes comes from the heap


class CPULowering(Lowering):
    """Lowering with parallel loops outlined onto the runtime's thread pool."""

    span_loads = True

    def __init__(
        self, state: ModuleState, fn: ir.Function, kernel: Kernel, threads: bool, aligned: bool
    ) -> None:
        super().__init__(state, fn, kernel.name)
        self.kernel = kernel
        self.threads = threads  # False inside an outlined body: nested parallel loops run serially
        self.aligned = aligned  # params are 64-byte aligned (CodegenOptions.aligned_params)

    def gather(self, buf: Buffer, offsets: ir.Value, lanes: int, align: int) -> ir.Value:
        """One `llvm.masked.gather`: a gather instruction where LLVM deems the CPU's fast
        (AVX-512, AVX2 on some), else its own lane-by-lane expansion. Lane by lane, each
        computed offset costs an extract before its load (Resize's bilinear taps)."""
        t = mem_type(buf.dtype, lanes)
        pointers = self.element_ptr(buf, offsets)
        pointers.type = ir.VectorType(PTR, lanes)  # llvmlite types a vector gep as one pointer
        suffix = f"{type_suffix(t)}.v{lanes}p0"
        mask_t = ir.VectorType(ir.IntType(1), lanes)
        fn = declare(self.module, f"llvm.masked.gather.{suffix}", t,
                     [pointers.type, I32, mask_t, t])  # fmt: skip
        every = ir.Constant(mask_t, [1] * lanes)
        return self.b.call(
            fn, [pointers, ir.Constant(I32, align), every, ir.Constant(t, ir.Undefined)]
        )

    def parallel_loop(self, s: For) -> None:
        """Outlines `s` and runs it on the thread pool (serially when nested)."""
        if not self.threads:
            return super().parallel_loop(s)
        vars_, bufs = free_vars(s), free_buffers(s.body)
        extent = self.expr(s.extent)
        values = [self.bufs[b] for b in bufs] + [self.vars[v] for v in vars_]
        closure_t = ir.LiteralStructType([v.type for v in values] or [I8])
        impl = self.outline_body(s, bufs, vars_, [v.type for v in values])

        # The chunk entry the pool calls: unpack the closure, run the body on [begin, end).
        name = self.state.unique(f"{self.kernel_name}_par")
        entry = ir.Function(self.module, ir.FunctionType(VOID, [PTR, I64, I64]), name)
        entry.linkage = "internal"
        entry.attributes.add("nounwind")
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        fields = [
            b.load(b.gep(entry.args[0], [_i32(0), _i32(k)], source_etype=closure_t), typ=v.type)
            for k, v in enumerate(values)
        ]
        t = ir_type(s.var.dtype)
        begin, end = entry.args[1], entry.args[2]
        if t != I64:  # the loop counts in a narrower type; the extent fits it
            begin, end = b.trunc(begin, t), b.trunc(end, t)
        b.call(impl, [*fields, begin, end])
        b.ret_void()

        slot = self.alloca_b.alloca(closure_t, name="closure")
        slot.type = PTR  # llvmlite types allocas; opaque keeps gep/store type checks happy
        for k, v in enumerate(values):
            self.b.store(v, self.b.gep(slot, [_i32(0), _i32(k)], source_etype=closure_t))
        run = declare(self.module, PARALLEL_FOR, VOID, [PTR, PTR, I64, I32])
        nthreads = self.b.load(num_threads_global(self.module), typ=I32)
        if extent.type != I64:
            extent = self.b.sext(extent, I64)
        self.b.call(run, [entry, slot, extent, nthreads])

    def outline_body(
        self, s: For, bufs: list[Buffer], vars_: list[Var], types: list[ir.Type]
    ) -> ir.Function:
        """`impl(buffers..., values..., begin, end)`: the loop over [begin, end).

        A function of its own so its pointer params can carry `noalias` (kept as alias scopes
        when LLVM inlines it into the thread entry); pointers loaded from a struct carry none.
        """
        t = ir_type(s.var.dtype)
        fnty = ir.FunctionType(VOID, [*types, t, t])
        impl = ir.Function(self.module, fnty, self.state.unique(f"{self.kernel_name}_body"))
        impl.linkage = "internal"
        impl.attributes.add("nounwind")
        for arg, buf in zip(impl.args, bufs):
            arg.name = buf.name
            if buf.scope != "global" or self.kernel.noalias(buf):
                arg.add_attribute("noalias")
            if buf.scope != "global" or self.aligned:
                arg.attributes.align = 64  # allocations are 64-byte aligned too
        child = CPULowering(self.state, impl, self.kernel, threads=False, aligned=self.aligned)
        child.bufs.update(zip(bufs, impl.args))
        child.vars.update(zip(vars_, impl.args[len(bufs) :]))
        child.serial_loop(s.var, impl.args[-2], impl.args[-1], s.body)
        return child.finish()


def _i32(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def num_threads_global(module: ir.Module) -> ir.GlobalVariable:
    """The module's `i32 __tvmc_num_threads` (set by the loader), defined once."""
    return shared_i32(module, NUM_THREADS_SYMBOL)


class CPUModule:
    """An LLVM module being filled with kernels (and any other functions) for one CPU target."""

    def __init__(
        self,
        target: CPUTarget | None = None,
        options: CodegenOptions | None = None,
        name: str = "tvmc",
    ) -> None:
        self.target = target or CPUTarget.host()
        self.options = options or CodegenOptions()
        self.module = ir.Module(name)
        self.module.triple = self.target.triple
        self.state = ModuleState(self.module, stack_limit=self.options.stack_limit)
        self.kernels: list[Kernel] = []
        parallel = self.options.parallel
        if parallel is None:
            parallel = load_pool() if self.target.is_native else True
        self.parallel = parallel

    def add_kernel(self, kernel: Kernel) -> ir.Function:
        """Validates and lowers `kernel` into the module; returns its LLVM function."""
        validate(kernel)
        kernel_text = kernel  # printed as written; lowered with its narrow types legalized
        kernel = legalize(kernel)
        if kernel.name in self.module.globals:
            raise KernelIRError(f"two kernels named {kernel.name} in one module")
        fn = ir.Function(
            self.module, ir.FunctionType(VOID, [PTR] * len(kernel.params)), kernel.name
        )
        fn.attributes.add("nounwind")
        for arg, buf in zip(fn.args, kernel.params):
            arg.name = buf.name
            if kernel.noalias(buf):
                arg.add_attribute("noalias")
            if self.options.aligned_params:
                arg.attributes.align = 64
        low = CPULowering(
            self.state, fn, kernel, threads=self.parallel, aligned=self.options.aligned_params
        )
        low.bufs.update(zip(kernel.params, fn.args))
        low.stmt(kernel.body)
        self.kernels.append(kernel_text)
        return low.finish()

    def build(self, emit_object: bool = True) -> CPUArtifact:
        """Optimises the module at O`opt_level` and emits object code (unless not
        `emit_object`: for a caller linking more modules into it first)."""
        unoptimized = str(self.module)
        tm = self.target.target_machine(self.options.opt_level)
        mod = llvm.parse_assembly(unoptimized)
        mod.verify()
        optimize(mod, tm, self.options.opt_level)
        return CPUArtifact(
            target=self.target,
            kernels=tuple(KernelSignature.of(k) for k in self.kernels),
            llvm_ir=str(mod),
            object_code=tm.emit_object(mod) if emit_object else b"",
            unoptimized_ir=unoptimized,
            kernel_text="\n\n".join(kernel_str(k) for k in self.kernels),
            uses_threads=NUM_THREADS_SYMBOL in self.module.globals,
            _module=mod,
            _tm=tm,
        )


@dataclass
class CPUArtifact:
    """Compiled code for one CPU target: optimised LLVM IR, object bytes, assembly on demand."""

    target: CPUTarget
    kernels: tuple[KernelSignature, ...]
    llvm_ir: str
    object_code: bytes
    unoptimized_ir: str = ""
    kernel_text: str = ""
    uses_threads: bool = False
    _module: llvm.ModuleRef | None = field(default=None, repr=False)
    _tm: llvm.TargetMachine | None = field(default=None, repr=False)

    @functools.cached_property
    def assembly(self) -> str:
        """Target assembly of the optimised module."""
        if self._module is None or self._tm is None:
            raise ValueError("assembly is only available for freshly built artifacts")
        return self._tm.emit_assembly(self._module)

    def dump(self, kind: str) -> str:
        """`--dump-code` text: kernel (kernel IR), ll (LLVM IR) or asm."""
        texts = {"kernel": lambda: self.kernel_text, "ll": lambda: self.llvm_ir}
        texts["asm"] = lambda: self.assembly
        if kind not in texts:
            raise ValueError(f"unknown code kind {kind!r}; valid: {', '.join(texts)}")
        return texts[kind]()


def emit_cpu(
    kernels: list[Kernel], target: CPUTarget | None = None, options: CodegenOptions | None = None
) -> CPUArtifact:
    """Compiles `kernels` into one object for `target` (default: this machine)."""
    cpu = CPUModule(target, options)
    for k in kernels:
        cpu.add_kernel(k)
    return cpu.build()
