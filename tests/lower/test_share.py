"""Identical kernels share one (tvmc/lower/share.py): equal but for names, they are generated
once and called on each layer's buffers; anything else keeps them apart."""

from __future__ import annotations

import numpy as np
from onnx import helper

from tests.lower.test_end_to_end import compile_and_run, model_of
from tvmc.kernel import Buffer, Kernel, exp, loop
from tvmc.lower.share import canonical_text, shared_kernels


def unary_kernel(name: str, x: str, y: str, fn=exp, shape=(64,), dtype="float32") -> Kernel:
    a, b = Buffer(x, shape, dtype), Buffer(y, shape, dtype)
    body = loop("i", shape[0], lambda i: b.store(i, fn(a[i])))
    return Kernel(name, (a, b), body)


def test_kernels_equal_but_for_names_share_the_first():
    one = unary_kernel("layer1_exp", "h1", "h2")
    two = unary_kernel("layer2_exp", "h7", "h8")
    assert canonical_text(one) == canonical_text(two)
    assert shared_kernels([one, two]) == {"layer1_exp": one, "layer2_exp": one}


def test_any_difference_but_names_keeps_kernels_apart():
    base = unary_kernel("k0", "x", "y")
    others = [
        unary_kernel("k1", "x", "y", fn=lambda v: v * 2.0),  # another computation
        unary_kernel("k2", "x", "y", shape=(65,)),  # another shape
        unary_kernel("k3", "x", "y", dtype="float64"),  # another type
        unary_kernel("k4", "y", "x"),  # the same names in the other order: params swap roles
    ]
    runs = shared_kernels([base, *others])
    assert [runs[k.name] for k in others[:3]] == others[:3]
    assert runs["k4"] is base  # positions, not names, decide: k4 reads param 0 as base does


def test_a_buffer_named_like_a_function_or_type_is_never_confused_with_it():
    """Renaming is in the IR: a buffer called `exp` or `float32` renames as a buffer only."""
    a = unary_kernel("a", "exp", "float32")
    b = unary_kernel("b", "log", "int32", fn=lambda v: v + 1.0)
    assert canonical_text(a) != canonical_text(b)
    assert "exp(" in canonical_text(a) and "$p0[" in canonical_text(a)


def test_repeated_layers_run_one_kernel_on_each_layers_buffers(rng):
    """Three identical MatMul+Add+Relu layers: one kernel per distinct step, every call on its
    own layer's weights, outputs equal to onnxruntime's."""
    nodes, inits = [], []
    for layer in range(3):
        w = rng.standard_normal((16, 16)).astype(np.float32) * 0.3
        b = rng.standard_normal((16,)).astype(np.float32)
        inits += [(f"w{layer}", w), (f"b{layer}", b)]
        nodes += [helper.make_node("MatMul", [f"h{layer}", f"w{layer}"], [f"m{layer}"]),
                  helper.make_node("Add", [f"m{layer}", f"b{layer}"], [f"a{layer}"]),
                  helper.make_node("Relu", [f"a{layer}"], [f"h{layer + 1}"])]  # fmt: skip
    model = model_of(nodes, [("h0", [4, 16])], ["h3"], inits)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    result, got, want = compile_and_run(model, {"h0": x})
    program = result.lowered.program
    assert len(program.calls) == 3 * len(program.kernels)
    assert len({c.args for c in program.calls}) == len(program.calls)  # each on its own buffers
    np.testing.assert_allclose(got["h3"], want["h3"], rtol=1e-5, atol=1e-5)
