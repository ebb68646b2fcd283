"""The stages of `make gpu-check`, each run in its own process by benchmarks/gpu_check.py.

`python benchmarks/gpu_stages.py STAGE --out FILE --deadline EPOCH [--dir DIR] [--smoke]` appends
one JSON line per case to FILE as soon as the case ends (so a stage killed at its time limit
keeps what it finished). A case is {"stage", "case", "status": ok | fail | built | skip,
"detail", ...figures}; `built` means compiled (and assembled by ptxas) but not run: no GPU.
Needs only what the lent GPU machine has (numpy, onnx, onnxruntime, llvmlite, cuda-bindings,
torch, torchvision): no pytest, no xgboost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import onnx  # noqa: E402

import tvmc  # noqa: E402
from benchmarks.gpu_cases import OP_CASES, SMOKE_OPS, max_error  # noqa: E402
from tvmc.errors import TVMCError  # noqa: E402
from tvmc.models import LIGHT_MODELS, light_model_inputs, randomized_light_model  # noqa: E402
from tvmc.runtime import cuda_driver  # noqa: E402

TOLERANCE = 1e-3  # max |tvmc - onnxruntime| / max |onnxruntime|: fp32 sums in another order
HEAVY_MODELS_LAST = ("light_vgg19", "light_bvlc_alexnet", "light_zfnet512")  # big weights


class Stage:
    """Writes cases as they end; knows the deadline, the arch and whether a GPU is here."""

    def __init__(self, name: str, out: str, deadline: float, directory: str, smoke: bool):
        self.name, self.out, self.deadline = name, out, deadline
        self.dir, self.smoke = directory, smoke
        cuda_driver.device.cache_clear()
        self.gpu_error = ""
        try:
            self.gpu = cuda_driver.device()
        except TVMCError as exc:
            self.gpu, self.gpu_error = None, str(exc)
        self.arch = self.gpu.arch if self.gpu else "sm_90"
        self.target = f"cuda -arch={self.arch}"

    def left(self) -> float:
        return self.deadline - time.time()

    def emit(self, case: str, status: str, detail: str = "", **figures: Any) -> None:
        row = {"stage": self.name, "case": case, "status": status, "detail": detail[:400],
               **figures}  # fmt: skip
        with open(self.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[{self.name}] {case}: {status} {detail[:200]}", flush=True)

    def case(self, name: str, fn: Callable[[], tuple[str, str, dict[str, Any]]],
             need: float = 5.0) -> None:  # fmt: skip
        """Run one case unless too little time is left; an exception fails this case alone."""
        if self.left() < need:
            self.emit(name, "skip", "out of time")
            return
        start = time.time()
        try:
            status, detail, figures = fn()
        except Exception as exc:  # one failure must not stop the rest
            last = traceback.format_exc().strip().splitlines()[-1]
            status, detail, figures = "fail", f"{type(exc).__name__}: {exc} ({last})", {}
        self.emit(name, status, detail, seconds=round(time.time() - start, 2), **figures)


def assemble(ptx: str, arch: str) -> str:
    """'' when ptxas accepts the PTX (or is not installed), else its complaint."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{tmp}/m.ptx", "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, f"-arch={arch}", f"{tmp}/m.ptx", "-o", f"{tmp}/m.cubin"],
                              capture_output=True, text=True)  # fmt: skip
    if done.returncode and "Unsupported gpu architecture" not in done.stderr:
        return done.stderr.strip()[-300:]
    return ""


