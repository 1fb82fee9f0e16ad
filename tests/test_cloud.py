"""The SkyPilot task files (generated from conf/), validated offline with SkyPilot's own
loader (no cloud call), what a pod must have measured to be handed back, and pod-setup. The
launcher itself, with SkyPilot's catalogue and SDK played: tests/test_cloud_launch.py."""

import json
from pathlib import Path

import pytest
import yaml

from roofline.cloud import missing_before_launch
from roofline.configuration.params import RENTED_KINDS
from roofline.machines.handback import handback_problem, md5
from roofline.machines.keys import fingerprint_values
from roofline.machines.pipeline import SECRETS

ROOT = Path(__file__).resolve().parents[1]
# SkyPilot's accelerator names for the lab's GPUs, the SXM variant preferred where a cloud names
# it. One task file per GPU role: a plain name may rent another SKU of it (a PCIe H100), which is
# then measured as that role and judged against its own datasheet line.
GPU_NAMES = {
    "a100": ["A100-80GB-SXM", "A100-80GB", "A100"],
    "h100": ["H100-SXM", "H100"],
    "h200": ["H200-SXM", "H200"],
}


def device_confs() -> dict[str, dict]:
    """Every device's conf file, by name: the lab's devices, whichever conf/ has."""
    return {
        p.stem: yaml.safe_load(p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "conf/device").glob("*.yaml"))
    }


def rentable() -> dict[str, list[str]]:
    """The GPU devices SkyPilot can rent, with the accelerator names their conf gives."""
    return {
        name: dev["sky_accelerators"]
        for name, dev in device_confs().items()
        if dev["kind"] in RENTED_KINDS and dev.get("sky_accelerators")
    }


def test_the_labs_gpus_ask_skypilot_for_these_names():
    found = rentable()
    assert {name: found.get(name) for name in GPU_NAMES} == GPU_NAMES


@pytest.mark.parametrize("device", sorted(rentable()))
def test_task_file_validates_with_skypilots_loader(device):
    sky = pytest.importorskip(
        "sky", reason="SkyPilot is the optional `cloud` group: uv sync --group cloud"
    )
    task = sky.Task.from_yaml(str(ROOT / f"cloud/{device}.yaml"))
    assert [r.accelerators for r in task.resources] == [{n: 1} for n in rentable()[device]]
    # Taken down when idle: a laptop that goes away leaves nothing billing.
    autostop = task.resources[0].autostop_config
    assert autostop.enabled and autostop.down and autostop.idle_minutes == 10
    assert task.name == f"roofline-{device}" and task.workdir == "."
    assert set(task.secrets) == set(SECRETS)
    # UV_NO_SYNC keeps pod-setup's torch; the deadline is a launch by hand's (the launcher
    # sets its own from --minutes).
    assert task.envs == {"DEVICE": device, "UV_NO_SYNC": "1", "ROOFLINE_DEADLINE_S": "3600"}
    # A hung download in the set-up ends the job too.
    assert task.setup.strip().endswith("timeout --kill-after=60 1800 bash scripts/pod-setup")
    steps = [line.strip() for line in task.run.splitlines()]
    assert steps[steps.index("uv run dvc pull --allow-missing") :][:3] == [
        "uv run dvc pull --allow-missing",
        "uv run dvc repro",
        "uv run python -m roofline.sync push",
    ]
    assert 'uv run python -m roofline.cloud --hand-back "$DEVICE"' in steps  # for the launcher


@pytest.mark.posix
def test_a_hung_pod_run_is_stopped_at_its_deadline_and_still_hands_back(tmp_path):
    import os
    import subprocess
    import time

    from roofline.machines.pipeline import POD_RUN

    log = tmp_path / "uv.log"
    (tmp_path / "uv").write_text(  # a `dvc repro` that hangs
        '#!/bin/sh\necho "$*" >> "$UV_LOG"\ncase "$*" in "run dvc repro") exec sleep 60 ;; esac\n',
        encoding="utf-8",
    )
    (tmp_path / "uv").chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}", HOME=str(tmp_path))
    env |= {"UV_LOG": str(log), "ROOFLINE_DEADLINE_S": "1", "DEVICE": "h100"}
    started = time.perf_counter()
    done = subprocess.run(["bash", "-c", POD_RUN], env=env, capture_output=True, text=True)
    assert done.returncode == 124 and time.perf_counter() - started < 30
    assert "roofline: stopped at the launcher's deadline of 1 s (twice --minutes)" in done.stdout
    assert log.read_text(encoding="utf-8").splitlines() == [
        "run dvc pull --allow-missing",
        "run dvc repro",
        "run python -m roofline.cloud --hand-back h100",
    ]


