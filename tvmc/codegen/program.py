"""A whole Program as one object: every kernel plus the entry function that calls them in order.

    void tvmc_main(void **args, void *workspace)

`args` holds the inputs, outputs and params (the Program's order); each call passes its kernel
the right pointers: an `args` slot, or `workspace + offset`. Running a model is one foreign call.

The object also exports `__tvmc_layout`, the digest of the plan the code was compiled for
(`tvmc.codegen.layout`): a runtime compares it with the plan a package states before a call.

Big programs compile in parallel: kernels are split into groups, each group is lowered and
optimized in its own process. For this machine's architecture each group also emits its object
and the objects are merged into one relocatable object (`ld -r`, each part's constant-pool labels
renamed first so that MCJIT cannot confuse them); for another architecture (which the host `ld`
cannot read) or without `ld`, the groups hand back optimized bitcode that is linked into one LLVM
module here and emitted as one object, so cross-compiling needs no foreign tool.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed

import llvmlite.binding as llvm
from llvmlite import ir

from tvmc.codegen.abi import (
    IMAGE_SLOTS_SYMBOL,
    LAYOUT_BYTES,
    LAYOUT_SYMBOL,
    NUM_THREADS_SYMBOL,
    SCRATCH_FAILED_SYMBOL,
)
from tvmc.codegen.layout import layout_digest, program_plan
from tvmc.codegen.llvm_cpu import (
    CodegenOptions,
    CPUArtifact,
    CPUModule,
    KernelSignature,
)
from tvmc.codegen.llvm_util import I8, I32, I64, PTR, VOID, declare, shared_i32
from tvmc.codegen.lower_stmt import STACK_LIMIT, heap_peak
from tvmc.codegen.pool import PARALLEL_FOR
from tvmc.codegen.target import CPUTarget
from tvmc.codegen.threads import codegen_jobs, die_with_parent
from tvmc.kernel import Kernel
from tvmc.kernel.program import Program
from tvmc.kernel.visitor import tree_size

PARALLEL_MIN_KERNELS = 8  # below this, starting worker processes costs more than it saves
SHARED_SYMBOLS = (NUM_THREADS_SYMBOL, SCRATCH_FAILED_SYMBOL)  # i32 globals all groups' kernels use
PART_MARKS = b"ABCDEFGHJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"  # .LCPI -> .LCPA...


def entry_signature(program: Program) -> KernelSignature:
    """The entry's calling signature, as loaders expect one for every exported function."""
    slots = len(program.inputs) + len(program.outputs) + len(program.params)
    params = (
        ("args", (max(slots, 1),), "uint64"),
        ("workspace", (max(program.workspace_bytes, 1),), "uint8"),
    )
    return KernelSignature(program.entry, params)


def add_entry(module: ir.Module, program: Program) -> ir.Function:
    """Define the entry function in `module`; kernels not defined there are declared. With
    `program.images` > 1, the calls run once per image (`_add_image_loop`)."""
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR]), program.entry)
    fn.attributes.add("nounwind")
    args, workspace = fn.args
    args.name, workspace.name = "args", "workspace"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if program.images > 1:
        _add_image_loop(module, program, b, args, workspace)
    else:
        _add_calls(module, program, b, args, workspace, None)
    b.ret_void()
    return fn


def _add_calls(
    module: ir.Module, program: Program, b: ir.IRBuilder, args: ir.Value, workspace: ir.Value,
    image: ir.Value | None,
) -> None:  # fmt: skip
    """Every call, in order, at `b`; `image` (an i64): the image whose inputs and outputs they
    run on, in the image workspace at `workspace`."""
    first_slot = {"input": 0, "output": len(program.inputs)}
    first_slot["param"] = first_slot["output"] + len(program.outputs)
    slot_owner = {"input": program.inputs, "output": program.outputs}
    pointers: dict[str, ir.Value] = {}

    def pointer(name: str) -> ir.Value:
        if name not in pointers:
            buf = program.buffers[name]
            if buf.storage == "workspace":
                ptr = b.gep(workspace, [ir.Constant(I64, buf.offset)], source_etype=I8)
            else:
                slot = first_slot[buf.storage] + buf.index
                address = b.gep(args, [ir.Constant(I64, slot)], source_etype=PTR)
                ptr = b.load(address, typ=PTR)
                if image is not None and buf.storage in slot_owner:  # the caller's N images
                    owner = program.buffers[slot_owner[buf.storage][buf.index]]
                    step = ir.Constant(I64, owner.nbytes)
                    ptr = b.gep(ptr, [b.mul(image, step)], source_etype=I8)
            pointers[name] = ptr
        return pointers[name]

    kernels = {}
    for k in program.kernels:
        existing = module.globals.get(k.name)
        kernels[k.name] = existing or ir.Function(
            module, ir.FunctionType(VOID, [PTR] * len(k.params)), k.name
        )
    for call in program.calls:
        b.call(kernels[call.kernel], [pointer(a) for a in call.args])


