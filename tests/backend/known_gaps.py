"""Node tests of supported ops that tvmc does not pass, each with its reason.

Kept honest by test_node_conformance: every rule must match a real case, and a listed case that
starts passing fails the suite.
"""

from __future__ import annotations

import re

# (pattern over case names, reason)
GAP_RULES: list[tuple[str, str]] = [
    (r"test_batchnorm_\w+_training_mode", "BatchNormalization training_mode=1: inference only"),
    (r"test_training_dropout(_default)?(_mask)?",
     "Dropout in training mode with a ratio above 0 draws random numbers: inference only (a "
     "ratio of 0 passes)"),
    (r"test_(de)?quantizelinear_(e4m3fn|e5m2|float4e2m1|u?int4|u?int2)\w*",
     "QuantizeLinear/DequantizeLinear with float8/float4/int4/int2 quantized types: not yet "
     "(the types are supported; the quantization ops take 8-, 16- and 32-bit integers)"),
    (r"test_attention_\w+_bf16(_expanded)?",
     "bfloat16: up to two bfloat16 ulps off the expected output (rtol 1e-3 is a quarter of one), "
     "which rounds every intermediate, MatMul's partial sums included, to bfloat16 (tvmc "
     "accumulates in float32 and rounds once where a value is stored)"),
    (r"test_attention_4d_causal_fp16(_expanded)?",
     "float16: one ulp off the expected output, which rounds every intermediate to float16 "
     "(tvmc's MatMul accumulates in float32)"),
    (r"test_equal_string\w*", "string tensors are not supported"),
    (r"test_identity_(opt|sequence)", "optional and sequence types are not supported"),
    (r"test_if_(opt|seq)|test_loop\d+_seq\w*",
     "If/Loop with optional or sequence values: sequences and optionals are not supported"),
    (r"test_not_[234]d", "opset 1 model: tvmc supports opsets 7 to 22"),
    (r"test_resize_\w+_antialias", "antialiased downsampling is not supported"),
    (r"test_dft_inverse(_opset19)?",
     "the expected Nyquist bin's imaginary part, exactly 0 for this real input, holds 1.9e-7 of "
     "float32 FFT rounding, above the case's atol of 1e-7: tvmc's float32 result is within "
     "1e-14 of 0 (onnxruntime, 7e-6 off, fails it too)"),
    (r"test_maxunpool_export_with_output_shape",
     "MaxUnpool with output_shape: tvmc reads the indices in the output_shape frame, as "
     "onnxruntime does (MaxPool's indices of the original, larger input); ONNX's reference reads "
     "them in the frame of the shape inferred from the kernel and places that in a corner"),
    (r"test_resize_downsample_scales_(cubic|linear)_align_corners",
     "align_corners with scales: tvmc uses the integer output length, as onnxruntime and "
     "PyTorch do; the ONNX reference uses the fractional one"),
]  # fmt: skip


def known_gaps(case_names) -> dict[str, str]:
    """The listed cases among `case_names`, by name, with their reasons."""
    gaps = {}
    for pattern, reason in GAP_RULES:
        for name in case_names:
            if re.fullmatch(pattern, name):
                gaps.setdefault(name, reason)
    return gaps
