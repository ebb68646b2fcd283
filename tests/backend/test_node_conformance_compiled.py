"""The ONNX node tests compiled for llvm and run natively (the tvmc ONNX backend): every case of
a supported op passes, or is a known gap of the reference path too (known_gaps.py).

Slow (each case compiles a small module): `make test` runs it, `make test-fast` does not.
"""

from __future__ import annotations

import pytest

from tests.backend.known_gaps import known_gaps
from tests.backend.node_cases import PASSED, node_cases, run_case, supported

SUPPORTED_CASES = sorted(name for name, case in node_cases().items() if supported(case))
KNOWN_GAPS = known_gaps(node_cases())


@pytest.mark.slow
@pytest.mark.parametrize("name", SUPPORTED_CASES)
def test_node_case_compiled(name):
    outcome = run_case(node_cases()[name], compiled=True)
    if name in KNOWN_GAPS:
        assert outcome.status != PASSED, f"{name} passes now: narrow its rule in known_gaps.py"
        pytest.xfail(KNOWN_GAPS[name])
    assert outcome.status == PASSED, outcome.reason
