"""Every ONNX node test of a supported op passes through the reference path, or is listed here.

The report by op: `python -m tests.backend.node_cases`.
"""

from __future__ import annotations

import pytest

from tests.backend.known_gaps import KNOWN_GAPS
from tests.backend.node_cases import PASSED, node_cases, run_case, supported

SUPPORTED_CASES = sorted(name for name, case in node_cases().items() if supported(case))


@pytest.mark.parametrize("name", SUPPORTED_CASES)
def test_node_case(name):
    outcome = run_case(node_cases()[name])
    if name in KNOWN_GAPS:
        assert outcome.status != PASSED, f"{name} passes now: remove it from KNOWN_GAPS"
        pytest.xfail(KNOWN_GAPS[name])
    assert outcome.status == PASSED, outcome.reason


def test_known_gaps_name_real_cases():
    assert not sorted(set(KNOWN_GAPS) - set(node_cases())), "stale names in KNOWN_GAPS"
