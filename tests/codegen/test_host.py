"""This CPU as LLVM names it, kept per machine (tvmc/codegen/host.py): the cached answer is
LLVM's, another CPU or LLVM gets its own entry, and a missing or damaged entry is asked again."""

from __future__ import annotations

import json
from pathlib import Path

import llvmlite.binding as llvm
import pytest

from tvmc.codegen import host
from tvmc.config import CACHE_DIR_ENV


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory and a forgotten answer; yields the directory."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    host.host_cpu.cache_clear()
    yield tmp_path
    host.host_cpu.cache_clear()


def cpuinfo(tmp_path: Path, flags: str) -> str:
    """A /proc/cpuinfo of one CPU with `flags`; returns its path."""
    path = tmp_path / "cpuinfo"
    lines = [
        "processor\t: 0",
        "vendor_id\t: TestVendor",
        "cpu MHz\t\t: 2400.1",
        f"flags\t\t: {flags}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_the_answer_is_llvms_and_is_kept(fresh: Path, monkeypatch: pytest.MonkeyPatch):
    found = host.host_cpu()
    assert found.triple == llvm.get_process_triple()
    assert found.name == llvm.get_host_cpu_name()
    assert found.features == llvm.get_host_cpu_features().flatten()
    assert found.feature_map() == dict(llvm.get_host_cpu_features())
    if host.cache_key() is None:
        pytest.skip("no /proc/cpuinfo here: LLVM is asked every time")
    kept = list(fresh.glob("host-*.json"))
    assert [p.name for p in kept] == [f"host-{host.cache_key()}.json"]

    host.host_cpu.cache_clear()
    monkeypatch.setattr(host, "_ask_llvm", lambda: pytest.fail("asked LLVM again"))
    assert host.host_cpu() == found


def test_another_cpu_gets_its_own_entry(fresh: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(host, "CPUINFO", cpuinfo(fresh, "fpu sse2 avx2"))
    first = host.cache_key()
    monkeypatch.setattr(host, "CPUINFO", cpuinfo(fresh, "fpu sse2 avx2 avx512f"))
    second = host.cache_key()
    assert second not in (None, first)
    lines = (fresh / "cpuinfo").read_text().replace("2400.1", "3100.0")  # the clock changes
    (fresh / "cpuinfo").write_text(lines)
    assert host.cache_key() == second


def test_a_damaged_entry_is_asked_again(fresh: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(host, "CPUINFO", cpuinfo(fresh, "fpu sse2"))
    path = fresh / f"host-{host.cache_key()}.json"
    path.write_text('{"triple": "x86_64-unknown-linux-gnu", "name": ')  # a torn write
    found = host.host_cpu()
    assert found.name == llvm.get_host_cpu_name()
    assert json.loads(path.read_text())["features"] == found.features


def test_without_cpuinfo_llvm_is_asked_and_nothing_kept(fresh: Path, monkeypatch):
    monkeypatch.setattr(host, "CPUINFO", str(fresh / "absent"))
    assert host.cache_key() is None
    assert host.host_cpu().triple == llvm.get_process_triple()
    assert list(fresh.glob("host-*.json")) == []


def test_features_read_signed():
    cpu = host.HostCPU("x86_64-unknown-linux-gnu", "znver4", "+avx2,-avx512bf16,+avx512f")
    assert cpu.has("avx2") and cpu.has("avx512f")
    assert not cpu.has("avx512bf16") and not cpu.has("avx") and not cpu.has("amx-tile")


def test_an_unwritable_cache_is_skipped(fresh: Path, monkeypatch: pytest.MonkeyPatch):
    (fresh / "file").write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV, str(fresh / "file" / "cache"))  # under a file: no mkdir
    monkeypatch.setattr(host, "CPUINFO", cpuinfo(fresh, "fpu sse2"))
    assert host.host_cpu().triple == llvm.get_process_triple()
