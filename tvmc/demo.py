"""`make demo`: a model that ships with the onnx wheel, from ONNX to timed native code.

Steps: write light_squeezenet with seeded random weights, load it, compile it for this CPU,
run it with timing, and check the result against onnxruntime on the same input.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import onnx

import tvmc
from tvmc.models import light_model_inputs, randomized_light_model

MODEL = "light_squeezenet"


def main(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    onnx_path = os.path.join(out_dir, f"{MODEL}.onnx")
    onnx_model = randomized_light_model(MODEL)
    onnx.save(onnx_model, onnx_path)
    print(f"[1/4] wrote {onnx_path} ({MODEL} from the onnx wheel, seeded random weights)")

    start = time.perf_counter()
    model = tvmc.load(onnx_path)
    print(f"[2/4] tvmc.load: {len(model.graph.nodes)} nodes, {len(model.params)} params "
          f"in {time.perf_counter() - start:.2f} s")  # fmt: skip

    start = time.perf_counter()
    package_path = os.path.join(out_dir, f"{MODEL}.tar")
    package = tvmc.compile(model, target="llvm", package_path=package_path)
    kernels = package.metadata.get("kernels", "?")
    print(f"[3/4] tvmc.compile: {package_path} ({kernels} kernels) "
          f"in {time.perf_counter() - start:.1f} s")  # fmt: skip

    inputs = light_model_inputs(onnx_model)
    result = tvmc.run(package, inputs=inputs, benchmark=True, repeat=20)
    print("[4/4] tvmc.run:")
    print(result.format_times())
    import onnxruntime as ort

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    theirs = session.run(None, inputs)[0]
    ours = result.get_output(model.graph.outputs[0]).reshape(theirs.shape)
    error = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
    start = time.perf_counter()
    for _ in range(20):
        session.run(None, inputs)
    ort_ms = (time.perf_counter() - start) / 20 * 1e3
    print(f"onnxruntime: {ort_ms:.2f} ms mean; tvmc/onnxruntime: {result.times.mean / ort_ms:.2f}")
    print(f"max error vs onnxruntime: {error:.1e} of the largest logit; top-1 class "
          f"{int(ours.argmax())} vs {int(theirs.argmax())}")  # fmt: skip
    if error > 1e-4:
        sys.exit("demo failed: tvmc and onnxruntime disagree")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo-out")
