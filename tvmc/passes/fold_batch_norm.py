"""Fold inference BatchNormalization into the Conv (or ConvTranspose) that feeds it.

BN(conv(x, w) + b) = conv(x, w * k) + (b - mean) * k + beta, with k = scale / sqrt(var + eps)
per output channel: the BN costs nothing at run time once its statistics live in the weights.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import Graph, Node, TensorType
from tvmc.ops.norm import batch_norm_affine

FOLDABLE = ("Conv", "ConvTranspose")


def _scaled_weight(conv: Node, weight: np.ndarray, multiplier: np.ndarray) -> np.ndarray:
    """`weight` with each output channel multiplied by its entry of `multiplier`."""
    spatial = (1,) * (weight.ndim - 2)
    if conv.op == "Conv":  # weight (M, C/g, *K)
        return (weight * multiplier.reshape(-1, 1, *spatial)).astype(weight.dtype)
    # ConvTranspose weight (C, M/g, *K): output channel g*M/g + j is column j of group g's rows
    group = conv.attrs["group"]
    grouped = weight.reshape(group, weight.shape[0] // group, *weight.shape[1:])
    scaled = grouped * multiplier.reshape(group, 1, weight.shape[1], *spatial)
    return scaled.reshape(weight.shape).astype(weight.dtype)


def _foldable_conv(graph: Graph, bn: Node, producers: dict, consumers: dict) -> Node | None:
    """The conv feeding `bn` when the fold is sound: constant params, no other reader."""
    conv = producers.get(bn.inputs[0])
    if conv is None or conv.op not in FOLDABLE:
        return None
    if len(consumers.get(bn.inputs[0], [])) != 1 or bn.inputs[0] in graph.outputs:
        return None  # someone else reads the un-normalized conv output
    constants = [n for n in conv.inputs[1:] if n] + bn.inputs[1:]
    if not all(n in graph.params for n in constants):
        return None
    return conv


def fold_batch_norm(graph: Graph) -> Graph:
    """BatchNormalization after a conv with constant weights becomes part of that conv."""
    producers, consumers = graph.producers(), graph.consumers()
    removed: set[int] = set()
    orphans: set[str] = set()
    for bn in graph.nodes:
        if bn.op != "BatchNormalization":
            continue
        conv = _foldable_conv(graph, bn, producers, consumers)
        if conv is None:
            continue
        weight = graph.params[conv.inputs[1]]
        scale, beta, mean, var = (graph.params[n] for n in bn.inputs[1:])
        multiplier, offset = batch_norm_affine(scale, beta, mean, var, bn.attrs["epsilon"])
        old_bias = conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2] else None
        bias = graph.params[old_bias].astype(np.float64) if old_bias else 0.0
        new_weight = _scaled_weight(conv, weight, multiplier)
        new_bias = (bias * multiplier + offset).astype(weight.dtype)
        weight_name = _add_param(graph, f"{conv.inputs[1]}_bn", new_weight)
        bias_hint = f"{old_bias}_bn" if old_bias else f"{conv.inputs[1]}_bn_bias"
        bias_name = _add_param(graph, bias_hint, new_bias)
        orphans.update(n for n in (*conv.inputs[1:], *bn.inputs[1:]) if n)
        del graph.types[conv.outputs[0]]
        # the BN's output name survives: it may be a model output or read by later nodes
        conv.inputs = [conv.inputs[0], weight_name, bias_name]
        conv.outputs = [bn.outputs[0]]
        removed.add(id(bn))
    if removed:
        graph.nodes = [n for n in graph.nodes if id(n) not in removed]
        still_read = {n for node in graph.nodes for n in node.inputs} | set(graph.outputs)
        for name in orphans - still_read:
            del graph.params[name]
            del graph.types[name]
    return graph


def _add_param(graph: Graph, hint: str, array: np.ndarray) -> str:
    name = graph.fresh_name(hint)
    graph.params[name] = np.require(array, requirements="C")
    graph.types[name] = TensorType.of(array)
    return name
