"""Node tests of supported ops that tvmc does not pass, each with the reason (kept honest by
test_node_conformance: a listed case that starts passing fails the suite)."""

KNOWN_GAPS: dict[str, str] = {}
