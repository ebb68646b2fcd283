"""Export the model zoo (tests/models/zoo): shrunk real architectures, random weights, to ONNX.

    /work/zoo-venv/bin/python benchmarks/zoo/export.py                 # every model
    /work/zoo-venv/bin/python benchmarks/zoo/export.py bert swin       # some
    /work/zoo-venv/bin/python benchmarks/zoo/export.py --full vit_b_16 # full size, into /tmp

Needs torch, transformers, onnx, onnxscript and onnxruntime (not tvmc's .venv: the tests read only
what this writes). Per model: build it with a fixed seed, perturb every constant-valued parameter
and BatchNorm statistic (so a dropped norm scale or bias shows), export with the default exporter
(dynamo; TorchScript when dynamo fails) at its default opset and static shapes, run onnxruntime,
and write <name>.onnx, <name>.npz (input_i, output_i) and an entry of manifest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import hf_models
import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch_flow_det
import torch_models
import transformers

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "models" / "zoo"
SEED = 0

# name -> (family, source)
ZOO = {
    "resnet": ("cnn classifier", "transformers ResNet (bottleneck, ResNet-50's blocks)"),
    "mobilenet_v2": ("cnn classifier", "transformers MobileNetV2"),
    "mobilenet_v3": ("cnn classifier", "hand-written, torchvision mobilenet_v3_small layout"),
    "efficientnet": ("cnn classifier", "transformers EfficientNet (v1, B0 layout)"),
    "efficientnet_v2": ("cnn classifier", "hand-written, torchvision efficientnet_v2_s layout"),
    "convnext": ("cnn classifier", "transformers ConvNext"),
    "regnet": ("cnn classifier", "transformers RegNet (Y: group conv + SE)"),
    "densenet": ("cnn classifier", "hand-written, torchvision densenet layout"),
    "squeezenet": ("cnn classifier", "hand-written, torchvision squeezenet1_1 layout"),
    "unet": ("segmentation", "hand-written U-Net (ConvTranspose and bilinear Resize)"),
    "deeplab_head": ("segmentation", "hand-written DeepLabv3 ASPP head on a small backbone"),
    "r2plus1d": ("video (3-D conv)", "hand-written, torchvision r2plus1d_18 layout"),
    "bert": ("text encoder", "transformers BertModel"),
    "roberta": ("text encoder", "transformers RobertaModel"),
    "albert": ("text encoder", "transformers AlbertModel"),
    "distilbert": ("text encoder", "transformers DistilBertModel"),
    "gpt2": ("decoder LM", "transformers GPT2LMHeadModel"),
    "t5_encoder": ("text encoder", "transformers T5EncoderModel (gated-gelu)"),
    "llama": ("decoder LM", "transformers LlamaForCausalLM (RMSNorm, RoPE, SwiGLU, GQA 4:2)"),
    "vit": ("vision transformer", "transformers ViTForImageClassification"),
    "swin": ("vision transformer", "transformers SwinForImageClassification"),
    "clip_text": ("multimodal tower", "transformers CLIPTextModelWithProjection"),
    "clip_vision": ("multimodal tower", "transformers CLIPVisionModelWithProjection"),
    "whisper_encoder": ("speech", "transformers WhisperModel encoder"),
    "wav2vec2": ("speech", "transformers Wav2Vec2Model"),
    "raft_tiny": ("optical flow", "hand-written RAFT-like net (correlation volume, GridSample)"),
    "fcos_tiny": ("detection", "hand-written FCOS-like detector, raw boxes and scores"),
}
BUILDERS = {**hf_models.BUILDERS, **torch_models.BUILDERS, **torch_flow_det.BUILDERS}
FULL = {"vit_b_16": hf_models.vit_b_16}
EXPORT_SETTINGS = {
    "call": "torch.onnx.export(model, args, f, dynamo=True, external_data=False, input_names, "
    "output_names); dynamo=False (TorchScript) only when dynamo fails",
    "opset": "the exporter's default",
    "shapes": "static (no dynamic_shapes), batch 1",
    "optimize": "the exporter's default (onnxscript optimizer: folds BatchNorm into Conv)",
    "attention": "transformers models with attn_implementation='eager'",
    "weights": "float32, random init with seed 0, then constant-valued parameters and BatchNorm "
    "statistics perturbed",
    "stripped": "node metadata_props and doc_string (stack traces, FX nodes)",
    "reference": "onnxruntime CPUExecutionProvider, 1 intra-op thread",
}


def perturb(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Random BatchNorm statistics, and noise on parameters whose values are all equal."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                n = module.running_mean.shape
                module.running_mean.copy_(0.1 * torch.randn(n, generator=generator))
                module.running_var.copy_(0.5 + torch.rand(n, generator=generator))
        for param in model.parameters():
            flat = param.flatten()
            if flat.numel() > 1 and bool((flat == flat[0]).all()):
                param.add_(0.1 * torch.randn(param.shape, generator=generator))


def export(model, inputs: dict, path: Path) -> tuple[str, str]:
    """Write the ONNX file; returns (exporter used, why dynamo was not, or '')."""
    args, names = tuple(inputs.values()), list(inputs)
    with torch.no_grad():
        outputs = model(*args)
    output_names = [f"output_{i}" for i in range(len(outputs))]
    if hasattr(model, "output_names"):
        output_names = list(model.output_names)
    common = dict(input_names=names, output_names=output_names)
    try:
        torch.onnx.export(model, args, str(path), dynamo=True, external_data=False, **common)
        return "dynamo", ""
    except Exception as error:  # noqa: BLE001  (any exporter failure: try the other one)
        reason = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
        torch.onnx.export(model, args, str(path), dynamo=False, **common)
        return "torchscript", reason


def run_ort(path: Path, inputs: dict) -> list[np.ndarray]:
    """onnxruntime's outputs on the CPU, one thread (reproducible sums)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {k: v.numpy() for k, v in inputs.items()})


