"""The runtimes tvmc is measured against, set up alike: onnxruntime and OpenVINO (CPU plugin,
fp32 inference precision, latency hint), each on `threads` threads, one inference per call.

OpenVINO is optional (the `dev` extra installs it): without it `openvino_session` returns None
and the benchmarks leave its column out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

Session = Callable[[], list[np.ndarray]]  # one inference on the bound inputs: the outputs


def onnxruntime_session(path: str, inputs: Mapping[str, np.ndarray], threads: int) -> Session:
    """onnxruntime's CPU provider, `threads` intra-op threads, one inter-op thread."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, inputs)


def openvino_version() -> str | None:
    """The installed OpenVINO's version, or None when it is not installed."""
    try:
        import openvino
    except ImportError:
        return None
    return openvino.__version__.split("-")[0]


def openvino_session(path: str, inputs: Mapping[str, np.ndarray], threads: int) -> Session | None:
    """OpenVINO's CPU plugin in fp32 (no bf16/fp16 downcast), latency hint, `threads` threads."""
    if openvino_version() is None:
        return None
    import openvino as ov

    config = {
        "INFERENCE_PRECISION_HINT": "f32",
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": threads,
    }
    compiled = ov.Core().compile_model(path, "CPU", config)
    request = compiled.create_infer_request()
    feed = dict(inputs)

    def infer() -> list[np.ndarray]:
        request.infer(feed)
        return [request.get_output_tensor(i).data for i in range(len(compiled.outputs))]

    return infer
