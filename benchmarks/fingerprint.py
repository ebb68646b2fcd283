"""Fingerprints of the code tvmc generates for the light models, to prove a refactor changed none.

    python benchmarks/fingerprint.py > before.txt   # on the old tree
    python benchmarks/fingerprint.py > after.txt    # on the new one; then diff the two

Per model and target (llvm for this host, cuda -arch=sm_90): a digest of the kernel IR text, the
optimized LLVM IR, the object code (or PTX) and the program's buffers and calls. One code
generation process, so the object is the same whatever the core count.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile

import onnx

import tvmc
from tvmc.driver.compiler import CompileOptions, build
from tvmc.models import LIGHT_MODELS, randomized_light_model


def digest(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:16]


def fingerprint(graph, target: str) -> dict[str, str]:
    """Digests of what `build` makes of `graph` for `target`."""
    result = build(graph, CompileOptions(target=target, codegen_jobs=1))
    art, program = result.artifact, result.lowered.program
    calls = [(c.kernel, c.args, c.node, c.flops) for c in program.calls]
    buffers = sorted((b.name, b.shape, b.dtype, b.storage, b.index, b.offset)
                     for b in program.buffers.values())  # fmt: skip
    plan = json.dumps([calls, buffers, program.workspace_bytes], default=str)
    code = art.ptx if hasattr(art, "ptx") else art.object_code
    return {"kernels": digest(art.kernel_text), "llvm_ir": digest(art.llvm_ir),
            "code": digest(code), "program": digest(plan)}  # fmt: skip


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
