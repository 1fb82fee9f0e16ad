"""A noisy timed window is flagged, never recorded as a clean result: a window the host shared
(the process had little of the CPU and the rest was not idle, other threads runnable at both
ends, steal), calls that disagree, a rate far below the device's own measured roof, a window
the call cap cut; and the report says so instead of a cause. The readings are injected: no
assertion rests on the machine's real load, and no speed is asserted."""

import dataclasses
import json

import pytest

from roofline.core.measurement import measurement
from roofline.device import timing
from roofline.device.kinds import Kind
from roofline.device.timing import BenchSettings, HostReading
from roofline.interpretation.aggregate import aggregate
from roofline.interpretation.lab_config import load_lab_params
from roofline.interpretation.rows import row
from roofline.machines.records import knobs_record, sweep_record
from roofline.measuring.measure import Target, describe, measure_point
from roofline.rendering.appendix import appendix
from roofline.rendering.report import render
from tests.golden import HERE, ROOT, parsed

N = 8192

# What the timed window had of the host (Measurement's fields), as roofline.device.timing records
# them.
BUSY = dict(window_s=10.0, cpu_share=0.48, cpu_idle=0.0, other_runnable=2, steal=0.0)
QUIET = dict(window_s=10.0, cpu_share=0.99, cpu_idle=0.0, other_runnable=0, steal=0.0)
# A one-thread BLAS call on an idle machine: half the CPU, the other half idle, nobody else.
ONE_THREAD = dict(window_s=10.0, cpu_share=0.5, cpu_idle=0.5, other_runnable=0, steal=0.0)
# macOS and Windows: the process's CPU time only; no idle, runnable or steal figures.
NO_PROC = dict(window_s=10.0, cpu_share=0.48)


def point(shape=(N, N, N), samples=(1.0, 1.01, 1.02), timing="host clock", **window):
    measured = measurement("cpu", "float32", list(shape), list(samples), 1e-7, timing=timing)
    return dataclasses.replace(measured, **window)


def test_a_busy_window_is_flagged_with_its_figures():
    out = row(point(**BUSY))
    assert out.noisy == (
        "a shared window: the process had 48% of the CPU during the window, "
        "2 other runnable threads at its start and end"
    )
    assert f"noisy window ({out.noisy}): re-measure on a quiet machine" in out.flag


@pytest.mark.parametrize("window", [QUIET, ONE_THREAD], ids=["quiet", "one BLAS thread"])
def test_a_quiet_window_is_not_flagged(window):
    out = row(point(**window))
    assert out.flag == "" and out.noisy == ""


def test_a_missing_source_is_none_and_flags_nothing():
    out = row(point(**NO_PROC))
    assert out.cpu_idle is None and out.other_runnable is None and out.steal is None
    # 48% alone could be a one-thread BLAS call on an idle machine: no idle figure, no flag.
    assert out.flag == "" and out.noisy == ""


def test_other_runnable_threads_or_steal_alone_are_a_shared_window():
    others = row(point(**(QUIET | {"other_runnable": 1})))
    assert "1 other runnable thread at its start and end" in others.noisy
    stolen = row(point(**(QUIET | {"steal": 0.1})))
    assert "the hypervisor took 10% of the cores' time" in stolen.noisy


def test_a_gpu_window_is_not_flagged_for_its_hosts_share():
    # Device events time the device whatever the host does; its other processes are NVML's.
    gpu = point(timing="cuda events, calls back to back", other_runnable=3, steal=0.2)
    assert row(gpu).flag == ""


def test_calls_that_disagree_are_noisy_and_one_interrupt_is_not():
    halves = row(point(samples=[1.0] * 50 + [2.0] * 50))
    assert "the middle 80% of its calls spread 67% of the median" in halves.noisy
    # (max - min) / median is 99 here, as one interrupt in 10,000 short calls makes it.
    outliers = row(point(samples=[1.0] * 9990 + [100.0] * 10))
    assert outliers.spread > 10 and outliers.flag == ""


def test_a_rate_far_below_the_cpus_own_roof_is_noisy():
    # 48^3 float32: 8 FLOP/byte, roof min(0.234, 8 x 50 GB/s) = 0.234 TFLOP/s, ~1 us a call.
    slow = row(point([48, 48, 48], [0.016] * 5), fma_tflops=0.234, copy_gbps=50.0)
    assert "of its roof measured in the same run (0.234 TFLOP/s" in slow.noisy
    fast = row(point([48, 48, 48], [5e-6] * 5), fma_tflops=0.234, copy_gbps=50.0)
    assert fast.flag == ""
    assert row(point([48, 48, 48], [0.016] * 5)).flag == ""  # no ceilings measured: no roof


