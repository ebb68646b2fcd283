"""This machine's CPU as LLVM names it (triple, CPU name, features), kept per machine.

Compiling for `llvm` asks for it, and so does `tvmc run` before it loads a package's code (the
package's CPU features must all be here). Asking LLVM means loading libLLVM through llvmlite,
tens of milliseconds that running a package needs for nothing else, so the answer is kept in
$TVMC_CACHE_DIR (default ~/.cache/tvmc) under a key made of what names this CPU and the LLVM
that named it: /proc/cpuinfo's identity lines (vendor, family, model, stepping, microcode, flags;
on Arm implementer, part, features) and the size and time of llvmlite's library, so another CPU
(a cache directory shared between machines, a migrated VM) or another LLVM gets its own answer.
Where /proc/cpuinfo is missing (macOS, Windows), LLVM is asked every time.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib.util
import json
import os
import platform
import tempfile
from dataclasses import dataclass

from tvmc.codegen.pool import cache_dir

CPUINFO = "/proc/cpuinfo"
# /proc/cpuinfo lines that name the CPU (others count cores or change: MHz, bogomips, ids).
_IDENTITY = ("vendor_id", "cpu family", "model", "model name", "stepping", "microcode", "flags",
             "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision",
             "Features", "isa", "uarch", "mvendorid", "marchid", "mimpid")  # fmt: skip


@dataclass(frozen=True)
class HostCPU:
    """This machine as LLVM names it."""

    triple: str  # e.g. x86_64-unknown-linux-gnu
    name: str  # LLVM's CPU name, e.g. znver4
    features: str  # LLVM's feature string, every feature signed: "+avx2,-avx512bf16,..."

    def feature_map(self) -> dict[str, bool]:
        """Every feature LLVM knows for this CPU: name -> whether the CPU has it."""
        return feature_map(self.features)

    def has(self, feature: str) -> bool:
        """Whether the CPU has `feature` (an LLVM name such as avx512f)."""
        return self.feature_map().get(feature, False)


def feature_map(features: str) -> dict[str, bool]:
    """An LLVM feature string ("+avx2,-avx512f,...") as name -> on; the last mention wins, as
    in LLVM."""
    return {f[1:]: f[0] == "+" for f in features.split(",") if f}


@functools.cache
def host_cpu() -> HostCPU:
    """This machine's CPU: from the cache when this CPU and LLVM were asked before, else LLVM."""
    key = cache_key()
    path = os.path.join(cache_dir(), f"host-{key}.json") if key else None
    if path is not None:
        try:
            with open(path) as f:
                data = json.load(f)
            found = HostCPU(data["triple"], data["name"], data["features"])
            if all(isinstance(v, str) for v in (found.triple, found.name, found.features)):
                return found
        except (OSError, ValueError, KeyError, TypeError):
            pass  # absent or damaged: ask LLVM and write it again
    host = _ask_llvm()
    if path is not None:
        _write(path, host)
    return host


@functools.cache
def host_cache_bytes(kinds: tuple[str, ...] = ("Data", "Instruction", "Unified")) -> dict[int, int]:
    """cpu0's cache sizes by level (Linux sysfs; the largest of a level's caches of `kinds`);
    empty where the system does not tell."""
    sizes: dict[int, int] = {}
    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            with open(os.path.join(index, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(index, "size")) as f:
                text = f.read().strip()
            with open(os.path.join(index, "type")) as f:
                kind = f.read().strip()
        except OSError:
            continue
        if level.isdigit() and text[:-1].isdigit() and kind in kinds:
            size = int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 0)
            sizes[int(level)] = max(sizes.get(int(level), 0), size)
    return sizes


def host_private_cache_bytes() -> int:
    """The size of cpu0's level-2 cache, a core's own on current x86-64 and Arm server cores;
    0 where the system does not tell."""
    return host_cache_bytes().get(2, 0)


def host_l1_data_bytes() -> int:
    """The size of cpu0's level-1 data cache; 0 where the system does not tell."""
    return host_cache_bytes(("Data", "Unified")).get(1, 0)


def host_triple() -> str:
    """The triple of this process, e.g. x86_64-unknown-linux-gnu."""
    return host_cpu().triple


def triple_arch(triple: str) -> str:
    """The architecture a triple names (amd64 spelled x86_64)."""
    return triple.split("-", 1)[0].replace("amd64", "x86_64")


def is_host_arch(triple: str) -> bool:
    """Whether code for `triple` can run in this process (the same architecture)."""
    return triple_arch(triple) == triple_arch(host_triple())


def cache_key() -> str | None:
    """A digest of what identifies this CPU and llvmlite's LLVM; None where the CPU cannot be
    read without LLVM."""
    try:
        with open(CPUINFO, errors="replace") as f:
            lines = {line.strip() for line in f if line.split(":", 1)[0].strip() in _IDENTITY}
    except OSError:
        return None
    if not lines:
        return None
    spec = importlib.util.find_spec("llvmlite")  # finds the package without importing it
    llvm_files: list[str] = []
    for folder in (spec.submodule_search_locations or []) if spec else []:
        binding = os.path.join(folder, "binding")
        if not os.path.isdir(binding):
            continue
        for entry in sorted(os.scandir(binding), key=lambda e: e.name):
            if entry.name.startswith("libllvmlite"):
                stat = entry.stat()
                llvm_files.append(f"{entry.path} {stat.st_size} {stat.st_mtime_ns}")
    text = "\n".join([platform.machine(), *sorted(lines), *llvm_files])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _ask_llvm() -> HostCPU:
    import llvmlite.binding as llvm  # here only: loading libLLVM is what the cache saves

    features = llvm.get_host_cpu_features().flatten()
    return HostCPU(llvm.get_process_triple(), llvm.get_host_cpu_name(), features)


def _write(path: str, host: HostCPU) -> None:
    """Written atomically (a concurrent reader sees all of it or nothing); a cache that cannot
    be written is skipped."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".host-", suffix=".json", dir=os.path.dirname(path))
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"triple": host.triple, "name": host.name, "features": host.features}, f)
        os.replace(tmp, path)
    except OSError:  # a full disk: the next process asks LLVM again
        os.unlink(tmp)
