"""A batch of images run side by side: the model for one image, its images spread over threads.

At batch N a kernel runs every image before the next kernel starts, so each kernel's threads
hand their outputs to the other cores (the next kernel splits the work its own way) and a run
holds N images' intermediates at once. Where every node computes each image from that image
alone, the model can instead be compiled for one image and the entry run it for the N images
in parallel, one image a thread at a time: an image's intermediates stay in its core's caches,
and threads meet once a run instead of once a kernel (docs/performance.md, "Images side by
side").

`per_image_graph(graph)` is that model when the graph allows it, else None:
- every runtime input and output, and every tensor computed, leads with the same N >= 2, and
  the types inferred again for one image are the same with N read as 1 (a constant shape that
  names N, a param broadcast along the batch: no);
- every node's op computes an image from that image alone (`_per_image`: elementwise ops, and
  ops whose axis, axes or permutation leave the batch axis alone); ops not known to: no;
- the weights that dense layers read per image are not the bulk of a run
  (`STREAMED_BYTES_PER_FLOP`): a fully connected layer reads its weights once for the whole
  batch when batched, once per image when not;
- the batch is worth spreading (`MIN_FLOPS`).
The compile pipeline's `per-image` pass also wants at least as many images as threads.
"""

from __future__ import annotations

import dataclasses

from tvmc.graph import Graph, Node, TensorType
from tvmc.ops import OPS, infer_node, node_flops
from tvmc.ops.reduction.reduce import reduce_axes

# Below this many FLOPs a batch the run takes microseconds and its kernels run on one thread
# (tvmc.ops.conv.cpu.PARALLEL_MIN_FLOPS): nothing to spread
MIN_FLOPS = 1 << 20
# Where a dense layer's weights are read for fewer rows than this per image, it streams them
# (a GEMV's rate is the memory's); at more, the rows reuse them from cache.
STREAMING_ROWS = 16
# A one-image run may stream its dense weights up to this many bytes per FLOP of the whole
# model: 8 MB per GFLOP. A core streams 10-25 GB/s and computes 80-270 GFLOP/s (the CPUs of
# docs/performance.md), so at this ratio streaming takes at most about a fifth of the compute;
# resnet50 streams 1 MB per GFLOP, inception_v1 1.4, densenet121 none; vgg19 12 and alexnet 83
# stay batched.
STREAMED_BYTES_PER_FLOP = 8e-3

ELEMENTWISE = frozenset({
    "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitCast",
    "BitShift", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Cast", "Ceil", "Celu",
    "Clip", "Cos", "Cosh", "Div", "Elu", "Equal", "Erf", "Exp", "Floor", "Gelu", "Greater",
    "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu",
    "Less", "LessOrEqual", "Log", "Max", "Mean", "Min", "Mish", "Mod", "Mul", "Neg", "Not",
    "Or", "PRelu", "Pow", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign",
    "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Swish", "Tan", "Tanh",
    "ThresholdedRelu", "Where", "Xor",
})  # fmt: skip
# ops that compute each batch item from its own planes, whatever their attributes
PER_ITEM = frozenset({
    "AveragePool", "BatchNormalization", "Conv", "ConvTranspose", "GlobalAveragePool",
    "GlobalMaxPool", "GridSample", "GroupNormalization", "InstanceNormalization", "LRN",
    "LpPool", "MatMul", "MaxPool", "Resize",
})  # fmt: skip
# ops along one axis (the attribute `axis`; from it to the last for the norms): per item
# unless that axis is the batch's
ALONG_AXIS = frozenset({"ArgMax", "ArgMin", "Concat", "CumSum", "LayerNormalization",
                        "LpNormalization", "RMSNormalization", "Split", "TopK"})  # fmt: skip
# ops over the axes of the attribute `axes`: per item unless they hold the batch's
OVER_AXES = frozenset({"Hardmax", "LogSoftmax", "MeanVarianceNormalization", "Softmax"})
REDUCE = frozenset(op for op in OPS if op.startswith("Reduce"))


def per_image_graph(graph: Graph) -> tuple[Graph, int] | None:
    """(`graph` for one image, its batch N) when its N images can run side by side, else None."""
    runtime = [*graph.inputs, *graph.outputs]
    if not runtime or any(not graph.types[n].shape or n in graph.params for n in runtime):
        return None  # (a constant output is not an image's)
    images = graph.types[runtime[0]].shape[0]
    if images < 2:
        return None
    if not all(_per_image(graph, node) for node in graph.nodes):
        return None
    nodes = [_for_one_image(node, images) for node in graph.nodes]
    one = _one_image_types(graph, nodes, images)
    if one is None:
        return None
    single = Graph(list(graph.inputs), list(graph.outputs), nodes, one, dict(graph.params),
                   graph.name)  # fmt: skip
    flops = sum(node_flops(single, node) for node in single.nodes)
    if flops * images < MIN_FLOPS or _streamed_bytes(single) > STREAMED_BYTES_PER_FLOP * flops:
        return None
    return single, images