def test_a_window_the_call_cap_cut_is_flagged_and_logged():
    cut = "0.04 s of the 0.5 s asked: cut by the 10,000-call cap"
    out = row(point(**(QUIET | {"window_cut": cut})))
    assert f"short window: {cut}" in out.flag and out.noisy == ""
    assert describe(point(**(QUIET | {"window_cut": cut}))).endswith(
        f"window {cut}, 99% of the CPU"
    )


def test_a_measured_point_records_its_window(monkeypatch):
    # Two readings of a busy host around the timed calls: 0.96 s of CPU in 1 s on 2 threads.
    readings = iter(
        [HostReading(10.0, 5.0, 4, 2, 3.0, 7.0, 2), HostReading(11.0, 5.96, 4, 2, 3.0, 7.0, 2)]
    )
    monkeypatch.setattr(timing, "read_host", lambda: next(readings))
    bench = dict(seed=0, warmup=1, repeats=2, check_rows=4, min_seconds=0.0, warmup_seconds=0.0)
    target = Target(Kind(), None, 1 << 30, {"float32"}, threads=2)
    measured = measure_point("cpu", "float32", [8, 8, 8], target, BenchSettings(**bench), {})
    assert (measured.window_s, measured.cpu_share) == (1.0, pytest.approx(0.48))
    assert (measured.other_runnable, measured.cpu_idle, measured.steal) == (2, 0.0, 0.0)
    assert "window 1 s, 48% of the CPU, 2 other runnable" in describe(measured)


def pages(window: dict, fma_gflops: float = 200.0) -> dict[str, str]:
    """The golden CPU record (a real run), its measured rows timed in `window`, its FMA ceiling
    set below the computed peak (where the report would blame the vector clock) and above the
    0.1932 TFLOP/s its kernel reached (below that, the ceiling would bound nothing), rendered."""
    cfg = load_lab_params(ROOT / "params.yaml")
    record = json.loads((HERE / "cpu.json").read_text())
    record["fma"]["gflops"] = fma_gflops
    for measured in record["rows"]:
        if measured["status"] == "measured":
            measured.update(window)
    records = {"cpu": parsed("cpu", record)}
    sweeps = {"cpu": sweep_record("cpu", "none", "measured")}
    knobs = {"cpu": knobs_record("cpu", "none", "measured")}
    table, knob_rows, manifest, _ = aggregate(cfg, records, sweeps, knobs)
    manifest = json.loads(json.dumps(manifest))
    return {"page": render(table, manifest, knob_rows), "appendix": appendix(table, manifest)}


def cpu_paragraph(page: str) -> str:
    return next(p for p in page.split("\n\n") if p.startswith("**cpu**"))


def test_the_report_says_a_noisy_window_instead_of_a_cause():
    noisy = pages(BUSY)
    said = (
        "Its timed window was noisy (a shared window: the process had 48% of the CPU during the "
        "window, 2 other runnable threads at its start and end): re-measure on a quiet machine"
    )
    assert said in cpu_paragraph(noisy["page"]) and "loss" not in cpu_paragraph(noisy["page"])
    assert "⚠ noisy window: re-measure" in noisy["page"]  # the verdict, in the one table
    assert "vector clock under load" not in noisy["appendix"] and said in noisy["appendix"]
    assert "- [ ] A concrete gap paragraph per measured device" in noisy["page"]


def test_the_report_reads_a_cause_from_a_quiet_window():
    quiet = pages(QUIET)
    assert "noisy" not in quiet["page"] + quiet["appendix"]
    assert cpu_paragraph(quiet["page"]).count("of the gap") >= 2  # its losses, and what is left
    assert "- measured FMA ceiling: **0.2 TFLOP/s**" in quiet["appendix"]


def test_the_record_s_own_ceilings_flag_a_row_far_below_them():
    # The golden run's float32 rows, 100 times slower than its own FMA ceiling allows.
    record = json.loads((HERE / "cpu.json").read_text())
    for measured in record["rows"]:
        measured["samples_s"] = [t * 100 for t in measured["samples_s"]]
    cfg = load_lab_params(ROOT / "params.yaml")
    table = aggregate(
        cfg,
        {"cpu": parsed("cpu", record)},
        {"cpu": sweep_record("cpu", "none", "measured")},
        {"cpu": knobs_record("cpu", "none", "measured")},
    ).table
    lab = table[(table.status == "measured") & (table.dtype == "float32")]
    assert all("of its roof measured in the same run" in flag for flag in lab.flag)
