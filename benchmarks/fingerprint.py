"""Fingerprints of the code tvmc generates for the light models, to prove a refactor changed none.

    python benchmarks/fingerprint.py > before.txt   # on the old tree
    python benchmarks/fingerprint.py > after.txt    # on the new one; then diff the two

Per model and target (llvm for this host, cuda -arch=sm_90): a digest of the kernel IR text, the
optimized LLVM IR, the object code (or PTX) and the program's buffers and calls. One code
generation process, so the object is the same whatever the core count. `ir_code` and `text` are
the LLVM IR and the code without the layout digest a package's code carries (`__tvmc_layout`,
docs/package-format.md), and for objects only their executable sections: what must not change
when only the plan's digest does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile

import llvmlite.binding as llvm
import onnx

import tvmc
from tvmc.driver.compiler import CompileOptions, build
from tvmc.models import LIGHT_MODELS, randomized_light_model


def digest(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:16]


LAYOUT_MARK = "__tvmc_layout"  # the layout digest's symbol (CPU) and line (PTX)


def without_layout(text: str) -> str:
    """`text` without the lines naming the layout digest."""
    return "\n".join(line for line in text.splitlines() if LAYOUT_MARK not in line)


def text_sections(object_code: bytes) -> bytes:
    """The executable sections of an object file, named and concatenated."""
    parts = []
    for section in llvm.ObjectFileRef.from_data(object_code).sections():
        if section.is_text():
            parts.append(bytes(section.name()) + b"\0" + bytes(section.data()))
    return b"".join(parts)


def fingerprint(graph, target: str) -> dict[str, str]:
    """Digests of what `build` makes of `graph` for `target`."""
    result = build(graph, CompileOptions(target=target, codegen_jobs=1))
    art, program = result.artifact, result.lowered.program
    calls = [(c.kernel, c.args, c.node, c.flops) for c in program.calls]
    buffers = sorted((b.name, b.shape, b.dtype, b.storage, b.index, b.offset)
                     for b in program.buffers.values())  # fmt: skip
    plan = json.dumps([calls, buffers, program.workspace_bytes], default=str)
    cuda = hasattr(art, "ptx")
    code = art.ptx if cuda else art.object_code
    text = without_layout(art.ptx) if cuda else text_sections(art.object_code)
    return {"kernels": digest(art.kernel_text), "llvm_ir": digest(art.llvm_ir),
            "code": digest(code), "program": digest(plan),
            "ir_code": digest(without_layout(art.llvm_ir)), "text": digest(text)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(LIGHT_MODELS))
    parser.add_argument("--targets", default="llvm,cuda -arch=sm_90")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            path = f"{tmp}/{name}.onnx"
            onnx.save(randomized_light_model(name), path)
            graph = tvmc.load(path).graph
            for target in args.targets.split(","):
                parts = fingerprint(graph, target)
                print(name, target.split()[0], *(f"{k}={v}" for k, v in parts.items()))
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
