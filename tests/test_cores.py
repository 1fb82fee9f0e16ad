"""The cores a run had and a peak a busy machine cannot lower (issue 22): a fenced run (taskset,
a container's cpuset or CPU quota) counts the cores it may use, for its threads, its clock, its
FMA ceiling and its peak; a clock or FMA ceiling measured while another process held the CPUs
is not used as a peak; no MFU above 100% reaches a deliverable."""

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from roofline.core.measurement import measurement
from roofline.device import hardware, peakflops, programs
from roofline.device.hardware import physical_cores_of
from roofline.device.timing import HostTimer, host_window, read_host, sample
from roofline.interpretation.noise import shared_window
from roofline.interpretation.rows import row
from roofline.machines.identity import describe, identity, same_machine
from roofline.machines.records import probe_decision
from tests.conftest import counted

CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
needs_two = pytest.mark.skipif(
    len(CPUS) < 2 or shutil.which("taskset") is None,
    reason="needs two usable CPUs and taskset (Linux)",
)
needs_cc = pytest.mark.skipif(programs.compiler() is None, reason="no C compiler here")


@contextmanager
def competitors(count: int):
    """`count` CPU-bound processes (a played neighbour), for as long as the block runs."""
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    time.sleep(0.3)  # running before the measurement starts
    try:
        yield
    finally:
        for process in spin:
            process.kill()
            process.wait()


# --- the cores a fenced run may use --------------------------------------------------------

FENCED = {"model": "CPU X", "logical_cores": 1, "machine_cores": 2, "isa": ["avx2"]}


def test_a_fence_is_the_same_machine_run_with_fewer_cores():
    fenced, whole = identity("cpu", FENCED), identity("cpu", FENCED | {"logical_cores": 2})
    assert fenced == {"model": "CPU X", "logical_cores": 2, "isa": ["avx2"], "usable_cores": 1}
    assert whole == {"model": "CPU X", "logical_cores": 2, "isa": ["avx2"]}  # as before fences
    assert fenced != whole and same_machine(fenced, whole)
    assert not same_machine(whole, whole | {"model": "CPU Y"})
    assert describe(fenced) == "CPU X (2 cores, 1 usable)"


def test_a_run_with_other_cores_usable_re_measures_and_says_why():
    on_record = {"status": "recorded", "hardware": identity("cpu", FENCED)}
    here = identity("cpu", FENCED | {"logical_cores": 2})
    fresh = {"status": "recorded", "hardware": here}
    new, said = probe_decision("cpu", on_record, here, fresh)
    assert new is fresh
    assert said == (
        "cpu: here (CPU X (2 cores)); its results were measured with 1 cores usable: "
        "measuring it with 2"
    )
    other = identity("cpu", FENCED | {"model": "CPU Y", "logical_cores": 2})
    kept, said = probe_decision("cpu", on_record, other, {"hardware": other})
    assert kept is on_record and "keeping them" in said  # another machine's results stay


def test_physical_cores_are_counted_among_the_cpus_usable(tmp_path):
    # Two cores with two SMT threads each: CPUs 0 and 2 are core 0's, 1 and 3 core 1's.
    for cpu, core in enumerate([0, 1, 0, 1]):
        topology = tmp_path / f"cpu{cpu}/topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text("0\n")
        (topology / "core_id").write_text(f"{core}\n")
    assert physical_cores_of({0, 2}, tmp_path) == 1
    assert physical_cores_of({0, 1}, tmp_path) == 2
    assert physical_cores_of({0, 1, 2, 3}, tmp_path) == 2
    assert physical_cores_of({7}, tmp_path) is None  # sysfs does not say: not guessed


def test_a_fence_is_said_as_taskset_writes_it():
    assert hardware.compact({0, 1, 2, 3, 6, 8, 9}) == "0-3,6,8-9"
    assert hardware.fence(2, 8, {4, 5}) == "CPU affinity: 2 of 8 CPUs (4-5)"


