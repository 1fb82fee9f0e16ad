"""Telemetry summaries from recorded NVML samples, and the sampler's thread, without a GPU."""

import pytest

from roofline.telemetry import Sampler, reason_names, summarize
from tests.conftest import measured_row

RECORDED = [  # as read_sample returns them: an H100 settling under a power cap
    {"t": 10.0, "sm_mhz": 1980, "mem_mhz": 2619, "power_w": 450.0, "temp_c": 51, "reasons": 0x0},
    {"t": 10.5, "sm_mhz": 1755, "mem_mhz": 2619, "power_w": 690.0, "temp_c": 60, "reasons": 0x4},
    {
        "t": 11.0,
        "sm_mhz": 1710,
        "mem_mhz": 2619,
        "power_w": 700.0,
        "temp_c": 63,
        "reasons": 0x4 | 0x20,
    },
]


def test_summary_of_recorded_samples():
    summary = summarize(RECORDED, max_sm_mhz=1980)
    assert summary["samples"] == 3 and summary["window_s"] == 1.0
    assert summary["sm_clock_mhz"] == pytest.approx(1815.0)
    assert summary["sm_clock_min_mhz"] == 1710 and summary["sm_clock_max_mhz"] == 1980
    assert summary["power_w"] == pytest.approx(613.3333, abs=1e-3)
    assert summary["temperature_max_c"] == 63
    assert summary["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert summarize([], 1980) == {}


def test_reason_bits_decode():
    assert reason_names(0) == []
    assert reason_names(0x8 | 0x80) == ["hw_slowdown", "hw_power_brake_slowdown"]


def test_a_row_carries_clocks_power_and_energy():
    # 2*1024^3 FLOP = 2.147e-3 TFLOP in 2 ms at 613.3 W: 1.2267 J per call.
    row = measured_row(
        "h100",
        "float16",
        [1024, 1024, 1024],
        [0.002],
        989.4,
        "datasheet",
        0.0,
        summarize(RECORDED, 1980),
    )
    assert row.sm_clock_mhz == pytest.approx(1815.0) and row.sm_clock_max_mhz == 1980
    assert row.throttle_reasons == "sw_power_cap+sw_thermal_slowdown"
    assert row.joules_per_tflop == pytest.approx(613.3333 * 0.002 / (2 * 1024**3 / 1e12), rel=1e-6)


def test_sampler_collects_until_the_window_closes():
    reads = iter(RECORDED * 1000)
    with Sampler(handle=None, interval_s=0.001, read=lambda _: next(reads)) as watch:
        while len(watch.samples) < 3:
            pass
    count = len(watch.samples)
    assert count >= 3 and watch.samples[0] == RECORDED[0]
    assert len(watch.samples) == count  # the thread has stopped
