"""End to end: a laptop and pods share one pipeline through git and a DVC remote.

Each machine is a clone of a temporary project; what hardware it has comes from a description
in $ROOFLINE_HARDWARE (the probe's documented override). Measurements are real, on this CPU, at
tiny sizes. The project has the real cpu and h100 devices plus `podhost`, a CPU device that only
a pod has, so that a pod measures something the laptop must then keep."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from roofline.compose import compose

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
DEVICES = "experiments/x4-roofline/devices"
CPU = {"logical_cores": 2, "isa": ["avx2", "fma"], "cache_bytes": 1 << 20, "memory_bytes": 16 << 30}
LAPTOP = {"cpu": {"model": "Laptop CPU", **CPU}, "gpus": []}
OTHER_LAPTOP = {"cpu": {"model": "Other Laptop CPU", **CPU}, "gpus": []}
POD = {
    "cpu": {"model": "Pod CPU", **CPU},
    "gpus": [
        {
            "index": 0,
            "name": "NVIDIA A10G",
            "compute_capability": "8.6",
            "sm_count": 80,
            "memory_bytes": 24 << 30,
            "l2_bytes": 6 << 20,
        }
    ],
}
PODHOST = {
    "kind": "cpu",
    "sku": "the pod's host CPU",
    "cost_per_hour": 2.0,
    "clock_ghz": 3.0,
    "recognise": {"cpu_model": "^Pod CPU$", "with_gpu_present": True},
    "dtypes": ["float32"],
    "shapes": [[40, 40, 40]],
}


def run(cwd: Path, *cmd: str, hardware: dict | None = None, check: bool = True) -> str:
    env = dict(
        os.environ, DVC_NO_ANALYTICS="1", PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    )
    if hardware is not None:
        described = cwd.parent / f"{cwd.name}-hardware.json"
        described.write_text(json.dumps(hardware))
        env["ROOFLINE_HARDWARE"] = str(described)
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    out = done.stdout + done.stderr
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({done.returncode}):\n{out}")
    return out if check else (done.returncode, out)


def dvc(cwd: Path, *args: str, **kw):
    return run(cwd, sys.executable, "-m", "dvc", *args, **kw)


def git(cwd: Path, *args: str) -> str:
    return run(cwd, "git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args)


def ran(out: str) -> set[str]:
    """Stages DVC ran, as 'device:stage' or top-level names."""
    stages = set()
    for line in out.splitlines():
        if line.startswith("Running stage '"):
            name = line.split("'")[1]
            stages.add(name.replace(f"{DEVICES}/", "").replace("/dvc.yaml", ""))
    return stages


def measured_benchmarks(out: str) -> set[str]:
    return {s.split(":")[0] for s in ran(out) if s.endswith(":benchmark")}


def results(clone: Path, device: str) -> dict:
    return json.loads((clone / DEVICES / device / "results.json").read_text())


def raw(clone: Path, device: str) -> bytes:
    return (clone / DEVICES / device / "results.json").read_bytes()


def make_project(where: Path) -> Path:
    """The repository's pipeline, trimmed to cpu, h100 and podhost at tiny sizes."""
    project = where / "project"
    project.mkdir()
    for part in ("dvc.yaml", "conf", "stages", "roofline", "hydra_plugins"):
        if (ROOT / part).is_dir():
            shutil.copytree(
                ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(ROOT / part, project / part)
    for name in ("cpu", "h100"):
        (project / DEVICES / name).mkdir(parents=True)
        shutil.copy(ROOT / DEVICES / name / "dvc.yaml", project / DEVICES / name)
    # Adding a device, as the README says: its conf file, its defaults line, its stage file,
    # and its results in aggregate's dependencies.
    (project / "conf/device/podhost.yaml").write_text(yaml.safe_dump(PODHOST))
    cfg = yaml.safe_load((project / "conf/config.yaml").read_text())
    cfg["defaults"] = [
        d
        for d in cfg["defaults"]
        if not (isinstance(d, dict) and ("device@devices.a100" in d or "device@devices.h200" in d))
    ]
    cfg["defaults"].insert(-1, {"device@devices.podhost": "podhost"})
    cfg["bench"] |= {"warmup": 1, "repeats": 2, "copy_mib": 4, "min_seconds": 0.0}
    (project / "conf/config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    cpu_conf = yaml.safe_load((project / "conf/device/cpu.yaml").read_text())
    cpu_conf |= {"dtypes": ["float32"], "shapes": [[48, 48, 48]], "clock_ghz": 3.0}
    (project / "conf/device/cpu.yaml").write_text(yaml.safe_dump(cpu_conf))
    (project / DEVICES / "podhost").mkdir()
    (project / DEVICES / "podhost/dvc.yaml").write_text(
        (ROOT / DEVICES / "cpu/dvc.yaml").read_text().replace("device: cpu", "device: podhost")
    )
    pipeline = yaml.safe_load((project / "dvc.yaml").read_text())
    deps = pipeline["stages"]["aggregate"]["deps"]
    pipeline["stages"]["aggregate"]["deps"] = [
        d for d in deps if "/a100/" not in d and "/h200/" not in d
    ] + [f"{DEVICES}/podhost/results.json", f"{DEVICES}/podhost/sweep.json"]
    (project / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    (project / "params.yaml").write_text(compose(project, []))

    git(project, "init", "-q", "-b", "main")
    dvc(project, "init", "-q")
    dvc(project, "config", "hydra.enabled", "true")
    dvc(project, "remote", "add", "-d", "store", str(where / "remote"))
    git(project, "add", "-A")
    git(project, "commit", "-qm", "pipeline")
    git(where, "clone", "-q", "--bare", str(project), str(where / "origin.git"))
    return where / "origin.git"


def clone(origin: Path, path: Path, pull: bool = True) -> Path:
    git(origin.parent, "clone", "-q", str(origin), str(path))
    if pull:
        dvc(path, "pull", "--allow-missing")
    return path


def publish(clone_path: Path, message: str) -> None:
    dvc(clone_path, "push")
    git(clone_path, "add", "-A")
    git(clone_path, "commit", "-qm", message)
    git(clone_path, "push", "-q", "origin", "main")


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """The pod runs first and publishes; then the laptop pulls, runs and publishes."""
    where = tmp_path_factory.mktemp("machines")
    origin = make_project(where)
    pod = clone(origin, where / "pod", pull=False)
    pod_out = dvc(pod, "repro", hardware=POD)
    publish(pod, "pod: measure podhost")
    laptop = clone(origin, where / "laptop")
    pulled_podhost = raw(laptop, "podhost")
    laptop_out = dvc(laptop, "repro", hardware=LAPTOP)
    publish(laptop, "laptop: measure cpu")
    return {
        "origin": origin,
        "where": where,
        "pod": pod,
        "laptop": laptop,
        "pod_out": pod_out,
        "laptop_out": laptop_out,
        "pulled_podhost": pulled_podhost,
    }


def test_pod_running_first_measures_its_device_and_pends_the_rest(story):
    pod = story["pod"]
    assert measured_benchmarks(story["pod_out"]) == {"cpu", "h100", "podhost"}
    assert results(pod, "podhost")["status"] == "measured"
    assert results(pod, "podhost")["hardware"]["model"] == "Pod CPU"
    # The pod has a GPU, so its host CPU is not "the cpu": pending, never a number.
    assert results(pod, "cpu")["status"] == "pending"
    assert results(pod, "h100")["status"] == "pending"
    assert all(row["median_s"] is None for row in results(pod, "cpu")["rows"])


def test_laptop_measures_its_cpu_and_keeps_the_pulled_pod_results(story):
    laptop = story["laptop"]
    assert measured_benchmarks(story["laptop_out"]) == {"cpu"}  # the pending record did not stop it
    assert results(laptop, "cpu")["hardware"]["model"] == "Laptop CPU"
    assert raw(laptop, "podhost") == story["pulled_podhost"] == raw(story["pod"], "podhost")
    table = (laptop / "experiments/x4-roofline/results.csv").read_text().splitlines()
    statuses = {line.split(",")[0]: line.split(",")[5] for line in table[1:]}
    assert statuses == {"cpu": "measured", "h100": "pending", "podhost": "measured"}
    report = (laptop / "experiments/x4-roofline/REPORT.md").read_text()
    assert (
        "### h100: NVIDIA H100 80GB SXM5 (pending)" in report and "### podhost: Pod CPU" in report
    )
    assert (laptop / "experiments/x4-roofline/roofline.png").stat().st_size > 10_000


def test_a_second_repro_measures_nothing(story):
    out = dvc(story["laptop"], "repro", hardware=LAPTOP)
    assert measured_benchmarks(out) == set()
    assert not ran(out) & {"aggregate", "plot", "report"}


def test_a_pods_host_cpu_never_takes_over_the_laptops_cpu(story):
    pod = clone(story["origin"], story["where"] / "pod-again")
    laptop_cpu = raw(pod, "cpu")
    out = dvc(pod, "repro", hardware=POD)
    assert measured_benchmarks(out) == set()
    assert "cpu: not on this machine; keeping results from Laptop CPU" in out
    assert raw(pod, "cpu") == laptop_cpu


def test_another_laptop_keeps_the_recorded_cpu_until_told_to_replace_it(story):
    other = clone(story["origin"], story["where"] / "other-laptop")
    recorded = raw(other, "cpu")
    out = dvc(other, "repro", hardware=OTHER_LAPTOP)
    assert measured_benchmarks(out) == set()
    assert (
        "this machine has Other Laptop CPU (2 cores) but the results on record were measured on Laptop CPU"
        in out
    )
    assert raw(other, "cpu") == recorded
    # The one explicit step: take the device over, then repro measures it.
    out = run(
        other, sys.executable, "-m", "stages.probe", "cpu", "--replace", hardware=OTHER_LAPTOP
    )
    assert (
        "replaced recorded hardware (Laptop CPU (2 cores)) with Other Laptop CPU (2 cores)" in out
    )
    out = dvc(other, "repro", hardware=OTHER_LAPTOP)
    assert measured_benchmarks(out) == {"cpu"}
    assert results(other, "cpu")["hardware"]["model"] == "Other Laptop CPU"


def test_a_stale_device_measured_elsewhere_is_refused_and_kept(story):
    laptop = clone(story["origin"], story["where"] / "laptop-stale")
    before = {d: raw(laptop, d) for d in ("cpu", "podhost")}
    lock = (laptop / DEVICES / "podhost/dvc.lock").read_text()
    params = laptop / "params.yaml"
    params.write_text(params.read_text().replace("repeats: 2", "repeats: 3"))
    code, out = dvc(laptop, "repro", hardware=LAPTOP, check=False)
    assert code != 0
    assert (
        "podhost: its benchmark stage is stale" in out
        and "measured on Pod CPU (2 cores)" in out
        and "this machine has no podhost" in out
    ), out
    assert "dvc repro -s aggregate plot report" in out
    assert raw(laptop, "podhost") == before["podhost"]
    assert (laptop / DEVICES / "podhost/dvc.lock").read_text() == lock
    # The way out that keeps the recorded results: re-render only.
    dvc(laptop, "repro", "-s", "aggregate", "plot", "report", hardware=LAPTOP)
    assert "podhost" in (laptop / "experiments/x4-roofline/REPORT.md").read_text()
    assert raw(laptop, "podhost") == before["podhost"]


def test_a_clone_that_forgot_to_pull_is_told_to(story):
    bare = clone(story["origin"], story["where"] / "no-pull", pull=False)
    code, out = dvc(bare, "repro", hardware=LAPTOP, check=False)
    assert code != 0 and "run `uv run dvc pull` first" in out
    assert not (bare / DEVICES / "cpu/results.json").exists()


def test_overrides_through_dvc_exp_run(story):
    laptop = clone(story["origin"], story["where"] / "laptop-exp")
    recorded = raw(laptop, "cpu")
    code, out = dvc(
        laptop, "exp", "run", "-S", "devices.cpu.dtypes=[float99]", hardware=LAPTOP, check=False
    )
    assert code != 0 and "float99" in out
    assert raw(laptop, "cpu") == recorded
    code, out = dvc(
        laptop, "exp", "run", "-S", "devices.cpu.shapes=[[0,8,8]]", hardware=LAPTOP, check=False
    )
    assert (
        code != 0
        and "devices.cpu.shapes has [0, 8, 8]; allowed: [M, N, K] of positive integers" in out
    )
    assert raw(laptop, "cpu") == recorded
    git(laptop, "checkout", "params.yaml")
    dvc(laptop, "exp", "run", "-S", "devices.cpu.shapes=[[32,32,32]]", hardware=LAPTOP)
    rows = results(laptop, "cpu")["rows"]
    assert [(r["m"], r["n"], r["k"], r["status"]) for r in rows] == [(32, 32, 32, "measured")]
