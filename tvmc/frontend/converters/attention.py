"""Converters of the attention ops: Attention and LinearAttention, decomposed into our primitive
ops (Transpose, Reshape, MatMul, Mul, Add, Where, Softmax, Concat, Tanh, Exp, ...).

No op of their own: the decomposition lets fusion and the MatMul/Softmax templates serve every
target. Attention's mask is one additive bias: the attn_mask input (a bool mask becomes 0/-inf)
plus the causal, sliding-window and padding constraints, which fold to a constant unless
`nonpad_kv_seqlen` makes them depend on run-time lengths. LinearAttention's recurrence is
unrolled over the (static) sequence length.
"""

from __future__ import annotations

import numpy as np

from tvmc.errors import UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter
from tvmc.graph import TensorType
from tvmc.ops.common import FLOAT_DTYPES, broadcast_shape

# softmax_precision (an ONNX element type) -> our dtype; 16 (bfloat16) has no numpy dtype
_SOFTMAX_PRECISIONS = {1: "float32", 10: "float16", 11: "float64"}
_QK_OUTPUT_MODES = (0, 1, 2, 3)  # raw, after softcap, after the bias, after the softmax


def _scalar(ctx: ConvertContext, value: float, dtype: str) -> str:
    return ctx.add_const(np.array(value, dtype=dtype))


