"""docs/ops.md's generated parts, from the registry and the ONNX node tests.

    python -m tests.backend.ops_doc docs/ops.md                 # op list and family table
    python -m tests.backend.ops_doc docs/ops.md --conformance   # also run the node tests (slow)
    python -m tests.backend.ops_doc docs/ops.md --check         # fail when the doc is stale

Each generated part sits between `<!-- begin: NAME -->` and `<!-- end: NAME -->` markers; the
prose around them is written by hand. The conformance part is only rewritten with --conformance
(it runs every case through the reference path and compiled for llvm: minutes).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import textwrap
from collections import Counter, defaultdict

import tvmc.ops
from tvmc.frontend.converters import CONVERTERS
from tvmc.graph import DTYPES
from tvmc.ops import OPS
from tvmc.ops.lowering import TARGET_KINDS, Compute, Template

WIDTH = 100


def op_list() -> str:
    """The ONNX op types tvmc converts, comma-separated and wrapped."""
    return textwrap.fill(", ".join(sorted(CONVERTERS)) + ".", WIDTH)


def element_types() -> str:
    """The element types tensors may have."""
    return textwrap.fill("Element types: " + ", ".join(DTYPES) + ".", WIDTH)


def _lowering(opdef, kind: str) -> str:
    low = opdef.lowerings.get(kind)
    if low is None:
        return "none"
    if isinstance(low, Compute):
        return "compute"
    assert isinstance(low, Template)
    return "template, tuned" if low.space is not None else "template"


def family_table() -> str:
    """Per op family, its ops grouped by how each target kind lowers them."""
    rows = ["| family | ops | " + " | ".join(TARGET_KINDS) + " |", "|---|---|" + "---|" * 2]
    for family in tvmc.ops.FAMILIES:
        short = family.__name__.rsplit(".", 1)[1]
        groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for name, opdef in sorted(OPS.items()):
            if opdef.reference.__module__.startswith(family.__name__):
                groups[tuple(_lowering(opdef, kind) for kind in TARGET_KINDS)].append(name)
        for lowerings, names in groups.items():
            rows.append(f"| `{short}` | {', '.join(names)} | {' | '.join(lowerings)} |")
    return "\n".join(rows)


def conformance() -> str:
    """Totals of the node tests, reference and compiled, and the ops with cases not passed."""
    from tests.backend.known_gaps import known_gaps
    from tests.backend.node_cases import FAILED, PASSED, UNSUPPORTED, main_op, node_cases, run_case
    from tests.backend.node_cases import supported as op_supported

    logging.getLogger("tvmc").setLevel(logging.ERROR)
    cases = node_cases()
    gaps = known_gaps(cases)
    totals = {"reference": Counter(), "compiled": Counter()}
    by_op: dict[str, Counter] = defaultdict(Counter)
    for name, case in sorted(cases.items()):
        for mode in totals:
            status = run_case(case, compiled=mode == "compiled").status
            kind = status
            if status != PASSED and op_supported(case):
                kind = "gap" if name in gaps else FAILED
            totals[mode][kind] += 1
            if mode == "compiled" and status != PASSED:
                by_op[main_op(case)][kind if op_supported(case) else UNSUPPORTED] += 1
    lines = [
        f"| {len(cases):,} cases | reference | compiled (llvm) |",
        "|---|---|---|",
    ]
    labels = [(PASSED, "passed"), (FAILED, "failed"), ("gap", "supported op, known gap "
              "(tests/backend/known_gaps.py)"), (UNSUPPORTED, "op not supported")]  # fmt: skip
    for key, label in labels:
        lines.append(f"| {label} | {totals['reference'][key]:,} | {totals['compiled'][key]:,} |")
    lines += ["", "<details><summary>Not passed (compiled), by op</summary>", "",
              "| op | known gap | op not supported | failed |", "|---|---|---|---|"]  # fmt: skip
    for op, counts in sorted(by_op.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        lines.append(f"| {op} | {counts['gap']} | {counts[UNSUPPORTED]} | {counts[FAILED]} |")
    lines += ["", "</details>"]
    return "\n".join(lines)


def replace_block(text: str, name: str, body: str) -> str:
    """`text` with the block `name` holding `body`; ValueError when its markers are missing."""
    pattern = re.compile(rf"(<!-- begin: {name} -->\n)(?:.*?\n)?(<!-- end: {name} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"docs/ops.md lacks the markers of block {name!r}")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def generate(text: str, with_conformance: bool = False) -> str:
    """`text` (docs/ops.md) with its generated blocks up to date."""
    text = replace_block(text, "ops", op_list() + "\n\n" + element_types())
    text = replace_block(text, "families", family_table())
    if with_conformance:
        text = replace_block(text, "conformance", conformance())
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--conformance", action="store_true", help="run the node tests too")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when stale")
    args = parser.parse_args(argv)
    with open(args.path) as f:
        text = f.read()
    new = generate(text, args.conformance)
    if args.check:
        if new != text:
            print(f"{args.path} is out of date: run python -m tests.backend.ops_doc {args.path}")
            return 1
        return 0
    with open(args.path, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
