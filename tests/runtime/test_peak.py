"""The measured fp32 peak: an override, a cache per CPU, plausibility, and a real measurement."""

from __future__ import annotations

import json

import pytest

from tvmc.codegen import CPUTarget
from tvmc.config import CACHE_DIR_ENV, PEAK_GFLOPS_ENV
from tvmc.errors import UsageError
from tvmc.runtime import peak


def test_the_environment_overrides_the_measurement(monkeypatch):
    monkeypatch.setenv(PEAK_GFLOPS_ENV, "123.5")
    assert peak.peak_gflops(2) == (123.5, f"${PEAK_GFLOPS_ENV}")
    for bad in ("fast", "nan", "-1", "inf"):
        monkeypatch.setenv(PEAK_GFLOPS_ENV, bad)
        with pytest.raises(UsageError, match=PEAK_GFLOPS_ENV):
            peak.peak_gflops(2)


def test_a_measurement_is_cached_per_cpu_and_scaled_by_cores(monkeypatch, tmp_path):
    monkeypatch.delenv(PEAK_GFLOPS_ENV, raising=False)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    calls = []
    monkeypatch.setattr(peak, "measure_core_peak_gflops", lambda: calls.append(1) or 100.0)
    monkeypatch.setattr(peak, "physical_cores", lambda: 2)
    value, source = peak.peak_gflops(4)  # 4 threads, 2 cores: SMT siblings add no FMA units
    assert value == 200.0 and "measured" in source and len(calls) == 2
    assert json.loads((tmp_path / "peak.json").read_text()) == {peak.cpu_key(): 100.0}
    value, source = peak.peak_gflops(1)
    assert value == 100.0 and "cached" in source and len(calls) == 2  # not measured again


def test_a_busy_or_implausible_figure_is_not_cached(monkeypatch, tmp_path):
    monkeypatch.delenv(PEAK_GFLOPS_ENV, raising=False)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    figures = iter([100.0, 40.0])  # two rounds that disagree: the machine was busy
    monkeypatch.setattr(peak, "measure_core_peak_gflops", lambda: next(figures))
    value, source = peak.peak_gflops(1)
    assert value == 100.0 and "busy" in source and not (tmp_path / "peak.json").exists()
    (tmp_path / "peak.json").write_text(json.dumps({peak.cpu_key(): 0.5}))  # poisoned cache
    monkeypatch.setattr(peak, "measure_core_peak_gflops", lambda: 90.0)
    assert peak.peak_gflops(1)[0] == 90.0  # measured again, not trusted


def test_one_core_measures_a_plausible_peak():
    """The kernel runs and its figure is at least a vector FMA per cycle at 1 GHz."""
    core = peak.measure_core_peak_gflops(bursts=3, burst_seconds=0.002)
    assert peak.plausible(core)


@pytest.mark.skipif(CPUTarget.host().vector_bits < 256, reason="no 256-bit vectors here")
def test_the_peak_of_narrower_vectors_is_measurable():
    """With 8 lanes (AVX2 code on an AVX-512 host) the kernel runs at one 256-bit FMA a cycle
    at 1 GHz or more: what heavy_convs.py --target compares against the host's peak."""
    assert peak.measure_core_peak_gflops(bursts=3, burst_seconds=0.002, lanes=8) >= 8 * 2 * 1.0