def export_one(name: str, builder, out: Path, family: str, source: str) -> dict:
    """Build, export, run and save one model; its manifest entry."""
    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED)
    model, inputs, settings = builder(generator)
    model.eval()
    perturb(model, generator)
    path = out / f"{name}.onnx"
    exporter, dynamo_error = export(model, inputs, path)
    proto = onnx.load(str(path))
    for node in proto.graph.node:  # the exporter's debugging metadata: stack traces, FX nodes
        del node.metadata_props[:]
        node.doc_string = ""
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))  # one self-contained file
    expected = run_ort(path, inputs)
    with torch.no_grad():
        reference = [t.numpy() for t in model(*inputs.values())]
    torch_diff = max(float(np.abs(a - b).max()) for a, b in zip(expected, reference))
    scale = max(float(np.abs(a).max()) for a in reference)
    if not torch_diff <= 1e-4 * scale:  # an exporter bug, not a tvmc one: stop here
        raise RuntimeError(f"{name}: onnxruntime differs from torch by {torch_diff:.2e}")
    arrays = {f"input_{i}": v.numpy() for i, v in enumerate(inputs.values())}
    arrays.update({f"output_{i}": v for i, v in enumerate(expected)})
    np.savez(out / f"{name}.npz", **arrays)
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    return {
        "name": name,
        "family": family,
        "source": source,
        "settings": settings,
        "params": sum(p.numel() for p in model.parameters()),
        "inputs": [
            {"name": k, "shape": list(v.shape), "dtype": str(v.numpy().dtype)}
            for k, v in inputs.items()
        ],
        "outputs": [
            {"name": o.name, "shape": list(e.shape), "dtype": str(e.dtype)}
            for o, e in zip(proto.graph.output, expected)
        ],
        "opset": opset,
        "exporter": exporter,
        "dynamo_error": dynamo_error,
        "max_abs_diff_torch_vs_ort": torch_diff,
        "onnx_bytes": path.stat().st_size,
        "npz_bytes": (out / f"{name}.npz").stat().st_size,
        "nodes": len(proto.graph.node),
        "ops": sorted({n.op_type for n in proto.graph.node}),
    }


def main(argv: list[str] | None = None) -> int:
    """Export the named models (default: all) and update the manifest."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"models (default: all): {', '.join(ZOO)}")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--full", choices=sorted(FULL), help="a full-size model, into /tmp/zoo")
    args = parser.parse_args(argv)
    if args.full:
        out = Path("/tmp/zoo")
        out.mkdir(exist_ok=True)
        entry = export_one(args.full, FULL[args.full], out, "full size", "transformers")
        print(json.dumps(entry, indent=1))
        return 0
    unknown = [n for n in args.names if n not in ZOO]
    if unknown:
        parser.error(f"unknown models {unknown}; valid: {', '.join(ZOO)}")
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": []}
    entries = {e["name"]: e for e in old["models"]}
    for name in args.names or list(ZOO):
        family, source = ZOO[name]
        entry = export_one(name, BUILDERS[name], args.out, family, source)
        entries[name] = entry
        print(
            f"{name:16} {entry['exporter']:11} opset {entry['opset']:2} "
            f"{entry['params']:8,} params {entry['onnx_bytes'] / 1e3:7.1f} kB "
            f"torch-vs-ort {entry['max_abs_diff_torch_vs_ort']:.1e}",
            flush=True,
        )
    manifest = {
        "generated_by": "benchmarks/zoo/export.py",
        "seed": SEED,
        "export_settings": EXPORT_SETTINGS,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": ort.__version__,
            "python": sys.version.split()[0],
        },
        "models": [entries[n] for n in ZOO if n in entries],
    }
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(e["onnx_bytes"] + e["npz_bytes"] for e in manifest["models"])
    print(f"total {total / 1e6:.2f} MB in {os.path.relpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
