"""Every ONNX node test of a supported op passes through the reference path, or is listed with
its reason in known_gaps.py. The report by op: `python -m tests.backend.node_cases`."""

from __future__ import annotations

import re

import pytest

from tests.backend.known_gaps import GAP_RULES, known_gaps
from tests.backend.node_cases import PASSED, node_cases, run_case, supported

SUPPORTED_CASES = sorted(name for name, case in node_cases().items() if supported(case))
KNOWN_GAPS = known_gaps(node_cases())


@pytest.mark.parametrize("name", SUPPORTED_CASES)
def test_node_case(name):
    outcome = run_case(node_cases()[name])
    if name in KNOWN_GAPS:
        assert outcome.status != PASSED, f"{name} passes now: narrow its rule in known_gaps.py"
        pytest.xfail(KNOWN_GAPS[name])
    assert outcome.status == PASSED, outcome.reason


@pytest.mark.parametrize("pattern", [p for p, _ in GAP_RULES])
def test_every_gap_rule_matches_a_supported_case(pattern):
    assert any(re.fullmatch(pattern, name) for name in SUPPORTED_CASES), f"stale rule {pattern}"
