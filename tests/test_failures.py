"""Failures lose nothing: an interrupted or failed benchmark leaves the previous results, and a
corrupt or hand-edited file stops the stage that reads it, naming the file and the row."""

import errno
import json
import shutil
from pathlib import Path

import pytest
import torch

import roofline.measuring.benchmark
from roofline.configuration.measuring_config import load_params
from roofline.core import paths
from stages import aggregate, benchmark, probe
from stages import run as run_stage
from tests.conftest import LAPTOP

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """The repository's params.yaml, a cpu recorded as this machine, and its previous results."""
    shutil.copy(ROOT / "params.yaml", tmp_path)
    monkeypatch.chdir(tmp_path)
    described = tmp_path / "laptop.json"
    described.write_text(json.dumps(LAPTOP), encoding="utf-8")
    monkeypatch.setenv("ROOFLINE_HARDWARE", str(described))
    probe.main(["cpu"])
    paths.results_path("cpu").write_text('{"previous": "results"}\n', encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (KeyboardInterrupt(), "interrupted; nothing was written"),
        (
            torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
            "failed: OutOfMemoryError: CUDA out of memory",
        ),
        (
            RuntimeError("CUDA error: an illegal memory access was encountered"),
            "failed: RuntimeError: CUDA error",
        ),
        (
            OSError(errno.ENOSPC, "No space left on device"),
            "No space left on device; free some disk space, then run again",
        ),
    ],
)
def test_a_benchmark_that_fails_midway_keeps_the_previous_results(
    workspace, monkeypatch, capsys, failure, said
):
    def fails(*args, **kwargs):
        raise failure

    monkeypatch.setattr(roofline.measuring.benchmark, "measure_device", fails)
    with pytest.raises(SystemExit) as exit_:
        run_stage(lambda: benchmark.main(["cpu"]))
    assert said in str(exit_.value) and "the previous results are as they were" in str(exit_.value)
    # A full disk and an interrupt are said whole by their message: no traceback.
    quiet = "No space left" in said or "interrupted" in said
    assert ("Traceback" in capsys.readouterr().err) != quiet
    assert paths.results_path("cpu").read_text(encoding="utf-8") == '{"previous": "results"}\n'
    assert [p.name for p in paths.device_dir("cpu").iterdir()] == [
        "fingerprint.json",
        "results.json",
    ]


def test_a_corrupt_fingerprint_names_its_file_and_how_to_restore_it(workspace):
    paths.fingerprint_path("cpu").write_text('{"device": "cpu", ', encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        run_stage(lambda: benchmark.main(["cpu"]))
    assert "experiments/x4-roofline/devices/cpu/fingerprint.json is not valid JSON" in str(
        exit_.value
    )
    assert "uv run dvc checkout" in str(exit_.value)


def test_aggregate_stops_at_a_hand_edited_row_naming_file_and_row(workspace):
    for name in load_params().devices:  # every device params.yaml lists has its records
        row = {"device": name, "dtype": "float16", "m": 8, "n": 8, "k": 8, "status": "pending"}
        for path in (paths.results_path(name), paths.sweep_path(name), paths.knobs_path(name)):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                json.dumps(
                    {
                        "device": name,
                        "status": "pending",
                        "rows": [row] if path.name == "results.json" else [],
                    }
                ),
                encoding="utf-8",
            )
    edited = json.loads(paths.results_path("h100").read_text(encoding="utf-8"))
    edited["rows"].append(dict(edited["rows"][0], status="measured", samples_s="fast"))
    paths.results_path("h100").write_text(json.dumps(edited), encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        run_stage(aggregate.main)
    said = "experiments/x4-roofline/devices/h100/results.json, row 2, field samples_s: 'fast'"
    assert said in str(exit_.value)
    assert not (paths.EXPERIMENT / "results.csv").exists()


def test_sync_without_a_remote_says_which_is_missing_and_how_to_add_one(tmp_path, monkeypatch):
    from dvc.repo import Repo

    from roofline import sync
    from roofline.core import errors

    Repo.init(tmp_path, no_scm=True).close()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        errors.run(lambda: sync.main(["push"]))
    message = str(exit_.value)
    assert message.startswith("error: no default DVC remote is set (remotes configured: none)")
    assert "`uv run dvc remote add -d NAME URL`" in message and "None" not in message
    with pytest.raises(SystemExit) as exit_:
        errors.run(lambda: sync.main(["pull", "-r", "backup"]))
    assert "no DVC remote 'backup'; remotes configured: none" in str(exit_.value)


def test_a_pulled_record_in_a_state_this_code_does_not_know_is_kept_and_named(workspace):
    newer = '{"device": "cpu", "status": "measured-v2", "rows": []}\n'
    paths.results_path("cpu").write_text(newer, encoding="utf-8")
    fingerprint = paths.fingerprint_path("cpu").read_text(encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        run_stage(lambda: probe.main(["cpu"]))
    said = str(exit_.value)
    assert "results.json: status 'measured-v2'; allowed: measured, pending" in said
    assert "`git pull`" in said and "dvc checkout --force" in said
    # Never taken for never measured:
    assert paths.results_path("cpu").read_text(encoding="utf-8") == newer
    assert paths.fingerprint_path("cpu").read_text(encoding="utf-8") == fingerprint


def test_a_shape_too_big_for_this_device_says_the_override_stays_in_params(workspace):
    import subprocess

    for cmd in (["init", "-q"], ["add", "params.yaml"], ["commit", "-qm", "params"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *cmd], check=True)
    params = workspace / "params.yaml"
    # What `dvc exp run -S 'devices.cpu.shapes=[[200000,200000,200000]]'` leaves there.
    params.write_text(
        params.read_text(encoding="utf-8").replace("- 8192\n", "- 200000\n"), encoding="utf-8"
    )
    with pytest.raises(SystemExit) as end:
        run_stage(lambda: benchmark.main(["cpu"]))
    said = str(end.value)
    assert "devices.cpu.shapes has [200000, 200000, 200000]" in said, said
    assert "params.yaml differs from the last commit" in said
    assert "`git checkout params.yaml` restores it" in said
    assert json.loads(paths.results_path("cpu").read_text(encoding="utf-8")) == {
        "previous": "results"
    }


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_standard_output_is_not_called_a_full_disk():
    import subprocess
    import sys

    program = (
        "from roofline.core.errors import run\n"
        "run(lambda: print('measured and written; now said'), kept='the results were kept')\n"
    )
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-c", program],
            cwd=ROOT,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.returncode == 1
    assert done.stderr.startswith(
        "failed: standard output could not be written (No space left on device): it goes to a "
        "full file or device"
    ), done.stderr
    assert "free some disk space" not in done.stderr and "Exception ignored" not in done.stderr
    assert done.stderr.rstrip().endswith("the results were kept")