def _add_image_loop(
    module: ir.Module, program: Program, b: ir.IRBuilder, args: ir.Value, workspace: ir.Value
) -> None:  # fmt: skip
    """At `b`: the images side by side on the pool, as many at a time as threads run and the
    workspace holds image workspaces (each image's kernels then run their loops on its thread
    alone: the pool runs nested loops serially), then the images left over one by one, each
    kernel on every thread. Each run of images takes a free slot, an image workspace, for as
    long as it runs (`_claim_slot`): the pool's chunks go to whichever thread is free, so no
    thread owns a slot. The slots the workspace holds are read from `__tvmc_image_slots`,
    which the runtime sets for the machine it runs on (initially the plan's `slots`, what a
    runtime that does not set it allocates)."""
    closure_t = ir.LiteralStructType([PTR, PTR, PTR, I32])
    images_fn = ir.Function(module, ir.FunctionType(VOID, [PTR, I64, I64]),
                            f"{program.entry}_images")  # fmt: skip
    images_fn.linkage = "internal"
    images_fn.attributes.add("nounwind")
    closure, begin, end = images_fn.args
    ib = ir.IRBuilder(images_fn.append_basic_block("entry"))
    zero, one = ir.Constant(I32, 0), ir.Constant(I32, 1)
    fields = [ib.load(ib.gep(closure, [zero, ir.Constant(I32, k)], source_etype=closure_t),
                      typ=PTR if k < 3 else I32) for k in range(4)]  # fmt: skip
    flag, slot_workspace = _claim_slot(images_fn, ib, program, *fields[1:])
    head, body, done = (images_fn.append_basic_block(n) for n in ("head", "body", "done"))
    start = ib.block
    ib.branch(head)
    ib.position_at_end(head)
    image = ib.phi(I64, name="image")
    image.add_incoming(begin, start)
    ib.cbranch(ib.icmp_signed("<", image, end), body, done)
    ib.position_at_end(body)
    _add_calls(module, program, ib, fields[0], slot_workspace, image)
    image.add_incoming(ib.add(image, ir.Constant(I64, 1)), ib.block)
    ib.branch(head)
    ib.position_at_end(done)
    ib.atomic_rmw("xchg", flag, zero, "release")  # the slot is free again (llvmlite's
    # store_atomic wants a typed pointer)
    ib.ret_void()

    held = ir.GlobalVariable(module, I32, IMAGE_SLOTS_SYMBOL)
    held.initializer = ir.Constant(I32, program.slots)
    held.type = PTR  # llvmlite hands back a typed pointer; opaque keeps loads consistent
    flags_t = ir.ArrayType(I32, program.images)  # a flag an image: the most slots a run uses
    flags = b.alloca(flags_t, name="slot_flags")
    flags.type = PTR
    b.store(ir.Constant(flags_t, [0] * program.images), flags)  # every slot free
    images32 = ir.Constant(I32, program.images)
    slots = b.load(held, typ=I32)
    slots = b.select(b.icmp_signed("<", slots, one), one, slots)
    slots = b.select(b.icmp_signed("<", images32, slots), images32, slots)
    threads = b.load(shared_i32(module, NUM_THREADS_SYMBOL), typ=I32)
    wide = b.select(b.icmp_signed("<", threads, one), one, threads)
    wide = b.select(b.icmp_signed("<", slots, wide), slots, wide)  # no more at once than slots
    entry_closure = b.alloca(closure_t, name="closure")
    entry_closure.type = PTR  # llvmlite types allocas; opaque keeps gep/store type checks happy
    for k, value in enumerate((args, workspace, flags, wide)):
        b.store(value, b.gep(entry_closure, [zero, ir.Constant(I32, k)],
                           source_etype=closure_t))  # fmt: skip
    images = ir.Constant(I64, program.images)
    side_by_side = b.sub(images, b.srem(images, b.sext(wide, I64)))  # whole images a thread
    run = declare(module, PARALLEL_FOR, VOID, [PTR, PTR, I64, I32])
    b.call(run, [images_fn, entry_closure, side_by_side, wide])
    b.call(images_fn, [entry_closure, side_by_side, images])


