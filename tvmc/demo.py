"""`make demo`: take a model that ships with the onnx wheel through what tvmc does today.

Steps: load light_squeezenet (randomized weights) with tvmc, show its summary, save it as a
.tvmc file, reload it, and check tvmc's reference evaluation against onnxruntime.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import onnx

import tvmc
from tvmc.models import light_model_inputs, randomized_light_model
from tvmc.ops import run_reference

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
    print("      " + "\n      ".join(model.summary().splitlines()[:4]))

    saved = model.save(os.path.join(out_dir, f"{MODEL}.tvmc"))
    again = tvmc.load(saved)
    print(f"[3/4] saved and reloaded {saved} ({os.path.getsize(saved) / 1e6:.1f} MB)")

    inputs = light_model_inputs(onnx_model)
    start = time.perf_counter()
    ours = run_reference(again.graph, inputs)[again.graph.outputs[0]]
    seconds = time.perf_counter() - start
    import onnxruntime as ort

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    theirs = session.run(None, inputs)[0]
    error = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
    print(f"[4/4] reference evaluation ({seconds:.2f} s) vs onnxruntime: "
          f"max error {error:.1e} relative to the largest logit; top-1 class "
          f"{int(ours.argmax())} vs {int(theirs.argmax())}")  # fmt: skip
    if error > 1e-4:
        sys.exit("demo failed: tvmc and onnxruntime disagree")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo-out")