def facts_under(*prefix: str) -> dict:
    code = (
        "import json; from roofline.device.hardware import cpu_info; print(json.dumps(cpu_info()))"
    )
    done = subprocess.run(
        [*prefix, sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@needs_two
def test_taskset_leaves_the_probe_one_core_and_the_boot_cache_tells_them_apart():
    fenced, whole = facts_under("taskset", "-c", str(CPUS[0])), facts_under()
    assert (fenced["logical_cores"], fenced["physical_cores"]) == (1, 1)
    assert fenced["machine_cores"] == whole["machine_cores"] >= 2
    assert fenced["fence"].startswith("CPU affinity: 1 of ")
    assert whole["logical_cores"] == len(CPUS) and whole["fence"] is None
    code = "import json; from roofline.device.hardware import boot; print(json.dumps(boot()))"
    keys = [
        subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True)
        for prefix in (["taskset", "-c", str(CPUS[0])], [])
    ]
    assert keys[0].stdout != keys[1].stdout  # a fenced run's description is not reused


# --- a window another process shared ---------------------------------------------------------


def test_idle_is_counted_over_the_cpus_we_may_use(tmp_path):
    """Under `taskset -c 0`, CPU 1 idling does not hide a competitor on CPU 0."""
    (tmp_path / "self/task").mkdir(parents=True)

    def stat(busy0: int, idle1: int) -> None:
        (tmp_path / "stat").write_text(
            f"cpu  {busy0} 0 0 {idle1} 0 0 0 0\n"
            f"cpu0 {busy0} 0 0 0 0 0 0 0\n"
            f"cpu1 0 0 0 {idle1} 0 0 0 0\n"
            "procs_running 2\n"
        )

    stat(100, 100)
    ours, every = read_host(tmp_path, cpus={0}), read_host(tmp_path, cpus={0, 1})
    stat(200, 200)  # one second (100 ticks): cpu0 busy, cpu1 idle
    windows = []
    for start, end in ((ours, read_host(tmp_path, cpus={0})), (every, read_host(tmp_path, {0, 1}))):
        end.wall_s, end.cpu_s = start.wall_s + 1.0, start.cpu_s + 0.5  # half of it ours
        windows.append(host_window(start, end, threads=1))
    window, counted_whole = windows
    assert window.idle == 0.0 and window.cpu_share == pytest.approx(0.5)
    assert counted_whole.idle == pytest.approx(0.5)  # what hid the competitor before
    point = measurement("cpu", "float32", [64, 64, 64], [0.1], 0.0, timing="host clock")
    point.cpu_share, point.cpu_idle = window.cpu_share, window.idle
    assert shared_window(point) == "the process had 50% of the CPU during the window"


def test_a_timed_window_shared_with_a_competitor_is_flagged():
    import numpy as np

    a = np.ones((192, 192), np.float32)
    threads = len(CPUS) or 1
    with competitors(threads):
        timed = sample(
            lambda _: a @ a, HostTimer(), counted(1, 3, min_seconds=0.4), threads=threads
        )
    point = measurement("cpu", "float32", [192] * 3, timed.samples, 0.0, timing="host clock")
    point.cpu_share, point.cpu_idle = timed.window.cpu_share, timed.window.idle
    point.other_runnable, point.steal = timed.window.other_runnable, timed.window.steal
    if point.cpu_share is None:
        pytest.skip("this OS reports no CPU share (no /proc)")
    assert shared_window(point), (point.cpu_share, point.cpu_idle, point.other_runnable)
    assert "noisy window" in row(point, 1e3).flag


# --- the clock and the FMA ceiling: best of windows of their own -------------------------------


def played_windows(monkeypatch, *windows):
    seen = iter(windows)
    monkeypatch.setattr(programs, "run_window", lambda *args: next(seen))


def test_the_best_window_of_its_own_is_kept_and_a_shared_one_never(monkeypatch):
    W = programs.Window
    played_windows(
        monkeypatch,
        W([9.0, 9.0], [0.99, 0.5]),  # the highest total, but one copy shared its CPU
        W([4.0, 4.1], [0.99, 0.98]),
        W([4.2, 4.1], [0.97, 0.99]),
    )
    best, shared = programs.best_window(Path("x"), [], 2, windows=3)
    assert best.values == [4.2, 4.1] and shared == ""
    played_windows(monkeypatch, W([2.0], [0.5]), W([2.2], [0.6]))
    best, shared = programs.best_window(Path("x"), [], 1, windows=2)
    assert best.values == [2.2]
    assert shared == (
        "every one of its 2 windows shared the CPUs with another process (its copies had at "
        "most 60% of a CPU; 90% is a CPU of its own)"
    )


def test_a_clock_measured_only_in_shared_windows_is_not_used(monkeypatch):
    from collections import namedtuple

    import psutil

    freq = namedtuple("freq", "current min max")
    monkeypatch.setattr(
        peakflops, "measure_clock_ghz", lambda cores, seconds: (1.9, "every one ...")
    )
    monkeypatch.setattr(psutil, "cpu_freq", lambda: freq(2400.0, 0.0, 3200.0))
    assert peakflops.cpu_clock(2) == {
        "ghz": 3.2,
        "source": "the OS's maximum clock (psutil); the measured clock (1.90 GHz) was not "
        "used: every one ...",
    }
    monkeypatch.setattr(psutil, "cpu_freq", lambda: None)
    assert peakflops.cpu_clock(2) == {
        "ghz": None,
        "source": "the measured clock (1.90 GHz) was not used: every one ...",
    }


@needs_cc
def test_a_competitor_for_every_window_leaves_no_fma_ceiling_and_no_clock():
    info = hardware.cpu_info()
    with competitors(info["logical_cores"]):
        fma = peakflops.measure_fma(info["logical_cores"], info["isa"], seconds=0.05)
        ghz, shared = peakflops.measure_clock_ghz(info["logical_cores"])
    assert fma["gflops"] is None and fma["shared_gflops"] > 0
    assert fma["reason"].startswith("not used: every one of its 5 windows shared the CPUs")
    if ghz is not None:  # x86-64
        assert shared.startswith("every one of its 5 windows shared the CPUs")


# --- no MFU above 100% in any deliverable ------------------------------------------------------


def test_a_figure_above_its_peak_has_no_mfu_anywhere():
    from roofline.interpretation.aggregate import metrics, results_table

    flops = 2 * 64**3
    point = measurement("cpu", "float32", [64, 64, 64], [flops / 2e12], 0.0)  # 2 TFLOP/s
    above, below = row(point, 1.0, "computed"), row(point, 4.0, "computed")
    assert above.mfu is None and above.peak_tflops == 1.0
    assert above.flag.startswith("above the dense peak (2 > 1 TFLOP/s, 200%): a bug")
    assert below.mfu == pytest.approx(0.5) and below.flag == ""
    for r in (above, below):
        r.series = "lab"
    shown = metrics(results_table([above]))["cpu"]["float32"]
    assert shown == {"tflops": pytest.approx(2.0), "mfu": None, "flagged": True}
    assert metrics(results_table([below]))["cpu"]["float32"]["flagged"] is False


def test_the_page_says_a_figure_above_its_peak_is_a_bug_not_an_mfu():
    from roofline.rendering.gap_paragraph import mfu_sentence

    flops = 2 * 64**3
    head = row(measurement("cpu", "float32", [64] * 3, [flops / 2e12], 0.0), 1.0, "computed")
    said = mfu_sentence(head)
    assert said.startswith("It has no MFU: 2 TFLOP/s is above the dense peak 1 TFLOP/s")
    assert "%" not in said


# --- end to end: a fenced run, then a plain one -------------------------------------------------


@needs_two
@pytest.mark.slow
def test_a_fenced_run_measures_one_core_and_a_plain_run_after_it_measures_them_all(tmp_path):
    import csv

    from tests.machines import PLAYED_CACHES, clone, dvc, make_project, results, run

    # No GPU device: its four stages would only pend, and the CPU is the subject.
    project = clone(make_project(tmp_path, gpus=()), tmp_path / "laptop", pull=False)

    # This CPU as its probe finds it under the fence and without it, with small played cache
    # levels: the cores are the subject, and a VM's sysfs L3 (300-480 MiB, "shared by 2") made
    # each run fill gigabytes of DRAM buffers (30 s of the test's 70 here).
    def with_played_caches(cpu: dict) -> dict:  # each shared by no more CPUs than are usable
        caches = [
            c | {"shared_by": min(c["shared_by"], cpu["logical_cores"])}
            for c in PLAYED_CACHES["caches"]
        ]
        return {"cpu": cpu | PLAYED_CACHES | {"caches": caches, "cache_bytes": 1 << 20}, "gpus": []}

    fenced = with_played_caches(facts_under("taskset", "-c", str(CPUS[0])))
    whole = with_played_caches(facts_under())
    # Up to the table the cores are read from (`dvc repro aggregate`): the pages it renders
    # into are other tests' subject, and two renders cost 5 CPU-s. The fenced run is a process
    # of its own, under taskset; the plain one runs in this process, as `dvc` does.
    repro = ("repro", "aggregate")
    run(
        project, "taskset", "-c", str(CPUS[0]), sys.executable, "-m", "dvc", *repro, hardware=fenced
    )
    fenced = results(project, "cpu")
    assert (fenced["found"]["logical_cores"], fenced["found"]["physical_cores"]) == (1, 1)
    assert fenced["run"]["threads"] == 1 and fenced["hardware"]["usable_cores"] == 1
    assert len(fenced["fma"].get("per_core_gflops") or [0]) == 1  # one copy, on its one CPU

    def peak_sources() -> set[str]:
        with open(project / "experiments/x4-roofline/results.csv", encoding="utf-8") as f:
            return {r["peak_source"] for r in csv.DictReader(f) if r["device"] == "cpu"}

    # The computed peak counts the cores the run had (at the clock set in conf, or the one its
    # FMA ceiling implies).
    assert all(s.startswith("1 cores x ") for s in peak_sources())
    said = dvc(project, *repro, hardware=whole)
    assert "its results were measured with 1 cores usable: measuring it with" in said
    whole = results(project, "cpu")
    cores = whole["found"]["logical_cores"]
    assert cores == len(CPUS) and whole["run"]["threads"] == cores
    assert "usable_cores" not in whole["hardware"]
    physical = whole["found"]["physical_cores"]
    assert all(s.startswith(f"{physical} cores x ") for s in peak_sources())
    assert results(project, "podhost")["status"] == "pending"  # not this machine's
    assert "cpu/dvc.yaml:benchmark" not in dvc(project, "status", hardware=whole)  # a third neither


@pytest.mark.slow
def test_a_run_with_a_competitor_throughout_shows_no_mfu_above_100_percent(tmp_path):
    """The queued pair's failure, played: a peak far too low (set here in conf, as a clock read
    in a shared window once lowered it), while another process holds every CPU."""
    import csv
    import re

    from tests.machines import DEVICES, PLAYED_CACHES, clone, compose, dvc, make_project

    # No GPU device: its four stages would only pend, and the CPU is the subject.
    project = clone(make_project(tmp_path, gpus=()), tmp_path / "laptop", pull=False)
    # This CPU as its probe finds it, with small played cache levels: the competitor is the
    # subject, and this VM's sysfs L3 (480 MiB) would make each DRAM buffer 960 MiB.
    live = hardware.cpu_info()
    described = {"cpu": {**live, **PLAYED_CACHES, "cache_bytes": 1 << 20}, "gpus": []}
    overrides = [
        # A peak of 100 kFLOP/s: a 256^3 call would take 335 s to fall below it (a clock
        # below the 0.2 GHz any CPU runs at is refused in conf; at 0.01 GHz, under two busy
        # loops beside this test's competitor, numpy's fell below: MFU 82%).
        "devices.cpu.skus.any.peak_tflops.float32=1e-7",
        "devices.cpu.dtypes=[float32]",
        "devices.cpu.shapes=[[256,256,256]]",
        "bench.min_seconds=0.2",
    ]
    compose(project, *overrides)
    # One process fewer than the CPUs already leaves every window at most (n)/(2n - 1) of a
    # CPU (2/3 on two), and slows the other tests running beside it less.
    with competitors(max(1, len(CPUS) - 1)):  # for the whole of the cpu's measurement
        dvc(project, "repro", f"{DEVICES}/cpu/dvc.yaml", hardware=described)
    dvc(project, "repro", hardware=described)  # the rest, and the deliverables
    out = project / "experiments/x4-roofline"
    found = json.loads((out / "devices/cpu/results.json").read_text(encoding="utf-8"))
    # The FMA ceiling shared every window: not used, so it cannot lift the peak either.
    assert found["fma"]["gflops"] is None and found["fma"]["reason"].startswith("not used")
    with open(out / "results.csv", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["device"] == "cpu" and r["status"] == "measured"]
    assert rows
    for r in rows:
        assert r["mfu"] == "" and "above the dense peak" in r["flag"], r
        assert "noisy window (a shared window" in r["flag"], r
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))["cpu"]
    assert all(m["mfu"] is None and m["flagged"] for m in metrics.values()), metrics
    pages = (out / "REPORT.md").read_text(encoding="utf-8") + (
        out / "REPORT-appendix.md"
    ).read_text(encoding="utf-8")
    assert "no MFU: above its dense peak" in pages
    assert all(float(p) <= 100 for p in re.findall(r"MFU[^0-9|]{0,20}?([0-9.]+)%", pages))
