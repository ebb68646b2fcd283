"""Counting node visits: how tests show a pass's work grows with the DAG, not the tree."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable

from tvmc.kernel.visitor import Visitor


def count_visits(run: Callable[[], object]) -> int:
    """Calls of visitor methods (the methods a Visitor's dispatch picked) while `run` runs."""
    calls: Counter[object] = Counter()

    def profile(frame, event, arg):
        if event == "call":
            calls[frame.f_code] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    classes, stack = set(), [Visitor]
    while stack:
        cls = stack.pop()
        classes.add(cls)
        stack.extend(cls.__subclasses__())
    codes = {m.__code__ for cls in classes for m in cls.methods.values()}
    return sum(n for code, n in calls.items() if code in codes)