def _claim_slot(
    fn: ir.Function, b: ir.IRBuilder, program: Program, workspace: ir.Value, flags: ir.Value,
    wide: ir.Value,
) -> tuple[ir.Value, ir.Value]:  # fmt: skip
    """At `b`: the first free slot of the first `wide` taken (its flag set from 0 to 1), as
    (its flag, its image workspace). One is always free: the pool runs a loop's chunks on at
    most its `wide` threads, and the images left over run after the loop."""
    search, taken, step = (fn.append_basic_block(n) for n in ("claim", "claimed", "next_slot"))
    first = b.block
    b.branch(search)
    b.position_at_end(search)
    index = b.phi(I32, name="slot")
    index.add_incoming(ir.Constant(I32, 0), first)
    flag = b.gep(flags, [index], source_etype=I32)
    swap = b.cmpxchg(flag, ir.Constant(I32, 0), ir.Constant(I32, 1), "acquire", "monotonic")
    b.cbranch(b.extract_value(swap, 1), taken, step)
    b.position_at_end(step)
    after = b.add(index, ir.Constant(I32, 1))
    wrapped = b.icmp_signed("<", after, wide)
    index.add_incoming(b.select(wrapped, after, ir.Constant(I32, 0)), step)
    b.branch(search)
    b.position_at_end(taken)
    offset = b.mul(b.sext(index, I64), ir.Constant(I64, program.workspace_bytes))
    return flag, b.gep(workspace, [offset], source_etype=I8)


def heap_scratch_bytes(program: Program, threads: int, stack_limit: int = STACK_LIMIT) -> int:
    """The most heap memory the program's kernels take at once for their scratch (local buffers
    over `stack_limit`) in a run on `threads` threads, beside the workspace. A program of images
    side by side runs as `_add_image_loop` does: as many images at a time as threads and slots
    (each kernel's loops serial on its image's thread), then one image at a time on every
    thread."""
    peak = max((heap_peak(k.body, threads, stack_limit) for k in program.kernels), default=0)
    wide = min(threads, program.slots)  # images at once
    if program.images > 1 and wide > 1:
        serial = max((heap_peak(k.body, 1, stack_limit) for k in program.kernels), default=0)
        peak = max(peak, wide * serial)
    return peak


def emit_program(
    program: Program,
    target: CPUTarget | None = None,
    options: CodegenOptions | None = None,
    jobs: int | None = None,
    on_kernels: Callable[[int, int], None] | None = None,
) -> CPUArtifact:
    """Compile every kernel of `program` and its entry function into one object.

    `on_kernels(done, total)` is called as kernels' object code is done: at the start, then
    per group of kernels a process finishes (with jobs=1: once, at the end).

    `jobs`: worker processes (default: $TVMC_CODEGEN_JOBS, else the physical cores; 1 compiles
    in this process, and is what a caller wanting `artifact.assembly` of the whole program must
    use). Workers die with this process, however it dies (a CI timeout's SIGKILL too).
    """
    program.validate()
    target = target or CPUTarget.host()
    jobs = jobs or codegen_jobs()
    if jobs > 1 and len(program.kernels) < PARALLEL_MIN_KERNELS:
        jobs = 1
    merge_objects = target.is_native and shutil.which("ld") is not None
    groups = _partition(program.kernels, min(jobs, len(PART_MARKS)))
    main = CPUModule(target, options, name=program.entry)
    signatures = [KernelSignature.of(k) for k in program.kernels] + [entry_signature(program)]
    digest = layout_digest(program_plan(program, signatures))
    total = len(program.kernels)
    report = on_kernels or (lambda done, total: None)
    report(0, total)
    if jobs == 1:
        for kernel in program.kernels:
            main.add_kernel(kernel)
        shared_i32(main.module, SCRATCH_FAILED_SYMBOL)  # the runtime reads it after each run
        add_entry(main.module, program)
        add_layout_symbol(main.module, digest)
        artifact = main.build()
        report(total, total)
        return dataclasses.replace(artifact, kernels=artifact.kernels + (entry_signature(program),))

    context = multiprocessing.get_context("fork")  # workers inherit the initialised LLVM
    with ProcessPoolExecutor(len(groups) - 1, mp_context=context, initializer=die_with_parent,
                             initargs=(os.getpid(),)) as pool:  # fmt: skip
        futures = [pool.submit(_compile_group, g, target, options, merge_objects)
                   for g in groups[1:]]  # fmt: skip
        for kernel in groups[0]:
            main.add_kernel(kernel)
        for symbol in SHARED_SYMBOLS:  # the one definition every group's kernels share
            shared_i32(main.module, symbol)
        add_entry(main.module, program)
        add_layout_symbol(main.module, digest)
        first = main.build(emit_object=merge_objects)
        done = len(groups[0])
        report(done, total)
        for future in as_completed(futures):
            done += len(groups[1 + futures.index(future)])
            report(done, total)
        others = [f.result() for f in futures]
    signatures = {s.name: s for s in first.kernels}
    for group in others:
        signatures.update({s.name: s for s in group.kernels})
    ordered = tuple(signatures[k.name] for k in program.kernels) + (entry_signature(program),)
    merged = dataclasses.replace(
        first,
        llvm_ir="\n".join([first.llvm_ir, *(g.llvm_ir for g in others)]),
        kernel_text="\n\n".join([first.kernel_text, *(g.kernel_text for g in others)]),
        kernels=ordered,
        uses_threads=True,
    )
    if merge_objects:
        objects = [first.object_code] + [g.code for g in others]
        # assembly of a merged object: compile with jobs=1
        return dataclasses.replace(merged, object_code=_merge_objects(objects), _module=None)
    assert first._module is not None and first._tm is not None
    for group in others:
        first._module.link_in(llvm.parse_bitcode(group.code))
    return dataclasses.replace(merged, object_code=first._tm.emit_object(first._module))


