"""A whole Program as one module: every kernel plus the entry function that calls them in order.

    void tvmc_main(void **args, void *workspace)

`args` holds the inputs, outputs and params (the Program's order); each call passes its kernel
the right pointers: an `args` slot, or `workspace + offset`. Running a model is one foreign call.
"""

from __future__ import annotations

import dataclasses

from llvmlite import ir

from tvmc.codegen.llvm_cpu import CodegenOptions, CPUArtifact, CPUModule, KernelSignature
from tvmc.codegen.llvm_util import PTR, VOID
from tvmc.codegen.target import CPUTarget
from tvmc.kernel.program import Program

I8, I64 = ir.IntType(8), ir.IntType(64)


def entry_signature(program: Program) -> KernelSignature:
    """The entry's calling signature, as loaders expect one for every exported function."""
    slots = len(program.inputs) + len(program.outputs) + len(program.params)
    params = (
        ("args", (max(slots, 1),), "uint64"),
        ("workspace", (max(program.workspace_bytes, 1),), "uint8"),
    )
    return KernelSignature(program.entry, params)


def add_entry(module: ir.Module, program: Program) -> ir.Function:
    """Define the entry function in `module` (its kernels must be defined there already)."""
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR]), program.entry)
    fn.attributes.add("nounwind")
    args, workspace = fn.args
    args.name, workspace.name = "args", "workspace"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    first_slot = {"input": 0, "output": len(program.inputs)}
    first_slot["param"] = first_slot["output"] + len(program.outputs)
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
            pointers[name] = ptr
        return pointers[name]

    kernels = {k.name: module.get_global(k.name) for k in program.kernels}
    for call in program.calls:
        b.call(kernels[call.kernel], [pointer(a) for a in call.args])
    b.ret_void()
    return fn


def emit_program(
    program: Program, target: CPUTarget | None = None, options: CodegenOptions | None = None
) -> CPUArtifact:
    """Compile every kernel of `program` and its entry function into one object."""
    program.validate()
    cpu = CPUModule(target, options, name=program.entry)
    for kernel in program.kernels:
        cpu.add_kernel(kernel)
    add_entry(cpu.module, program)
    artifact = cpu.build()
    return dataclasses.replace(artifact, kernels=artifact.kernels + (entry_signature(program),))
