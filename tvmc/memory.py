"""How much memory this process may use, and sizes as people read them: shared by the checks on
models (`tvmc.frontend.bounds`), inputs files (`tvmc.driver.npz`) and packages
(`tvmc.runtime.package_check`), all of which bound sizes before allocating."""

from __future__ import annotations

import os
import resource


def machine_memory() -> int:
    """Bytes of physical memory here (2**48 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 48


def memory_limit() -> int:
    """Bytes this process may allocate: physical memory, or less under an rlimit."""
    limit = machine_memory()
    for kind in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
        soft = resource.getrlimit(kind)[0]
        if soft != resource.RLIM_INFINITY:
            limit = min(limit, soft)
    return limit


def human_bytes(count: int) -> str:
    """`count` bytes in binary units: '512 GiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if count < 1024 or unit == "EiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.3g} {unit}"
        count /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")