def run_ort(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def check_model(stage: Stage, name: str, model: onnx.ModelProto, inputs: dict[str, np.ndarray],
                package_path: str, config: dict[str, Any] | None = None,
                ) -> tuple[str, str, dict[str, Any]]:  # fmt: skip
    """Compile for the GPU (with `config` for the model's one task); run there against
    onnxruntime, or (no GPU) assemble with ptxas."""
    start = time.time()
    loaded = _load(model, name)
    records = _config_record(stage, loaded, name, config) if config else None
    package = tvmc.compile(loaded, target=stage.target, package_path=package_path,
                           tuning_records=records)  # fmt: skip
    compile_s = round(time.time() - start, 2)
    if stage.gpu is None:
        problem = assemble(package._contents.ptx or "", stage.arch)
        if problem:
            return "fail", f"ptxas: {problem}", {"compile_s": compile_s}
        return "built", "compiled; PTX assembles (no GPU to run it)", {"compile_s": compile_s}
    result = package.run(device="cuda", inputs=inputs)
    expected = run_ort(model, inputs)
    errors = [max_error(result.outputs[f"output_{i}"], want) for i, want in enumerate(expected)]
    worst = max(errors) if errors else 0.0
    status = "ok" if worst <= TOLERANCE else "fail"
    return status, f"max rel error {worst:.2e}", {"error": worst, "compile_s": compile_s}


def _config_record(stage: Stage, model: tvmc.TVMCModel, name: str, config: dict[str, Any]) -> str:
    """A records file choosing `config` (the rest default) for the model's only task."""
    from tvmc.autotune.records import Record, append_records

    (task,) = tvmc.extract_tasks(model, target=stage.target)
    space = task.space
    values = {**space.get(space.default_index or 0).values, **config}
    index = space.index_of(values)
    if index is None:
        raise ValueError(f"{config} is not a config of {task.name}'s space")
    path = os.path.join(stage.dir, f"{name}-config.json")
    if os.path.exists(path):
        os.remove(path)
    append_records(path, [Record(task.target, task.name, task.args,
                                 space.get(index).to_json(), [1e-3])])  # fmt: skip
    return path


def _load(model: onnx.ModelProto, name: str) -> tvmc.TVMCModel:
    path = os.path.join(tempfile.mkdtemp(prefix="gpu-check-"), f"{name}.onnx")
    onnx.save(model, path)
    return tvmc.load(path)


# ---- stages --------------------------------------------------------------------------------------
def stage_env(stage: Stage) -> None:
    """What this machine is: the GPU (or why there is none), its peak, the tools."""
    figures: dict[str, Any] = {"python": sys.version.split()[0],
                               "ptxas": bool(shutil.which("ptxas"))}  # fmt: skip
    if stage.gpu is None:
        stage.emit("gpu", "fail", stage.gpu_error, **figures)
        return
    figures.update(name=stage.gpu.name, arch=stage.arch, peak_gflops=peak_gflops())
    stage.emit("gpu", "ok", f"{stage.gpu.name} ({stage.arch})", **figures)


def peak_gflops() -> float | None:
    """FP32 peak: SMs x FP32 lanes per SM x 2 (FMA) x clock."""
    drv = cuda_driver.driver()
    dev = cuda_driver.device()
    attr = drv.CUdevice_attribute
    try:
        sms = cuda_driver.check(drv.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev.handle), "SM count")  # fmt: skip
        khz = cuda_driver.check(drv.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev.handle), "clock rate")  # fmt: skip
    except Exception:
        return None
    major, minor = dev.capability
    lanes = 64 if major < 8 or (major, minor) == (8, 0) else 128
    return sms * lanes * 2 * khz / 1e6


def stage_ops(stage: Stage) -> None:
    """Every op family on a small single-node model."""
    cases = [c for c in OP_CASES if not stage.smoke or c.name in SMOKE_OPS]
    for case in cases:
        model, inputs = case.build()
        path = os.path.join(stage.dir, f"op-{case.name}.tar")
        stage.case(case.name, lambda m=model, i=inputs, n=case.name, p=path, c=case.config:
                   check_model(stage, n, m, i, p, c))  # fmt: skip


def stage_models(stage: Stage) -> None:
    """The nine light models with seeded random weights, against onnxruntime on the CPU."""
    names = [n for n in LIGHT_MODELS if n not in HEAVY_MODELS_LAST] + [
        n for n in HEAVY_MODELS_LAST if n in LIGHT_MODELS]  # fmt: skip
    if stage.smoke:
        names = ["light_squeezenet"]
    for name in names:

        def one(name: str = name) -> tuple[str, str, dict[str, Any]]:
            model = randomized_light_model(name)
            path = os.path.join(stage.dir, f"{name}.tar")
            return check_model(stage, name, model, light_model_inputs(model), path)

        stage.case(name, one, need=20.0)


