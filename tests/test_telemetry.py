"""GPU telemetry over the timed window, without a GPU: fields read one by one (a failure keeps
the others and is reported), energy from the counter at both ends, idleness left out of the
clock-event reasons, other processes named and flagged."""

import dataclasses
from types import SimpleNamespace

import pytest

from roofline.core.measurement import WindowTelemetry
from roofline.device.telemetry import (
    CLOCK_EVENT_REASONS,
    Sampler,
    reason_names,
    reason_shares,
    window_telemetry,
)
from tests.conftest import measured_row


def window(samples, energy_j=None, window_s=None, processes=(), errors=()):
    """A timed window as the Sampler leaves it."""
    return SimpleNamespace(
        samples=samples,
        energy_j=energy_j,
        window_s=window_s,
        processes=list(processes),
        errors=set(errors),
    )


RECORDED = [  # an H100 settling under a power cap; the first sample still idle
    {"t": 10.0, "sm_mhz": 1980, "mem_mhz": 2619, "power_w": 450.0, "temp_c": 51, "reasons": 0x1},
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


def test_summary_of_a_recorded_window():
    summary = window_telemetry(window(RECORDED), max_sm_mhz=1980)
    assert summary.sm_clock_mhz == pytest.approx(1815.0)
    assert summary.sm_clock_max_mhz == 1980
    assert summary.power_w == pytest.approx(613.3333, abs=1e-3)  # no energy: mean reading
    assert summary.temperature_max_c == 63
    assert summary.throttle_reasons == "sw_power_cap+sw_thermal_slowdown"  # not idle
    assert window_telemetry(window([]), 1980) == WindowTelemetry() == window_telemetry(None, 1980)


def test_power_comes_from_the_energy_counter_where_it_was_read():
    # 1300 J over a 2 s window: 650 W, whatever the one-second average readings said.
    summary = window_telemetry(window(RECORDED, energy_j=1300.0, window_s=2.0), 1980)
    assert summary.power_w == 650.0 and summary.energy_j == 1300.0


def test_a_window_shorter_than_the_counters_steps_takes_the_power_readings():
    # The counter moves every 20-100 ms: over 0.2 s it may have moved once, or not at all.
    summary = window_telemetry(window(RECORDED, energy_j=70.0, window_s=0.2), 1980)
    assert summary.power_w == pytest.approx(613.3333, abs=1e-3) and summary.energy_j is None
    assert summary.power_source == "mean of the power readings (window under 1 s)"
    unread = window_telemetry(window(RECORDED, window_s=2.0), 1980)
    assert unread.power_source == "mean of the power readings (no energy counter)"


def test_reason_bits_decode_without_idleness():
    assert reason_names(0) == [] and reason_names(0x1) == []
    assert reason_names(0x8 | 0x80) == ["hw_slowdown", "hw_power_brake_slowdown"]


def test_a_row_carries_clocks_energy_processes_and_failures():
    # 2*1024^3 FLOP = 2.147e-3 TFLOP a call; 500 calls in a 1 s window of 612 J: 0.570 J/TFLOP.
    summary = window_telemetry(
        window(RECORDED, energy_j=612.0, window_s=1.0, processes=["pid 7 python, 3.0 GiB"]), 1980
    )
    samples = [0.002] * 500
    row = measured_row("h100", "float16", [1024] * 3, samples, 989.4, "datasheet", 0.0, summary)
    assert row.sm_clock_mhz == pytest.approx(1815.0) and row.energy_j == 612.0
    assert row.throttle_reasons == "sw_power_cap+sw_thermal_slowdown"
    assert row.joules_per_tflop == pytest.approx(612 / (500 * 2 * 1024**3 / 1e12))
    assert row.other_processes == "pid 7 python, 3.0 GiB"
    assert "shared GPU: other processes computed on it" in row.flag


def test_a_failing_field_leaves_the_others_and_is_reported():
    def broken(handle):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    fields = {"sm_mhz": lambda h: 1700, "power_w": broken}
    energy = iter([1000.0, 1012.5])
    with Sampler(
        None, 0.001, fields, energy=lambda h: next(energy), processes=lambda h, own: []
    ) as watch:
        while len(watch.samples) < 3:
            pass
    count = len(watch.samples)
    assert all(s["sm_mhz"] == 1700 and s["power_w"] is None for s in watch.samples)
    assert watch.errors == {"power_w: RuntimeError: NVML_ERROR_NOT_SUPPORTED"}
    assert watch.energy_j == 12.5
    assert len(watch.samples) == count  # the thread has stopped
    summary = window_telemetry(watch, None)
    # Over a window this short the counter is not trusted, and every power reading failed.
    assert summary.power_w is None and summary.power_source == ""
    assert summary.telemetry_errors == "power_w: RuntimeError: NVML_ERROR_NOT_SUPPORTED"


def test_each_reasons_share_of_the_samples_and_the_one_that_held_the_clock():
    # RECORDED: idle in 1 of 3 samples, the power cap in 2, the software thermal limit in 1.
    summary = window_telemetry(window(RECORDED, energy_j=1300.0, window_s=2.0), 1980, 700.0)
    shares = reason_shares([int(s["reasons"]) for s in RECORDED])
    assert shares["gpu_idle"] == pytest.approx(1 / 3)
    assert shares["sw_power_cap"] == pytest.approx(2 / 3)
    assert shares["sw_thermal_slowdown"] == pytest.approx(1 / 3)
    assert shares["hw_thermal_slowdown"] == 0.0 and set(shares) == set(CLOCK_EVENT_REASONS.values())
    assert summary.clock_reason == "sw_power_cap"  # idleness never holds the clock
    assert summary.clock_reason_share == pytest.approx(2 / 3)
    assert summary.power_limit_w == 700.0
    assert summary.power_w / summary.power_limit_w == pytest.approx(650.0 / 700.0)  # 1300 J / 2 s
    row = measured_row("h100", "float16", [1024] * 3, [0.002] * 4, 989.4, "datasheet", 0.0, summary)
    assert row.clock_reason == "sw_power_cap" and row.clock_reason_share == pytest.approx(2 / 3)
    assert row.clock_reason_shares == "gpu_idle=0.333+sw_power_cap=0.667+sw_thermal_slowdown=0.333"
    assert row.power_limit_w == 700.0


def test_reasons_not_read_are_told_apart_from_none_set():
    idle = [dict(s, reasons=0x1) for s in RECORDED]
    summary = window_telemetry(window(idle), 1980)
    assert summary.clock_reason == "none" and summary.clock_reason_share is None
    assert summary.clock_reason_shares == "gpu_idle=1"
    assert summary.power_limit_w is None
    # One sample's reasons refused: the shares are of the samples that were read.
    partly = [dict(RECORDED[0], reasons=None), *RECORDED[1:]]
    assert "sw_power_cap=1+" in window_telemetry(window(partly), 1980).clock_reason_shares
    unread = window_telemetry(window([dict(s, reasons=None) for s in RECORDED]), 1980)
    assert unread.clock_reason == "" and unread.clock_reason_shares == ""
    assert unread.throttle_reasons == ""
    assert (
        measured_row(
            "h100", "float16", [1024] * 3, [0.002], 989.4, "datasheet", 0.0, unread
        ).clock_reason_shares
        == ""
    )


def telemetry_row(telemetry: WindowTelemetry, **derived: float) -> SimpleNamespace:
    """A results row's telemetry as the pages read it: every field of the record, what was not
    read NaN (as pandas gives it), so a field the record gains needs no edit here."""
    fields = dataclasses.asdict(telemetry) | derived
    return SimpleNamespace(**{k: float("nan") if v is None else v for k, v in fields.items()})


def test_a_window_with_no_clock_says_why_on_a_rented_gpu_and_nothing_on_a_cpu():
    from roofline.rendering.gap_paragraph import telemetry_sentences

    def row(**read: object) -> SimpleNamespace:
        return telemetry_row(WindowTelemetry(**read))

    head = row()
    gpu = SimpleNamespace(kind="rocm", datasheet=SimpleNamespace(peak_clock_mhz=2100))
    assert telemetry_sentences(head, gpu) == [
        "No amdsmi telemetry was recorded, so the clock under load is unknown."
    ]
    assert telemetry_sentences(head, SimpleNamespace(kind="cpu", datasheet=None)) == []
    clocked = row(sm_clock_mhz=1050.0, throttle_reasons="hw_slowdown+sw_power_cap")
    assert telemetry_sentences(clocked, gpu) == [
        "During the timed window the SM clock averaged 1050 MHz, 50% of the 2100 MHz the "
        "datasheet peak assumes; clock limits reported: hw_slowdown, sw_power_cap."
    ]


def test_the_memory_clock_reaches_the_record_and_the_gap_paragraph():
    """The sampler reads the memory clock with the SM's: the window's mean is the record's, and the
    appendix's telemetry sentence says it; a window without it says nothing of it."""
    from roofline.rendering.gap_paragraph import telemetry_sentences

    summary = window_telemetry(window(RECORDED), max_sm_mhz=1980)
    assert summary.mem_clock_mhz == pytest.approx(2619)
    head = telemetry_row(summary, joules_per_tflop=0.5)
    gpu = SimpleNamespace(kind="cuda", datasheet=SimpleNamespace(peak_clock_mhz=1830))
    assert ", memory clock 2619 MHz, at " in telemetry_sentences(head, gpu)[0]
    unread = [{k: v for k, v in s.items() if k != "mem_mhz"} for s in RECORDED]
    assert window_telemetry(window(unread), max_sm_mhz=1980).mem_clock_mhz is None