def test_every_rentable_gpu_device_has_a_task_file_and_the_readme_shows_the_lab_launch():
    assert sorted(rentable()) == sorted(p.stem for p in (ROOT / "cloud").glob("*.yaml"))
    assert set(GPU_NAMES) <= set(rentable())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "uv run --group cloud python -m roofline.cloud  " in readme  # every pending GPU
    assert "roofline.cloud h100 --dry-run" in readme and "(default $5)" in readme


def test_nothing_is_rented_without_what_the_pod_needs_to_push():
    keys = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    assert missing_before_launch(keys, "store") == []
    missing = missing_before_launch({"AWS_ACCESS_KEY_ID": "k"}, None)
    assert missing[0].startswith("AWS_SECRET_ACCESS_KEY is not set in this shell")
    assert "no default DVC remote is set" in missing[1]


def under(torch: str) -> dict:
    """A fingerprint a pod's probe writes (`torch` tells two apart)."""
    keys = {stage: {"code": "c", "params": "p"} for stage in ("benchmark", "sweep", "knobs")}
    return {"status": "recorded", "hardware": {"name": "H100"}, "torch": torch, "measures": keys}


def pod_lock(
    benchmarked: dict, results: bytes, swept: dict | None = None, device: str = "h100"
) -> str:
    """A dvc.lock as a pod writes it: the fingerprint the benchmark, sweep and knobs ran under
    (their params), and the results' checksum."""
    folder = f"experiments/x4-roofline/devices/{device}"

    def ran_under(fingerprint, stage):
        return {"params": {f"{folder}/fingerprint.json": fingerprint_values(fingerprint, stage)}}

    return yaml.safe_dump(
        {
            "schema": "2.0",
            "stages": {
                "benchmark": ran_under(benchmarked, "benchmark")
                | {"outs": [{"path": f"{folder}/results.json", "md5": md5(results)}]},
                "sweep": ran_under(swept or benchmarked, "sweep"),
                "knobs": ran_under(benchmarked, "knobs"),
            },
        }
    )


def test_a_lock_is_handed_back_only_from_a_pod_that_measured_the_device():
    def record(status, fingerprint=None):
        return json.dumps({"device": "h100", "status": status, "fingerprint": fingerprint}).encode()

    measured = record("measured", under("2.9"))
    pending = record("pending")
    assert handback_problem("h100", pod_lock(under("2.9"), measured), measured) is None
    assert "the pod's probe did not find h100" in handback_problem(
        "h100", pod_lock(under("2.9"), pending), pending
    )
    # Probed, then died in the benchmark (out of memory, driver error, pre-emption): the lock's
    # benchmark ran under an older fingerprint than the results in the workspace.
    assert "its benchmark did not finish after the probe" in handback_problem(
        "h100", pod_lock(under("2.8"), measured), measured
    )
    assert "its sweep did not finish" in handback_problem(
        "h100", pod_lock(under("2.9"), measured, swept=under("2.8")), measured
    )
    assert "not the one its dvc.lock records" in handback_problem(
        "h100", pod_lock(under("2.9"), measured), measured + b" "
    )
    assert "handed back no dvc.lock or results.json" in handback_problem("h100", None, None)


def pod_setup(tmp_path, driver: str) -> tuple[list[str], str]:
    """Run scripts/pod-setup with stand-ins for nvidia-smi and uv (tests/fakes/uv, which answers
    as uv does): what it asked uv to do, and the torch installed after."""
    import os
    import subprocess

    bin_dir, log, torch = tmp_path / "bin", tmp_path / "uv.log", tmp_path / "torch"
    bin_dir.mkdir(parents=True)
    torch.write_text("2.15.0+cu132\n", encoding="utf-8")  # the lock's
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho {driver}\n", encoding="utf-8")
    (bin_dir / "nvidia-smi").chmod(0o755)
    path = [str(bin_dir), str(ROOT / "tests/fakes/uv"), os.environ["PATH"]]
    env = dict(os.environ, PATH=os.pathsep.join(path), UV_LOG=str(log), PLAYED_UV_TORCH=str(torch))
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/pod-setup")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    calls = log.read_text(encoding="utf-8").splitlines()
    return [c for c in calls if not c.startswith("run ")], torch.read_text().strip()


@pytest.mark.posix
def test_pod_setup_installs_a_torch_for_an_older_driver_only_where_needed(tmp_path):
    assert pod_setup(tmp_path / "new", "580.65.06") == (["sync --locked"], "2.15.0+cu132")
    calls, installed = pod_setup(tmp_path / "old", "550.54.15")
    assert calls == [
        "sync --locked",
        "pip install --reinstall-package torch --torch-backend=auto torch==2.15.0",
    ]
    # Installed for real: a plain `torch==2.15.0` is satisfied by the lock's +cu132 and uv
    # would have installed nothing ("Checked 1 package").
    assert installed == "2.15.0+auto"


