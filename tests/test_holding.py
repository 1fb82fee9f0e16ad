"""One measurement of a device at a time on a machine: a second waits for the first, saying
for which process."""

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from roofline.machines.holding import holding, lock_path
from tests.machines import ROOT

HOLD = """
import sys, time
from roofline.machines.holding import holding
with holding(sys.argv[1], "benchmark"):
    print("held", flush=True)
    time.sleep(1.0)
    print(time.time(), flush=True)  # just before it lets go
"""


def test_a_second_measurement_of_a_device_waits_for_the_first_and_says_for_whom(capsys):
    name = f"test-{uuid.uuid4().hex[:8]}"  # no other test's device
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD, name], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert first.stdout.readline().strip() == "held"
    with holding(name, "sweep"):
        taken = time.time()
    let_go = float(first.stdout.readline())
    first.wait()
    assert taken >= let_go  # it waited for the first to end
    said = capsys.readouterr().err
    assert f"{name}: waiting for its benchmark (pid {first.pid}, in {ROOT}" in said
    lock_path(name).unlink(missing_ok=True)
    lock_path(name).with_suffix(".holder").unlink(missing_ok=True)


# A holder that takes the lock and names itself a moment later, as `holding` does; a waiter can
# arrive in between (two clones started at once).
LATE = """
import json, os, sys, time
from filelock import FileLock
from roofline.machines.holding import lock_path
path = lock_path(sys.argv[1])
with FileLock(str(path)):
    print("held", flush=True)
    time.sleep(0.5)
    who = {"stage": "benchmark", "pid": os.getpid(), "cwd": os.getcwd(), "since": "now"}
    path.with_suffix(".holder").write_text(json.dumps(who))
    time.sleep(0.5)
    path.with_suffix(".holder").unlink()
"""


def test_a_waiter_arriving_before_the_holder_names_itself_still_names_it(capsys):
    name = f"test-{uuid.uuid4().hex[:8]}"
    first = subprocess.Popen(
        [sys.executable, "-c", LATE, name], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert first.stdout.readline().strip() == "held"
    with holding(name, "sweep"):
        pass
    first.wait()
    assert f"{name}: waiting for its benchmark (pid {first.pid}," in capsys.readouterr().err
    # Once let go, nobody is named as holding it: a later waiter never reads a gone holder.
    assert not lock_path(name).with_suffix(".holder").exists()
    lock_path(name).unlink(missing_ok=True)


def test_a_measuring_stage_holds_its_device_while_it_measures(tmp_path, monkeypatch):
    import roofline.measuring.benchmark
    from stages import benchmark, probe
    from tests.conftest import LAPTOP

    seen = []

    def measure(*args, **kwargs):
        seen.append(json.loads(lock_path("cpu").with_suffix(".holder").read_text()))
        return {"measured": True}

    monkeypatch.setattr(roofline.measuring.benchmark, "measure_device", measure)
    shutil.copy(ROOT / "params.yaml", tmp_path)
    (tmp_path / "laptop.json").write_text(json.dumps(LAPTOP))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ROOFLINE_HARDWARE", str(tmp_path / "laptop.json"))
    probe.main(["cpu"])
    benchmark.main(["cpu"])
    assert seen and seen[0]["pid"] == os.getpid() and seen[0]["stage"] == "benchmark"


def test_the_hold_is_one_per_machine_whatever_tmpdir_says(monkeypatch, tmp_path):
    import tempfile

    from roofline.machines import holding as hold

    monkeypatch.delenv(hold.HOLD_DIR_ENV, raising=False)
    paths = set()
    for shell in ("one", "two"):  # two shells, each with its own TMPDIR
        monkeypatch.setenv("TMPDIR", str(tmp_path / shell))
        (tmp_path / shell).mkdir()
        monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir reads TMPDIR again
        paths.add(lock_path("cpu"))
    assert len(paths) == 1 and next(iter(paths)).parent == Path("/tmp")
    monkeypatch.setenv("PROGRAMDATA", r"C:\ProgramData")  # Windows': shared by its users
    assert str(hold.hold_dir(windows=True)) == r"C:\ProgramData"


def test_a_waiter_gives_up_after_its_bound_saying_for_whom_and_how_to_go_on(
    monkeypatch, capsys, tmp_path
):
    import pytest

    from roofline.core.errors import ConfigError, RecordError

    monkeypatch.setenv("ROOFLINE_HOLD_DIR", str(tmp_path))
    monkeypatch.setenv("ROOFLINE_HOLD_WAIT_S", "0.5")
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD, "cpu"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"ROOFLINE_HOLD_DIR": str(tmp_path)},
    )
    assert first.stdout.readline().strip() == "held"
    with pytest.raises(RecordError) as gave_up, holding("cpu", "sweep"):
        pass
    first.wait()
    said = str(gave_up.value)
    assert said.startswith(f"cpu: gave up after 0.5 s waiting for its benchmark (pid {first.pid}")
    assert "nothing was measured: let it finish or end it, then run again" in said
    assert "(giving up after 0.5 s, ROOFLINE_HOLD_WAIT_S)" in capsys.readouterr().err
    monkeypatch.setenv("ROOFLINE_HOLD_WAIT_S", "soon")
    refused = pytest.raises(ConfigError, match=r"ROOFLINE_HOLD_WAIT_S='soon': allowed, a number")
    with refused, holding("cpu", "sweep"):
        pass