def _partition(kernels: list[Kernel], jobs: int) -> list[list[Kernel]]:
    """`jobs` groups of about equal size (IR nodes), largest kernels placed first."""
    sizes = {k.name: tree_size(k.body) for k in kernels}
    groups: list[list[Kernel]] = [[] for _ in range(jobs)]
    load = [0] * jobs
    for kernel in sorted(kernels, key=lambda k: -sizes[k.name]):
        i = load.index(min(load))
        groups[i].append(kernel)
        load[i] += sizes[kernel.name]
    return [g for g in groups if g] or [[]]


@dataclasses.dataclass(frozen=True)
class _Group:
    """What a worker hands back: object code (or optimized bitcode), IR, text and signatures."""

    code: bytes
    llvm_ir: str
    kernel_text: str
    kernels: tuple[KernelSignature, ...]


def _compile_group(
    kernels: list[Kernel], target: CPUTarget, options: CodegenOptions | None, emit_object: bool
) -> _Group:
    """In a worker process: one group's object code (else its optimized bitcode), LLVM IR,
    kernel text and signatures."""
    cpu = CPUModule(target, options, name="group")
    for kernel in kernels:
        cpu.add_kernel(kernel)
    for symbol in SHARED_SYMBOLS:
        shared = cpu.module.globals.get(symbol)
        if shared is not None:
            shared.initializer = None  # a declaration: the main group defines it
    artifact = cpu.build(emit_object=emit_object)
    assert emit_object or artifact._module is not None
    code = artifact.object_code if emit_object else artifact._module.as_bitcode()
    return _Group(code, artifact.llvm_ir, artifact.kernel_text, artifact.kernels)


def _merge_objects(objects: list[bytes]) -> bytes:
    """One relocatable object from several (`ld -r`), so packages keep a single mod.o."""
    with tempfile.TemporaryDirectory(prefix="tvmc-merge-") as tmp:
        paths = []
        for i, data in enumerate(objects):
            paths.append(os.path.join(tmp, f"part{i}.o"))
            with open(paths[-1], "wb") as f:
                f.write(constant_pool_labels_of_part(data, i))
        out = os.path.join(tmp, "merged.o")
        done = subprocess.run(["ld", "-r", "-o", out, *paths], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"merging objects failed: {done.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read()


def constant_pool_labels_of_part(object_code: bytes, part: int) -> bytes:
    """The ELF object with its constant-pool labels (`.LCPI<f>_<n>`) renamed for `part`, in
    place (`.LCPA...`, `.LCPB...`: same length, so nothing moves). LLVM keeps these labels in
    the symbol table (relocations into mergeable sections need them), every part numbers them
    from 0, and MCJIT binds a relocation by name to one of the same-named labels of the merged
    object, whichever part's it is."""
    if part >= len(PART_MARKS):
        raise ValueError(f"at most {len(PART_MARKS)} parts can be merged, got part {part}")
    data = bytearray(object_code)
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian 64-bit ELF object")
    shoff, (shentsize, shnum) = _u(data, 0x28, "Q")[0], _u(data, 0x3A, "HH")
    sections = [_u(data, shoff + i * shentsize, "IIQQQQII") for i in range(shnum)]
    for _, kind, _, _, offset, size, link, _ in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strtab = sections[link][4]
        for at in range(offset, offset + size, 24):
            name = strtab + _u(data, at, "I")[0]
            if data[name : name + 5] == b".LCPI":
                data[name + 4] = PART_MARKS[part]
    return bytes(data)


def _u(data: bytearray, at: int, fmt: str) -> tuple[int, ...]:
    return struct.unpack_from("<" + fmt, data, at)


def add_layout_symbol(module: ir.Module, digest: str) -> ir.GlobalVariable:
    """Define the exported constant `__tvmc_layout` (the digest's hex text) in `module`."""
    data = bytearray(digest.encode("ascii"))
    if len(data) != LAYOUT_BYTES:
        raise ValueError(f"a layout digest is {LAYOUT_BYTES} hex digits, got {len(data)}")
    typ = ir.ArrayType(ir.IntType(8), LAYOUT_BYTES)
    symbol = ir.GlobalVariable(module, typ, LAYOUT_SYMBOL)
    symbol.global_constant = True
    symbol.initializer = ir.Constant(typ, data)
    return symbol
