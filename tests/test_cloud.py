"""The SkyPilot task files (generated from conf/), validated offline with SkyPilot's own
loader (no cloud call), and the launcher's cost line and commands."""

import json
from pathlib import Path

import pytest
import yaml

from roofline.cloud import commands, expected_cost, handback_problem, md5, missing_before_launch
from roofline.pipeline import SECRETS

ROOT = Path(__file__).resolve().parents[1]
# SkyPilot's accelerator names, the SXM variant preferred where a cloud names it.
GPU_NAMES = {
    "a100": ["A100-80GB-SXM", "A100-80GB"],
    "h100": ["H100-SXM", "H100"],
    "h200": ["H200-SXM", "H200"],
}


@pytest.mark.parametrize("device", sorted(GPU_NAMES))
def test_task_file_validates_with_skypilots_loader(device):
    sky = pytest.importorskip(
        "sky", reason="SkyPilot is the optional `cloud` group: uv sync --group cloud"
    )
    task = sky.Task.from_yaml(str(ROOT / f"cloud/{device}.yaml"))
    assert [r.accelerators for r in task.resources] == [{n: 1} for n in GPU_NAMES[device]]
    # Taken down when idle: a laptop that goes away leaves nothing billing.
    autostop = task.resources[0].autostop_config
    assert autostop.enabled and autostop.down and autostop.idle_minutes == 10
    assert task.name == f"roofline-{device}" and task.workdir == "."
    assert set(task.secrets) == set(SECRETS) and task.envs == {"DEVICE": device}
    assert "curl -LsSf https://astral.sh/uv/install.sh | sh" in task.setup  # PEP 668 images
    assert "uv sync --locked" in task.setup
    steps = [line.strip() for line in task.run.splitlines()]
    assert steps[-3:] == [
        "uv run dvc pull --allow-missing",
        "uv run dvc repro",
        "uv run python -m roofline.sync push",
    ]


def test_every_gpu_device_has_a_task_file_and_the_readme_shows_its_launch():
    conf = {p.stem: yaml.safe_load(p.read_text()) for p in (ROOT / "conf/device").glob("*.yaml")}
    gpus = sorted(name for name, dev in conf.items() if dev["kind"] == "cuda")
    assert gpus == sorted(p.stem for p in (ROOT / "cloud").glob("*.yaml")) == sorted(GPU_NAMES)
    readme = (ROOT / "README.md").read_text()
    assert "uv run --group cloud python -m roofline.cloud h100" in readme


def test_expected_cost_by_hand():
    assert expected_cost(3.0, 30) == "about $1.50 (30 min at $3/h, conf/device)"
    assert expected_cost(1.5, 20) == "about $0.50 (20 min at $1.5/h, conf/device)"
    assert expected_cost(None, 30).startswith("unknown")


def test_launch_fetches_the_lock_and_results_and_always_takes_the_pod_down(tmp_path):
    launch, fetch, down = commands("h100", tmp_path)
    assert launch[:4] == ["sky", "launch", "-c", "roofline-h100"] and "cloud/h100.yaml" in launch
    assert launch.count("--secret") == 2
    assert fetch[-3:] == [
        "roofline-h100:sky_workdir/experiments/x4-roofline/devices/h100/dvc.lock",
        "roofline-h100:sky_workdir/experiments/x4-roofline/devices/h100/results.json",
        f"{tmp_path}/",
    ]
    assert down == ["sky", "down", "-y", "roofline-h100"]


def test_nothing_is_rented_without_what_the_pod_needs_to_push():
    keys = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    assert missing_before_launch(keys, "store") == []
    missing = missing_before_launch({"AWS_ACCESS_KEY_ID": "k"}, None)
    assert missing[0].startswith("AWS_SECRET_ACCESS_KEY is not set in this shell")
    assert "no default DVC remote is set" in missing[1]


DEVICE = "experiments/x4-roofline/devices/h100"


def pod_lock(probed: str, benchmarked: str, results: bytes, swept: str | None = None) -> str:
    """A dvc.lock as a pod writes it: the fingerprint the probe wrote, the one the benchmark and
    sweep ran after, and the results' checksum."""

    def dep(md5):
        return {"deps": [{"path": f"{DEVICE}/fingerprint.json", "md5": md5}]}

    return yaml.safe_dump(
        {
            "schema": "2.0",
            "stages": {
                "probe": {"outs": [{"path": f"{DEVICE}/fingerprint.json", "md5": probed}]},
                "benchmark": dep(benchmarked)
                | {"outs": [{"path": f"{DEVICE}/results.json", "md5": md5(results)}]},
                "sweep": dep(swept or benchmarked),
            },
        }
    )


def test_a_lock_is_handed_back_only_from_a_pod_that_measured_the_device():
    measured = json.dumps({"device": "h100", "status": "measured"}).encode()
    pending = json.dumps({"device": "h100", "status": "pending"}).encode()
    assert handback_problem("h100", pod_lock("fp1", "fp1", measured), measured) is None
    assert "the pod's probe did not find h100" in handback_problem(
        "h100", pod_lock("fp0", "fp0", pending), pending
    )
    # Probed, then died in the benchmark (out of memory, driver error, pre-emption).
    assert "its benchmark did not finish after the probe" in handback_problem(
        "h100", pod_lock("fp1", "fp0", measured), measured
    )
    assert "its sweep did not finish" in handback_problem(
        "h100", pod_lock("fp1", "fp1", measured, swept="fp0"), measured
    )
    assert "not the one its dvc.lock records" in handback_problem(
        "h100", pod_lock("fp1", "fp1", measured), measured + b" "
    )
    assert "wrote no dvc.lock or results.json" in handback_problem("h100", None, None)
