"""The CPU's own microbenchmarks: its clock and its FMA ceiling, compiled where a compiler is,
and said to be unmeasured where none is."""

import pytest

from roofline.device import peakflops
from roofline.device.hardware import cpu_info

needs_cc = pytest.mark.skipif(peakflops.compiler() is None, reason="no C compiler here")


@needs_cc
def test_measured_cpu_clock_is_plausible():
    ghz, _ = peakflops.measure_clock_ghz(1)
    if ghz is None:
        pytest.skip("not x86-64: the clock comes from the OS")
    assert 0.5 < ghz < 7.0  # a register-add chain retires one add per cycle


@needs_cc
def test_the_fma_ceiling_runs_every_core_at_the_widest_vector_the_flags_show():
    info = cpu_info()
    fma = peakflops.measure_fma(info["logical_cores"], info["isa"], seconds=0.05)
    if fma["gflops"] is None:  # this machine was busy in every window: said, and kept apart
        assert fma["reason"].startswith("not used: every one of its 5 windows shared the CPUs")
        return
    assert len(fma["per_core_gflops"]) == info["logical_cores"]
    assert fma["gflops"] == pytest.approx(sum(fma["per_core_gflops"]))
    # A vector FMA chain does at least one FLOP a nanosecond, and no core does 2000.
    assert all(1 < g < 2000 for g in fma["per_core_gflops"])
    expected = "AVX-512 (512-bit)" if "avx512f" in info["isa"] else None
    assert expected is None or fma["vector"] == expected


def test_without_a_compiler_nothing_is_measured_and_it_says_why(monkeypatch):
    monkeypatch.setattr(peakflops, "compiler", lambda: None)
    assert peakflops.measure_fma(2, ["avx2", "fma"]) == {
        "gflops": None,
        "vector": "AVX2 (256-bit)",
        "reason": "not measured: no C compiler (cc, gcc or clang) here",
    }
    assert peakflops.measure_clock_ghz(2) == (None, "")


def test_the_clock_falls_back_to_what_the_os_reports(monkeypatch):
    from collections import namedtuple

    import psutil

    freq = namedtuple("freq", "current min max")
    monkeypatch.setattr(peakflops, "measure_clock_ghz", lambda cores: (None, ""))
    monkeypatch.setattr(psutil, "cpu_freq", lambda: freq(2400.0, 0.0, 3200.0))
    assert peakflops.cpu_clock(2) == {"ghz": 3.2, "source": "the OS's maximum clock (psutil)"}
    monkeypatch.setattr(psutil, "cpu_freq", lambda: None)
    assert peakflops.cpu_clock(2)["ghz"] is None
