"""The SkyPilot task files (generated from conf/), validated offline with SkyPilot's own
loader (no cloud call), and the launcher's cost line and commands."""

from pathlib import Path

import pytest
import yaml

from roofline.cloud import commands, expected_cost
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


def test_launch_fetches_the_lock_and_always_takes_the_pod_down():
    launch, fetch, down = commands("h100")
    assert launch[:4] == ["sky", "launch", "-c", "roofline-h100"] and "cloud/h100.yaml" in launch
    assert launch.count("--secret") == 2
    assert fetch[-2:] == [
        "roofline-h100:sky_workdir/experiments/x4-roofline/devices/h100/dvc.lock",
        "experiments/x4-roofline/devices/h100/dvc.lock",
    ]
    assert down == ["sky", "down", "-y", "roofline-h100"]