def _for_one_image(node: Node, images: int) -> Node:
    """`node` with the attributes that name the batch (a resolved shape, a slice's end, a
    resize's size) naming one image; others as they are (the types then tell)."""
    attrs = dict(node.attrs)
    if node.op in ("Reshape", "Expand") and attrs["shape"] and attrs["shape"][0] == images:
        attrs["shape"] = (1, *attrs["shape"][1:])
    elif node.op == "Resize" and attrs.get("sizes") and attrs["sizes"][0] == images:
        attrs["sizes"] = (1, *attrs["sizes"][1:])
    elif node.op == "Slice" and _whole_batch(node, images):
        attrs["ends"] = (1, *attrs["ends"][1:])
    else:
        return node
    return dataclasses.replace(node, attrs=attrs)


def _whole_batch(node: Node, images: int) -> bool:
    starts, ends, steps = (node.attrs[k] for k in ("starts", "ends", "steps"))
    return bool(starts) and (starts[0], ends[0], steps[0]) == (0, images, 1)


def _one_image_types(
    graph: Graph, nodes: list[Node], images: int
) -> dict[str, TensorType] | None:  # fmt: skip
    """Every tensor's type for one image, where each non-param tensor leads with `images` and
    the ops' rules (on `nodes`, the graph's for one image) give the same types with that read
    as 1; else None."""

    def one(t: TensorType) -> TensorType | None:
        if not t.shape or t.shape[0] != images:
            return None
        return TensorType((1, *t.shape[1:]), t.dtype)

    types = {name: graph.types[name] for name in graph.params}
    for name in graph.inputs:
        single = one(graph.types[name])
        if single is None:
            return None
        types[name] = single
    for node in nodes:
        try:
            inferred = infer_node(node, [types[n] for n in node.inputs if n])
        except Exception:  # a rule that cannot take one image (a constant shape naming N)
            return None
        expected = [one(graph.types[n]) for n in node.outputs]
        if inferred != expected:
            return None
        types.update(zip(node.outputs, inferred))
    return types


def _axis(node: Node, default: int | None, rank: int) -> int | None:
    axis = node.attrs.get("axis", default)
    return None if axis is None else axis % max(rank, 1)


def _per_image(graph: Graph, node: Node) -> bool:
    """Whether `node` computes each batch item from that item alone (given that every tensor
    it reads or writes, but params, leads with the batch: `_one_image_types`)."""
    op, params = node.op, graph.params
    rank = graph.types[node.inputs[0]].ndim if node.inputs and node.inputs[0] else 0
    if op in ELEMENTWISE or op in PER_ITEM:
        return True
    if op in ("DequantizeLinear", "QuantizeLinear"):
        return _axis(node, 1, rank) != 0 or all(
            graph.types[n].size == 1 for n in node.inputs[1:] if n
        )  # per tensor, or per channel of an axis other than the batch
    if op in ALONG_AXIS:
        return _axis(node, 0, rank) != 0
    if op in OVER_AXES:
        return 0 not in {a % max(rank, 1) for a in node.attrs["axes"]}
    if op == "Transpose":
        perm = node.attrs.get("perm") or tuple(reversed(range(rank)))
        return perm[0] == 0
    if op == "Gemm":
        return not node.attrs.get("transA", 0)  # rows of A are the batch's
    if op == "Gather":  # rows of a param table by each item's indices, or an item's own rows
        data, indices = node.inputs[0], node.inputs[1]
        axis = _axis(node, 0, graph.types[data].ndim)
        if data in params:
            return axis == 0 and indices not in params
        return axis != 0 and indices in params
    if op in REDUCE:  # canonical axes: the dims reduced (tvmc.ops.reduction.reduce)
        return 0 not in reduce_axes(node.attrs, rank, op)
    if op in ("Reshape", "Expand", "Tile", "Pad"):
        return True  # the types decide: axis 0 stays the batch of the same N
    if op == "Slice":
        return _whole_batch(node, graph.types[node.inputs[0]].shape[0])
    return False


def _streamed_bytes(graph: Graph) -> int:
    """Bytes of dense weights (a MatMul's or Gemm's param operand) one image reads for fewer
    than STREAMING_ROWS rows."""
    total = 0
    for node in graph.nodes:
        if node.op not in ("MatMul", "Gemm"):
            continue
        weights = [n for n in node.inputs[:2] if n in graph.params]
        out = graph.types[node.outputs[0]]
        rows = out.size // max(out.shape[-1], 1) if out.shape else 1
        if weights and rows < STREAMING_ROWS:
            total += sum(graph.params[w].nbytes for w in weights)
    return total