def amd_pod_setup(tmp_path, host_rocm: str | None, published: str) -> tuple[int, str, str]:
    """scripts/pod-setup on an AMD pod as SkyPilot's RunPod image has it: the ROCm driver's
    device, no nvidia-smi and no rocm_agent_enumerator; PyTorch publishing the `published` ROCm
    builds. Its exit code, what it said, and the torch installed after."""
    import os
    import subprocess

    kfd, torch, rocm = tmp_path / "kfd", tmp_path / "torch", tmp_path / "rocm"
    tmp_path.mkdir()
    kfd.write_text("")
    torch.write_text("2.15.0+cu132\n", encoding="utf-8")  # the lock's
    if host_rocm:
        (rocm / ".info").mkdir(parents=True)
        (rocm / ".info/version").write_text(f"{host_rocm}-120\n", encoding="utf-8")
    bare = [
        d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "nvidia-smi").exists()
    ]
    env = dict(
        os.environ,
        PATH=os.pathsep.join([str(ROOT / "tests/fakes/uv"), *bare]),
        PLAYED_UV_TORCH=str(torch),
        PLAYED_UV_ROCM=published,
        ROOFLINE_KFD=str(kfd),
        ROCM_PATH=str(rocm),
    )
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/pod-setup")], env=env, capture_output=True, text=True
    )
    return done.returncode, done.stdout + done.stderr, torch.read_text().strip()


@pytest.mark.posix
def test_an_amd_pod_gets_a_rocm_build_by_name_where_uv_cannot_detect_its_gpu(tmp_path):
    # uv's auto, without rocm_agent_enumerator, would install the CPU build: the probe would
    # find no GPU on a paid pod. The host's ROCm first, then PyTorch's newest builds.
    code, said, installed = amd_pod_setup(tmp_path / "a", "6.4.1", "rocm7.1 rocm7.0")
    assert code == 0 and installed == "2.15.0+rocm7.1", said
    tried = [line for line in said.splitlines() if "--torch-backend=" in line]
    assert [t.split("--torch-backend=")[1].split()[0] for t in tried] == [
        "rocm6.4",
        "rocm7.2",
        "rocm7.1",
    ]
    assert (
        "pod-setup: torch 2.15.0+rocm7.1; run the pipeline as UV_NO_SYNC=1 uv run dvc repro" in said
    )
    code, said, installed = amd_pod_setup(tmp_path / "b", "7.0.2", "rocm7.1 rocm7.0")
    assert code == 0 and installed == "2.15.0+rocm7.0", said  # the host's own ROCm first
    code, said, installed = amd_pod_setup(tmp_path / "c", None, "")
    assert code == 1 and installed == "2.15.0+cu132"
    assert (
        "pod-setup: PyTorch publishes no ROCm build of torch 2.15.0 that installs here (tried "
        "rocm7.2 rocm7.1 rocm7.0 rocm6.4): rent a host whose ROCm PyTorch builds for"
    ) in said


@pytest.mark.posix
def test_the_played_uv_installs_nothing_where_the_local_label_alone_differs(tmp_path):
    import os
    import subprocess

    torch = tmp_path / "torch"
    torch.write_text("2.15.0+cu132\n", encoding="utf-8")
    env = dict(os.environ, PLAYED_UV_TORCH=str(torch))
    uv = str(ROOT / "tests/fakes/uv/uv")
    args = ["pip", "install", "--torch-backend=auto", "torch==2.15.0"]
    done = subprocess.run([uv, *args], env=env, capture_output=True, text=True)
    assert done.stderr == "Checked 1 package in 3ms\n" and torch.read_text() == "2.15.0+cu132\n"


@pytest.mark.posix
def test_pod_setup_says_why_when_nvidia_smi_gives_no_driver(tmp_path):
    import os
    import subprocess

    (tmp_path / "nvidia-smi").write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the "
        "NVIDIA driver.'\nexit 9\n",
        encoding="utf-8",
    )
    (tmp_path / "nvidia-smi").chmod(0o755)
    (tmp_path / "torch").write_text("2.15.0+cu132\n", encoding="utf-8")
    path = os.pathsep.join([str(tmp_path), str(ROOT / "tests/fakes/uv"), os.environ["PATH"]])
    env = dict(os.environ, PATH=path, PLAYED_UV_TORCH=str(tmp_path / "torch"))
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/pod-setup")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "pod-setup: nvidia-smi gave no driver version (NVIDIA-SMI has failed" in done.stderr