def _split_heads(ctx: ConvertContext, x: str, heads: int, what: str) -> str:
    """[B, S, H*D] -> [B, H, S, D]."""
    b, s, hidden = ctx.type(x).shape
    if heads <= 0 or hidden % heads:
        raise ValueError(f"{what} hidden size {hidden} is not a multiple of {heads} heads")
    (split,) = ctx.add("Reshape", [x], {"shape": (b, s, heads, hidden // heads)})
    return ctx.add("Transpose", [split], {"perm": (0, 2, 1, 3)})[0]


def _check_heads(shapes, q_heads: int | None, kv_heads: int | None) -> None:
    """Q, K, V as [B, H, S, D] agree: one batch, K/V heads dividing Q heads (GQA), one Q/K head
    size; num_heads attributes, when given, match the heads."""
    (b, hq, _, dq), (bk, hk, _, dk), (bv, hv, _, _) = shapes
    if (q_heads is not None and q_heads != hq) or (kv_heads is not None and kv_heads != hk):
        raise ValueError(
            f"q_num_heads={q_heads}, kv_num_heads={kv_heads} disagree with 4-D inputs of "
            f"{hq} query and {hk} key heads"
        )
    if not b == bk == bv:
        raise ValueError(f"Q, K and V batch sizes differ: {b}, {bk}, {bv}")
    if hk != hv or hk == 0 or hq % hk:
        raise ValueError(f"{hq} query heads are not a multiple of {hk} key / {hv} value heads")
    if dq != dk:
        raise ValueError(f"Q head size {dq} differs from K head size {dk}")


@converter("Attention")
def Attention(ctx: ConvertContext, node: OnnxNode) -> None:
    """Scaled dot-product attention (MHA, GQA, MQA) with masks, softcap and a KV cache."""
    dtype = ctx.type(node.inputs[0]).dtype
    if dtype not in FLOAT_DTYPES:
        raise UnsupportedModelError(f"{node.describe()}: element type {dtype} is not supported")
    if any(ctx.type(n).dtype != dtype for n in node.inputs[1:3]):
        raise UnsupportedModelError(f"{node.describe()}: Q, K and V of different element types")
    mode = node.attrs.get("qk_matmul_output_mode", 0)
    if mode not in _QK_OUTPUT_MODES:
        raise ValueError(f"qk_matmul_output_mode must be one of {_QK_OUTPUT_MODES}, got {mode}")
    softcap = float(node.attrs.get("softcap", 0.0))
    if softcap < 0:
        raise ValueError(f"softcap must be 0 (off) or positive, got {softcap}")
    precision = node.attrs.get("softmax_precision")
    if precision is not None and precision not in _SOFTMAX_PRECISIONS:
        raise UnsupportedModelError(
            f"{node.describe()}: softmax_precision {precision} is not supported "
            f"(tvmc supports {sorted(_SOFTMAX_PRECISIONS)})"
        )
    q, k, v = node.inputs[:3]
    rank = ctx.type(q).ndim
    if rank not in (3, 4) or ctx.type(k).ndim != rank or ctx.type(v).ndim != rank:
        raise ValueError("Q, K and V must all be 3-D or all 4-D")
    q_heads, kv_heads = node.attrs.get("q_num_heads"), node.attrs.get("kv_num_heads")
    if rank == 3:
        if q_heads is None or kv_heads is None:
            raise ValueError("3-D inputs need the q_num_heads and kv_num_heads attributes")
        q, k, v = (_split_heads(ctx, x, h, what) for x, h, what in
                   ((q, q_heads, "Q"), (k, kv_heads, "K"), (v, kv_heads, "V")))  # fmt: skip
    _check_heads([ctx.type(x).shape for x in (q, k, v)], q_heads, kv_heads)
    k, v, past = _kv_cache(ctx, node, k, v)
    scores = _scores(ctx, node, q, k, dtype)
    capped = scores
    if softcap > 0:
        (divided,) = ctx.add("Div", [scores, _scalar(ctx, softcap, dtype)])
        (tanh,) = ctx.add("Tanh", [divided])
        (capped,) = ctx.add("Mul", [tanh, _scalar(ctx, softcap, dtype)])
    bias = _attention_bias(ctx, node, ctx.type(scores).shape, past, dtype)
    logits = ctx.add("Add", [capped, bias])[0] if bias else capped
    probs = _softmax(ctx, logits, bias, _SOFTMAX_PRECISIONS.get(precision, dtype), dtype)
    _output(ctx, node, 3, (scores, capped, logits, probs)[mode])
    _output(ctx, node, 0, _weighted_values(ctx, probs, v, rank))


def _output(ctx: ConvertContext, node: OnnxNode, index: int, value: str) -> None:
    """Name `value` as output `index` of `node` when the model asks for it."""
    if len(node.outputs) > index and node.outputs[index]:
        ctx.add("Identity", [value], outputs=[node.outputs[index]])


def _kv_cache(ctx: ConvertContext, node: OnnxNode, k: str, v: str) -> tuple[str, str, int]:
    """K and V after the cache update (past ++ new), the present outputs, the past length."""
    past_key, past_value = node.input(4), node.input(5)
    if bool(past_key) != bool(past_value):
        raise ValueError("past_key and past_value must be given together")
    if past_key and node.input(6):
        raise ValueError("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    past = 0
    if past_key:
        if ctx.type(past_key).ndim != 4 or ctx.type(past_value).ndim != 4:
            raise ValueError("past_key and past_value must be 4-D [batch, heads, length, size]")
        past = ctx.type(past_key).shape[2]
        (k,) = ctx.add("Concat", [past_key, k], {"axis": 2})
        (v,) = ctx.add("Concat", [past_value, v], {"axis": 2})
    _output(ctx, node, 1, k)
    _output(ctx, node, 2, v)
    return k, v, past


def _scores(ctx: ConvertContext, node: OnnxNode, q: str, k: str, dtype: str) -> str:
    """(Q * sqrt(scale)) @ (K * sqrt(scale))^T as [B, Hq, Sq, Skv]; query heads sharing a KV
    head (GQA) are one taller matrix, so K is never repeated."""
    b, hq, sq, d = ctx.type(q).shape
    hk, skv = ctx.type(k).shape[1:3]
    scale = node.attrs.get("scale")
    scale = 1 / np.sqrt(d) if scale is None else float(scale)
    if scale < 0:
        raise ValueError(f"scale must not be negative, got {scale}")
    # the spec scales Q and K by sqrt(scale) each, so float16 products do not overflow
    root = _scalar(ctx, np.sqrt(scale), dtype)
    (qs,) = ctx.add("Mul", [q, root])
    (kt,) = ctx.add("Transpose", [k], {"perm": (0, 1, 3, 2)})
    (ks,) = ctx.add("Mul", [kt, root])
    if hq != hk:
        (qs,) = ctx.add("Reshape", [qs], {"shape": (b, hk, hq // hk * sq, d)})
    (scores,) = ctx.add("MatMul", [qs, ks])
    if hq != hk:
        (scores,) = ctx.add("Reshape", [scores], {"shape": (b, hq, sq, skv)})
    return scores


def _weighted_values(ctx: ConvertContext, probs: str, v: str, rank: int) -> str:
    """probs @ V, back in the input layout ([B, Sq, Hq*Dv] for 3-D inputs)."""
    b, hq, sq, skv = ctx.type(probs).shape
    hk, dv = ctx.type(v).shape[1], ctx.type(v).shape[3]
    if hq != hk:
        (probs,) = ctx.add("Reshape", [probs], {"shape": (b, hk, hq // hk * sq, skv)})
    (y,) = ctx.add("MatMul", [probs, v])
    if hq != hk or rank == 3:
        (y,) = ctx.add("Reshape", [y], {"shape": (b, hq, sq, dv)})
    if rank == 3:
        (y,) = ctx.add("Transpose", [y], {"perm": (0, 2, 1, 3)})
        (y,) = ctx.add("Reshape", [y], {"shape": (b, sq, hq * dv)})
    return y


def _softmax(ctx: ConvertContext, logits: str, bias: str | None, precision: str,
             dtype: str) -> str:  # fmt: skip
    """Softmax over the keys in `precision`; a query row the bias masks entirely (every key
    -inf) is all zeros instead of NaN, as the spec says."""
    if precision != dtype:
        (logits,) = ctx.add("Cast", [logits], {"to": precision})
    axis = ctx.type(logits).ndim - 1
    (probs,) = ctx.add("Softmax", [logits], {"axes": (axis,)})
    if precision != dtype:
        (probs,) = ctx.add("Cast", [probs], {"to": dtype})
    if bias is None:
        return probs
    (row_max,) = ctx.add("ReduceMax", [bias], {"axes": (ctx.type(bias).ndim - 1,)})
    (masked,) = ctx.add("Equal", [row_max, _scalar(ctx, -np.inf, dtype)])
    if ctx.const(masked) is not None and not ctx.const(masked).any():
        return probs  # a constant bias that leaves every row a key: no guard
    return ctx.add("Where", [masked, _scalar(ctx, 0, dtype), probs])[0]


def _attention_bias(ctx: ConvertContext, node: OnnxNode, scores: tuple[int, ...], past: int,
                    dtype: str) -> str | None:  # fmt: skip
    """attn_mask as an additive bias plus the structural constraints; None when nothing masks."""
    mask = _mask_bias(ctx, node, scores, dtype)
    allowed = _allowed_keys(ctx, node, scores, past)
    if allowed is None:
        return mask
    neg_inf, zero = _scalar(ctx, -np.inf, dtype), _scalar(ctx, 0, dtype)
    (structural,) = ctx.add("Where", [allowed, zero, neg_inf])
    return ctx.add("Add", [mask, structural])[0] if mask else structural


def _mask_bias(ctx: ConvertContext, node: OnnxNode, scores: tuple[int, ...],
               dtype: str) -> str | None:  # fmt: skip
    """attn_mask: a bool mask as 0 (attend) / -inf, a numeric one cast to the scores' type; a
    mask shorter than the keys is padded with -inf (those keys are masked)."""
    mask = node.input(3)
    if not mask:
        return None
    mtype = ctx.type(mask)
    skv = scores[-1]
    if (mtype.ndim == 0 or mtype.shape[-1] > skv
            or broadcast_shape((*mtype.shape[:-1], skv), scores) != scores):  # fmt: skip
        raise ValueError(f"attn_mask of shape {list(mtype.shape)} does not broadcast to the "
                         f"scores {list(scores)} [batch, heads, queries, keys]")  # fmt: skip
    if mtype.dtype == "bool":
        (mask,) = ctx.add("Where", [mask, _scalar(ctx, 0, dtype), _scalar(ctx, -np.inf, dtype)])
    elif mtype.dtype != dtype:
        (mask,) = ctx.add("Cast", [mask], {"to": dtype})
    short = skv - mtype.shape[-1]
    if short:
        pads = [0] * (2 * mtype.ndim)
        pads[-1] = short
        attrs = {"pads": pads, "mode": "constant", "constant_value": -np.inf}
        (mask,) = ctx.add("Pad", [mask], attrs)
    return mask


def _allowed_keys(ctx: ConvertContext, node: OnnxNode, scores: tuple[int, ...],
                  past: int) -> str | None:  # fmt: skip
    """Which keys each query may see under is_causal, the sliding window and nonpad_kv_seqlen:
    a bool [Sq, Skv] constant, a [B, 1, Sq, Skv] run-time tensor, or None (all keys).

    Query i sits at absolute position i + offset: offset is the past length, or per batch
    nonpad_kv_seqlen - Sq for an external cache; key j is visible when
    j <= i + offset (causal), i + offset - left <= j and j <= i + offset + right (window)."""
    left = node.attrs.get("left_window_size", -1)
    right = node.attrs.get("right_window_size", -1)
    if left < -1 or right < -1:
        raise ValueError(f"window sizes must be -1 or at least 0, got {left} and {right}")
    lowest = max(0 if node.attrs.get("is_causal", 0) else -np.inf,
                 -right if right >= 0 else -np.inf)  # fmt: skip
    highest = left if left >= 0 else np.inf
    sq, skv = scores[-2:]
    # diff = i + offset - j: the query's distance past the key
    diff = np.arange(sq)[:, None] - np.arange(skv)[None, :]
    nonpad = node.input(6)
    if not nonpad:
        diff = diff + past
        allowed = (diff >= lowest) & (diff <= highest)
        return None if allowed.all() else ctx.add_const(allowed)
    batch = scores[0]
    if ctx.type(nonpad) != TensorType((batch,), "int64"):
        raise ValueError(f"nonpad_kv_seqlen must be int64 of shape [{batch}], "
                         f"got {ctx.type(nonpad)}")  # fmt: skip
    (lengths,) = ctx.add("Reshape", [nonpad], {"shape": (batch, 1, 1, 1)})
    keys = ctx.add_const(np.arange(skv, dtype=np.int64))
    (allowed,) = ctx.add("Less", [keys, lengths])  # padding: key j exists when j < length
    if np.isfinite(lowest) or np.isfinite(highest):
        (diff,) = ctx.add("Add", [ctx.add_const((diff - sq).astype(np.int64)), lengths])
        for op, bound in (("GreaterOrEqual", lowest), ("LessOrEqual", highest)):
            if np.isfinite(bound):
                (inside,) = ctx.add(op, [diff, ctx.add_const(np.array(bound, np.int64))])
                (allowed,) = ctx.add("And", [allowed, inside])
    return allowed


# ---- LinearAttention -----------------------------------------------------------------------------
_UPDATE_RULES = {  # rule: (gated: decays the state, delta: writes the correction)
    "linear": (False, False), "gated": (True, False),
    "delta": (False, True), "gated_delta": (True, True),
}  # fmt: skip
MAX_UNROLLED_STEPS = 256  # the recurrence is unrolled: graph size and compile time grow with T


@converter("LinearAttention")
def LinearAttention(ctx: ConvertContext, node: OnnxNode) -> None:
    """The linear-attention recurrence (linear, gated, delta, gated_delta; GQA) unrolled over the
    tokens, in float32 as the spec's reference: per token the state [B, Hkv, dk, dv] decays,
    takes the key/value outer product and is read by the query heads sharing it."""
    rule = node.attrs.get("update_rule", "gated_delta")
    if rule not in _UPDATE_RULES:
        raise ValueError(f"update_rule must be one of {list(_UPDATE_RULES)}, got {rule!r}")
    gated, delta = _UPDATE_RULES[rule]
    for index, name, wanted in ((4, "decay", gated), (5, "beta", delta)):
        if bool(node.input(index)) != wanted:
            raise ValueError(f"update_rule {rule!r} {'needs' if wanted else 'forbids'} {name}")
    q_heads, kv_heads = node.attrs.get("q_num_heads", 0), node.attrs.get("kv_num_heads", 0)
    if q_heads <= 0 or kv_heads <= 0 or q_heads % kv_heads:
        raise ValueError(f"q_num_heads ({q_heads}) must be a positive multiple of kv_num_heads "
                         f"({kv_heads})")  # fmt: skip
    dtype = ctx.type(node.inputs[0]).dtype
    if dtype not in ("float16", "float32"):
        raise UnsupportedModelError(f"{node.describe()}: element type {dtype} is not supported")
    shapes = [ctx.type(n).shape for n in node.inputs[:3]]
    if any(len(s) != 3 or s[:2] != shapes[0][:2] for s in shapes):
        raise ValueError(f"query, key and value must be [B, T, heads*size] of one B and T, got "
                         f"{[list(s) for s in shapes]}")  # fmt: skip
    (b, t, q_hidden), k_hidden, v_hidden = shapes[0], shapes[1][2], shapes[2][2]
    dk, dv = q_hidden // q_heads, v_hidden // kv_heads
    if q_hidden % q_heads or v_hidden % kv_heads or k_hidden != kv_heads * dk:
        raise ValueError(f"hidden sizes {q_hidden}, {k_hidden}, {v_hidden} do not split into "
                         f"{q_heads} query and {kv_heads} key/value heads")  # fmt: skip
    if t > MAX_UNROLLED_STEPS:
        raise UnsupportedModelError(
            f"{node.describe()}: {t} tokens; tvmc unrolls the recurrence, at most "
            f"{MAX_UNROLLED_STEPS} tokens per call"
        )
    for index, widths in ((4, (kv_heads, kv_heads * dk)), (5, (kv_heads, 1))):
        given = node.input(index)  # decay: per head or per key feature; beta: per head or one
        if given and ctx.type(given).shape not in ((b, t, w) for w in widths):
            raise ValueError(f"{('decay', 'beta')[index - 4]} must be [{b}, {t}, {widths[0]} or "
                             f"{widths[1]}], got {list(ctx.type(given).shape)}")  # fmt: skip
    q, k, v, decay, beta = (_as_float32(ctx, node.input(i)) for i in (0, 1, 2, 4, 5))
    scale = float(node.attrs.get("scale", 0.0)) or 1 / np.sqrt(dk)
    (q,) = ctx.add("Mul", [q, _scalar(ctx, scale, "float32")])
    if decay:
        (decay,) = ctx.add("Exp", [decay])
    state, state_dtype = _initial_state(ctx, node, (b, kv_heads, dk, dv), dtype)
    rows = {"q": (kv_heads, q_heads // kv_heads, dk), "k_row": (kv_heads, 1, dk),
            "k_col": (kv_heads, dk, 1), "v": (kv_heads, 1, dv),
            "decay": (kv_heads, -1, 1), "beta": (-1, 1, 1)}  # fmt: skip
    outputs = []
    for step in range(t):
        token = {name: _token(ctx, x, step, rows[name]) for name, x in
                 (("q", q), ("k_row", k), ("k_col", k), ("v", v), ("decay", decay),
                  ("beta", beta)) if x}  # fmt: skip
        if gated:
            (state,) = ctx.add("Mul", [state, token["decay"]])
        value = token["v"]
        if delta:  # write beta * (v - S^T k): the value the state misses for this key
            (recalled,) = ctx.add("MatMul", [token["k_row"], state])
            (missing,) = ctx.add("Sub", [value, recalled])
            (value,) = ctx.add("Mul", [token["beta"], missing])
        (outer,) = ctx.add("Mul", [token["k_col"], value])
        (state,) = ctx.add("Add", [state, outer])
        (read,) = ctx.add("MatMul", [token["q"], state])
        outputs.append(ctx.add("Reshape", [read], {"shape": (b, 1, q_heads * dv)})[0])
    (y,) = ctx.add("Concat", outputs, {"axis": 1}) if len(outputs) > 1 else outputs
    ctx.add("Cast", [y], {"to": dtype}, outputs=node.outputs[:1])
    if len(node.outputs) > 1 and node.outputs[1]:
        ctx.add("Cast", [state], {"to": state_dtype}, outputs=[node.outputs[1]])


def _as_float32(ctx: ConvertContext, x: str) -> str:
    """`x` in float32 (the recurrence's working precision); '' stays ''."""
    if not x or ctx.type(x).dtype == "float32":
        return x
    return ctx.add("Cast", [x], {"to": "float32"})[0]


def _initial_state(ctx: ConvertContext, node: OnnxNode, shape: tuple[int, ...],
                   dtype: str) -> tuple[str, str]:  # fmt: skip
    """past_state in float32 (zeros without one) and the dtype present_state goes back to."""
    past = node.input(3)
    if not past:
        return ctx.add_const(np.zeros(shape, np.float32)), dtype
    if ctx.type(past).shape != shape:
        raise ValueError(f"past_state must be {list(shape)}, got {list(ctx.type(past).shape)}")
    if ctx.type(past).dtype not in ("float16", "float32"):
        raise UnsupportedModelError(
            f"{node.describe()}: past_state of type {ctx.type(past).dtype} is not supported"
        )
    return _as_float32(ctx, past), ctx.type(past).dtype


def _token(ctx: ConvertContext, x: str, step: int, rows: tuple[int, ...]) -> str:
    """Token `step` of a [B, T, ...] input, as [B, *rows] (-1: what the input's width leaves;
    a per-head decay or a single beta then broadcasts)."""
    b, t, width = ctx.type(x).shape
    starts, ends = [0, step, 0], [b, step + 1, width]
    (one,) = ctx.add("Slice", [x], {"starts": starts, "ends": ends, "steps": [1, 1, 1]})
    shape = tuple(width // int(np.prod([r for r in rows if r > 0])) if r < 0 else r for r in rows)
    return ctx.add("Reshape", [one], {"shape": (b, *shape)})[0]
