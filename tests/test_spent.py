"""Where a run's time went: the summary's arithmetic, and a process's start on one clock."""

import json
import os
import time
from dataclasses import asdict

import psutil
import pytest

from roofline.core.spent import Run, StageTime, process, summary


def stage(name: str, started: float, imports_s: float, work_s: float) -> StageTime:
    return StageTime("1:2", name, started, imports_s, work_s)


def test_the_summary_splits_the_run_into_set_up_dvc_imports_and_each_stage():
    run = Run("1:2", started=1000.0, setup_s=4.0)
    stages = [
        stage("probe cpu", 1001.0, 2.0, 1.0),
        stage("benchmark cpu", 1004.0, 2.0, 60.0),
        stage("benchmark h100", 1066.0, 0.5, 0.2),
        stage("report", 1067.0, 1.0, 2.0),
    ]
    measured = {"cpu": {"copy": 1.5, "float32 8192x8192x8192 torch": 25.0, "skipped": 0.001}}
    lines = summary(run, stages, now=1080.0, measured=measured).splitlines()
    # 80 s from DVC's start, and uv's 4 before it; the stages took 8.7 s of it.
    assert lines[0] == "where the time went (84 s in all):"
    assert lines[1] == "  set-up (uv, before DVC started): 4.0 s"
    assert lines[2] == "  DVC itself (the pipeline, hashes, locks): 11.3 s"
    assert lines[3] == "  imports, 4 stage processes: 5.5 s"
    # The longest first; a benchmark's split the longest first too; a pending one's with the rest.
    assert lines[4] == "  benchmark cpu: 60.0 s (float32 8192x8192x8192 torch 25.0 s, copy 1.5 s)"
    assert lines[5:] == ["  report: 2.0 s", "  probe cpu: 1.0 s", "  1 other stages: 0.2 s"]
    # A benchmark that measured is said however short; one that only pended is with the rest.
    quick = [stage("benchmark cpu", 1004.0, 2.0, 0.1), stage("benchmark h100", 1005.0, 0.5, 0.2)]
    lines = summary(run, quick, now=1010.0, measured={"cpu": {"copy": 0.06}}).splitlines()
    assert lines[4:] == ["  benchmark cpu: 0.1 s (copy 0.1 s)", "  1 other stages: 0.2 s"]


def test_without_uv_there_is_no_set_up_line():
    said = summary(Run("1:2", 0.0, None), [], now=10.0, measured={})
    assert said.splitlines() == [
        "where the time went (10 s in all):",
        "  DVC itself (the pipeline, hashes, locks): 10.0 s",
        "  imports, 0 stage processes: 0.0 s",
    ]


def test_a_process_is_read_with_its_parent_and_its_start_on_the_wall_clock():
    before = time.time()
    this, child = process(os.getpid()), psutil.Popen(["sleep", "0.3"])
    try:
        seen = process(child.pid)
        for _ in range(100):  # until the child has exec'd sleep (a fork has no argv of its own)
            if seen.argv:
                break
            time.sleep(0.001)
            seen = process(child.pid)
        assert seen.parent == os.getpid() and seen.argv == ["sleep", "0.3"]
        # Between its launch and now, within the clocks' 10 ms ticks, however busy the host.
        assert before - 0.03 <= seen.started <= time.time() + 0.03
        assert seen.key == process(child.pid).key  # read twice, the same process
    finally:
        child.wait()
    # psutil's own start on Linux counts from a boot time rounded to the second.
    assert abs(this.started - psutil.Process().create_time()) < 1.05
    assert this.parent == os.getppid() and this.key != seen.key


def test_outside_dvc_no_run_is_found_and_nothing_is_logged(tmp_path):
    from roofline.core import spent

    assert spent.this_run() is None  # pytest's ancestors include no dvc
    log = tmp_path / "tmp" / "spent.jsonl"
    log.parent.mkdir()
    with spent.logged("probe", log):
        pass
    assert not log.exists()


def test_a_stage_that_fails_fails_with_its_own_error_whatever_its_timing_meets(
    tmp_path, monkeypatch
):
    from roofline.core import spent

    def no_psutil():
        raise ImportError("No module named 'psutil'")

    monkeypatch.setattr(spent, "this_run", no_psutil)
    log = tmp_path / "tmp" / "spent.jsonl"
    log.parent.mkdir()
    with pytest.raises(ValueError, match="the stage's own"), spent.logged("probe", log):
        raise ValueError("the stage's own")
    assert not log.exists()


def test_a_device_measured_before_this_run_is_not_said_as_measured_by_it(tmp_path, monkeypatch):
    from roofline.core import spent

    run = Run("9:9", started=time.time() - 60, setup_s=None)
    monkeypatch.setattr(spent, "this_run", lambda: run)
    log = tmp_path / "spent.jsonl"
    log.write_text(
        "\n".join(
            json.dumps(asdict(StageTime("9:9", f"benchmark {name}", run.started + 1, 1.0, 1.0)))
            for name in ("cpu", "podhost")
        )
        + "\n"
    )
    measured = {
        "cpu": (run.started + 1, {"copy": 0.5}),  # measured by this run
        "podhost": (run.started - 3600, {"copy": 9.0}),  # pulled: the pod measured it
    }
    said = spent.said_at_end("report", measured, log).splitlines()
    assert "  benchmark cpu: 1.0 s (copy 0.5 s)" in said
    assert "  benchmark podhost: 1.0 s" in said  # its work here, never the pod's split
