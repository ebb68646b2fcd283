"""Average-pool before a pointwise conv instead of after it (DenseNet's transition layers).

A 1x1 conv with stride 1 and no padding maps each pixel's channels on their own, linearly, bias
included; an AveragePool without padding averages pixels with weights that sum to 1, the same for
every channel. The two commute exactly (up to float rounding), and pooling first runs the conv on
the pooled, smaller image: DenseNet-121's three transition convs (conv 1x1 then a 2x2 stride-2
average) do a quarter of their multiply-adds, about 8% of the model's.
"""

from __future__ import annotations

import math

from tvmc.graph import Graph, Node
from tvmc.ops import infer_node


def _pointwise(conv: Node) -> bool:
    """A conv that maps each pixel alone: 1x1 kernel, stride 1, no padding."""
    a = conv.attrs
    return (
        conv.op == "Conv"
        and all(k == 1 for k in a["kernel_shape"])
        and all(s == 1 for s in a["strides"])
        and not any(a["pads"])
    )


def _plain_average(pool: Node) -> bool:
    """An AveragePool whose every window lies inside the input (no padding, no ceil-mode
    partial windows), so each output averages real pixels only."""
    return pool.op == "AveragePool" and not any(pool.attrs["pads"]) and not pool.attrs["ceil_mode"]


def pool_before_conv(graph: Graph) -> Graph:
    """conv1x1(x) -> AveragePool becomes AveragePool(x) -> conv1x1 where that shrinks the conv."""
    producers, consumers = graph.producers(), graph.consumers()
    for pool in graph.nodes:
        if not _plain_average(pool):
            continue
        conv = producers.get(pool.inputs[0])
        between = pool.inputs[0]
        if conv is None or not _pointwise(conv):
            continue
        if len(consumers.get(between, [])) != 1 or between in graph.outputs:
            continue  # someone else reads the conv's full-size output
        x = conv.inputs[0]
        (pooled_type,) = infer_node(Node(pool.op, [x], ["pooled"], pool.attrs), [graph.types[x]])
        if math.prod(pooled_type.shape[2:]) >= math.prod(graph.types[x].shape[2:]):
            continue  # the pool does not shrink the image: nothing to gain
        pooled = graph.fresh_name(f"{x}_pooled")
        graph.types[pooled] = pooled_type
        del graph.types[between]
        # the pool takes the conv's place in the node list and the conv the pool's: both
        # still come after what they read
        pool.inputs, pool.outputs, conv.inputs, conv.outputs = (
            [x], [pooled], [pooled, *conv.inputs[1:]], pool.outputs,
        )  # fmt: skip
        i, j = graph.nodes.index(conv), graph.nodes.index(pool)
        graph.nodes[i], graph.nodes[j] = pool, conv
        producers, consumers = graph.producers(), graph.consumers()
    return graph