def stage_bench(stage: Stage) -> None:
    """ResNet-50 batch 1 on the GPU: latency (GPU alone and end to end), heaviest kernels."""
    if stage.gpu is None:
        stage.emit("resnet50", "skip", "no GPU")
        return
    records = os.path.join(stage.dir, "resnet50-records.json")
    variants = [("tvmc untuned", None)]
    if os.path.exists(records):
        variants.append(("tvmc tuned", records))
    model = randomized_light_model("light_resnet50")
    inputs = light_model_inputs(model)
    loaded = _load(model, "light_resnet50")
    peak = peak_gflops()
    for label, log in variants:

        def one(log: str | None = log) -> tuple[str, str, dict[str, Any]]:
            path = os.path.join(stage.dir, "light_resnet50.tar")
            if log is not None or not os.path.exists(path):
                path = os.path.join(stage.dir, f"resnet50-{'tuned' if log else 'untuned'}.tar")
                tvmc.compile(loaded, target=stage.target, package_path=path, tuning_records=log)
            package = tvmc.TVMCPackage(path)
            gpu = package.run(device="cuda", inputs=inputs, benchmark=True, repeat=30, number=10)
            e2e = package.run(device="cuda", inputs=inputs, benchmark=True, repeat=10, number=5,
                              end_to_end=True)  # fmt: skip
            rows = package.run(device="cuda", inputs=inputs, profile=True, repeat=20).profile
            heavy = sorted((r for r in rows if r["flops"]), key=lambda r: -r["time_ms"])[:5]
            kernels = [{"kernel": r["kernel"], "time_ms": round(r["time_ms"], 4),
                        "gflops": round(r["gflops"] or 0, 1),
                        "of_peak": round((r["gflops"] or 0) / peak, 3) if peak else None}
                       for r in heavy]  # fmt: skip
            return "ok", f"median {gpu.times.median:.3f} ms (end to end {e2e.times.median:.3f})", {
                "median_ms": gpu.times.median, "e2e_median_ms": e2e.times.median,
                "heaviest": kernels, "peak_gflops": peak}  # fmt: skip

        stage.case(label, one, need=30.0)


def stage_torch(stage: Stage) -> None:
    """torchvision's resnet50 (random weights), batch 1 fp32: eager and torch.compile."""
    if stage.gpu is None:
        stage.emit("torch", "skip", "no GPU")
        return
    import torch
    import torchvision

    model = torchvision.models.resnet50(weights=None).cuda().eval()
    x = torch.randn(1, 3, 224, 224, device="cuda")

    def median_ms(fn: Callable[[], Any], runs: int = 50) -> float:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    with torch.inference_mode():
        stage.case("torch eager", lambda: ("ok", "", {"median_ms": median_ms(lambda: model(x))}))
        compiled = torch.compile(model, mode="reduce-overhead")
        stage.case("torch.compile", lambda: ("ok", "reduce-overhead (CUDA graphs)",
                                             {"median_ms": median_ms(lambda: compiled(x))}),
                   need=60.0)  # fmt: skip


def stage_tune(stage: Stage) -> None:
    """A short tuning run of ResNet-50's heaviest tasks on the GPU (records for stage bench)."""
    if stage.gpu is None:
        stage.emit("tune", "skip", "no GPU")
        return
    from tvmc.autotune.local import LocalMeasurer
    from tvmc.autotune.measure import MeasureInput, MeasureOptions
    from tvmc.autotune.records import Record, append_records
    from tvmc.autotune.tuners import TUNERS

    model = _load(randomized_light_model("light_resnet50"), "light_resnet50")
    tasks = tvmc.extract_tasks(model, target=stage.target)
    tasks = sorted(tasks, key=lambda t: -t.flops * t.weight)[:6]
    records = os.path.join(stage.dir, "resnet50-records.json")
    options = MeasureOptions(repeat=3, min_repeat_ms=50, timeout=20, build_timeout=30)
    per_task = max(stage.left() - 30, 0) / max(len(tasks), 1)
    with LocalMeasurer(options, stage.target) as measurer:
        for task in tasks:

            def one(task=task) -> tuple[str, str, dict[str, Any]]:
                tuner, stop, best = TUNERS["ga"](task, seed=0), time.time() + per_task, None
                while tuner.has_next() and time.time() < stop:
                    batch = [MeasureInput(task, c) for c in tuner.next_batch(8)]
                    results = measurer.measure(batch)
                    tuner.update(batch, results)
                    append_records(records, [Record(task.target, task.name, task.args,
                                                    i.config.to_json(), list(r.costs), r.error_no,
                                                    r.all_cost, r.timestamp)
                                             for i, r in zip(batch, results)])  # fmt: skip
                    best = tuner.best_cost
                gflops = task.flops / best / 1e9 if best and best < 1e8 else 0.0
                return "ok", f"{tuner.trials_done} trials, best {gflops:.0f} GFLOP/s", {
                    "trials": tuner.trials_done, "best_gflops": gflops}  # fmt: skip

            stage.case(task.name, one, need=20.0)


STAGES = {"env": stage_env, "ops": stage_ops, "models": stage_models, "tune": stage_tune,
          "bench": stage_bench, "torch": stage_torch}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=list(STAGES))
    parser.add_argument("--out", required=True)
    parser.add_argument("--deadline", type=float, required=True)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    stage = Stage(args.stage, args.out, args.deadline, args.dir, args.smoke)
    STAGES[args.stage](stage)


if __name__ == "__main__":
    main()
