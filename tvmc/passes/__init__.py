"""Graph passes: pure `Graph -> Graph` functions with one job each, run as named lists.

In: tvmc.graph, tvmc.ops. Out: `Pass`, the pipelines (`IMPORT_PIPELINE`), `run_passes`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tvmc.graph import Graph
from tvmc.ops import infer_node
from tvmc.passes.channel_shuffle import fold_channel_shuffle
from tvmc.passes.fold_batch_norm import fold_batch_norm
from tvmc.passes.norm_patterns import match_decomposed_norms
from tvmc.passes.pool_before_conv import pool_before_conv
from tvmc.passes.simplify import eliminate_dead_nodes, fold_constants, remove_identities


@dataclass(frozen=True)
class Pass:
    """A named graph pass; `why` is shown by `--dump-code graph` and the docs."""

    name: str
    run: Callable[[Graph], Graph]
    why: str


# Run by `tvmc.load`: the graph a user inspects with `tvmc load --dump`.
IMPORT_PIPELINE: list[Pass] = [
    Pass("fold-constants", fold_constants, "weights made by ConstantOfShape/Shape arithmetic"),
    Pass("remove-identities", remove_identities, "Identity and inference-time Dropout do nothing"),
    Pass("eliminate-dead-nodes", eliminate_dead_nodes, "drop what no output depends on"),
]

# Run by `tvmc compile` after import: rewrites that change the graph's arithmetic, not its meaning.
OPTIMIZE_PIPELINE: list[Pass] = [
    Pass(
        "match-norms",
        match_decomposed_norms,
        "a decomposed LayerNorm or RMSNorm (ReduceMean, Pow, Sqrt, Div...) is one row kernel",
    ),
    Pass("fold-batch-norm", fold_batch_norm, "a BatchNormalization after a Conv is a new weight"),
    Pass(
        "pool-before-conv",
        pool_before_conv,
        "an AveragePool after a 1x1 conv runs first: the conv works on the smaller image",
    ),
    Pass(
        "fold-channel-shuffle",
        fold_channel_shuffle,
        "a depthwise conv reads through the channel shuffle before it: the shuffle's copy goes",
    ),
    Pass("eliminate-dead-nodes", eliminate_dead_nodes, "drop the params folding replaced"),
]

ALL_PASSES: dict[str, Pass] = {p.name: p for p in [*IMPORT_PIPELINE, *OPTIMIZE_PIPELINE]}


def run_passes(
    graph: Graph,
    passes: Iterable[Pass],
    disabled: Iterable[str] = (),
    verify: bool = False,
    timings: dict[str, float] | None = None,
) -> Graph:
    """Apply `passes` in order, skipping `disabled` names; optionally verify after each."""
    skip = set(disabled)
    for p in passes:
        if p.name in skip:
            continue
        start = time.perf_counter()
        graph = p.run(graph)
        if timings is not None:
            timings[p.name] = timings.get(p.name, 0.0) + time.perf_counter() - start
        if verify:
            graph.verify(infer_node)
    return graph


__all__ = [
    "ALL_PASSES",
    "IMPORT_PIPELINE",
    "Pass",
    "OPTIMIZE_PIPELINE",
    "eliminate_dead_nodes",
    "fold_batch_norm",
    "fold_channel_shuffle",
    "fold_constants",
    "match_decomposed_norms",
    "pool_before_conv",
    "remove_identities",
    "run_passes",
]
