"""What a measurement depends on is declared once (roofline/core/depends.py): a kernel of
your own re-measured when it changes and alone, a setting added at its default staling no
params, the hardware decided afresh when a variable that changes it does."""

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from roofline.core.measurement import measurement_from_dict
from roofline.device import hardware
from roofline.machines.keys import own_changed
from roofline.measuring.measure import headline_point
from tests.machines import DEVICES, LAPTOP, ROOT, clone, dvc, make_project, ran, results, run

# A kernel of a learner's own: C one tile at a time, each tile through numpy's BLAS.
TILED = """import numpy as np

TILE = 16


def tiled(a, b):
    c = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    for i in range(0, a.shape[0], TILE):
        for j in range(0, b.shape[1], TILE):
            c[i : i + TILE, j : j + TILE] = a[i : i + TILE] @ b[:, j : j + TILE]
    return c
"""
OWN = "kernels.tiled:tiled"


def by_backend(record: dict, backend: str) -> list[dict]:
    return [row for row in record["rows"] if row["backend"] == backend]


@pytest.mark.slow
def test_editing_a_kernel_of_your_own_re_measures_its_rows_and_nothing_else(tmp_path):
    origin = make_project(tmp_path, gpus=(), podhost=False)
    lab = clone(origin, tmp_path / "lab", pull=False)
    kernel = lab / "kernels/tiled.py"
    kernel.parent.mkdir()
    kernel.write_text(TILED)
    run(lab, sys.executable, "-m", "roofline.compose", f"devices.cpu.backends=[torch,'{OWN}']")
    dvc(lab, "repro", hardware=LAPTOP)
    before = results(lab, "cpu")
    assert by_backend(before, OWN) and by_backend(before, "torch")

    kernel.write_text(TILED.replace("TILE = 16", "TILE = 8"))
    out = dvc(lab, "repro", hardware=LAPTOP)
    measuring = {s for s in ran(out) if s.split(":")[-1] in ("benchmark", "sweep", "knobs")}
    assert measuring == {"cpu:benchmark"}, out
    assert f"cpu: only {OWN} changed: measuring its rows again" in out
    after = results(lab, "cpu")
    assert by_backend(after, "torch") == by_backend(before, "torch")  # kept, sample for sample
    fresh, old = by_backend(after, OWN), by_backend(before, OWN)
    assert [r["status"] for r in fresh] == ["measured"] * len(old)
    assert [r["samples_s"] for r in fresh] != [r["samples_s"] for r in old]
    for part in ("clock", "fma", "fma_clock", "caches", "memory", "counters"):
        assert after[part] == before[part], part
    assert after["run"]["started_at"] == before["run"]["started_at"]
    assert [r["backends"] for r in after["run"]["remeasured"]] == [[OWN]]
    assert after["libraries"]["torch"] == before["libraries"]["torch"]
    # The breakdown goes through the headline's library: measured again only where the headline
    # is now the kernel of yours, or another library than before (which is faster at this tiny
    # shape is the machine's to say).
    rows = [measurement_from_dict(row, "cpu") for row in after["rows"]]
    headline = headline_point(rows, "float32").backend
    if headline == before["steps"]["backend"] != OWN:
        assert after["steps"] == before["steps"]
    else:
        assert after["steps"]["backend"] == headline and after["steps"] != before["steps"]
    # The record is the one dvc.lock now records: the next run measures nothing.
    lock = yaml.safe_load((lab / DEVICES / "cpu/dvc.lock").read_text())
    (out,) = lock["stages"]["benchmark"]["outs"]
    assert out["md5"] == hashlib.md5((lab / DEVICES / "cpu/results.json").read_bytes()).hexdigest()


def test_only_a_change_of_your_own_kernels_files_re_measures_them_alone():
    was = {"code": "c", "params": "p", "own": {"k:f": "1", "k:g": "2"}}
    assert own_changed(was, {**was, "own": {"k:f": "1", "k:g": "3"}}) == ["k:g"]
    assert own_changed(was, was) is None  # nothing changed: nothing to measure
    assert own_changed(was, {**was, "code": "d", "own": {"k:f": "9", "k:g": "2"}}) is None
    assert own_changed(was, {**was, "params": "q", "own": {"k:f": "9", "k:g": "2"}}) is None
    assert own_changed(was, {**was, "own": {"k:f": "9"}}) is None  # another list of backends
    assert own_changed("unrecorded", was) is None


def keys_of(root: Path) -> dict:
    """Every device's stage keys, as the probe computes them in `root`."""
    script = (
        "import json; from roofline.configuration.params import read_params; "
        "from roofline.machines.keys import measuring_keys; p = read_params(); "
        "print(json.dumps({n: measuring_keys(p, n) for n in p['devices']}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_bench_setting_added_at_its_default_changes_no_devices_params(tmp_path):
    for part in ("conf", "stages", "roofline", "hydra_plugins"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / ".dvc/tmp").mkdir(parents=True)
    before = keys_of(tmp_path)
    timing = tmp_path / "roofline/device/timing.py"
    text = timing.read_text()
    anchor = "    sustained_cpu: bool = False"
    assert anchor in text
    timing.write_text(text.replace(anchor, "    cold_l2: bool = False\n" + anchor))
    run(tmp_path, sys.executable, "-m", "roofline.compose")
    assert "cold_l2: false" in (tmp_path / "params.yaml").read_text()  # composed, at default
    after = keys_of(tmp_path)
    for name, stages in before.items():
        for stage, key in stages.items():
            # Measured under the same settings; the code that reads them is new code, as any
            # edit of the measuring code is (roofline/machines/keys.py).
            assert after[name][stage]["params"] == key["params"], (name, stage)
    turned = {(n, s) for n, stages in after.items() for s, k in stages.items() if k["params"]}
    assert turned  # every stage has a params key to compare
    # A setting away from its default does change what is measured.
    run(tmp_path, sys.executable, "-m", "roofline.compose", "bench.cold_l2=true")
    assert keys_of(tmp_path)["cpu"]["benchmark"]["params"] != before["cpu"]["benchmark"]["params"]


def test_a_probe_under_another_pythonpath_decides_the_hardware_afresh(tmp_path, monkeypatch):
    # The stand-ins and a user's own modules arrive through PYTHONPATH: a process under another
    # one may see other GPUs, so the boot cache answers only for the variables it was made under.
    monkeypatch.delenv(hardware.HARDWARE_ENV, raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(hardware, "gpu_info", lambda: [])
    cache = tmp_path / "hardware.json"
    first = hardware.live_hardware(cache)
    gpu = {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0",
        "sm_count": 132,
        "memory_bytes": 80 << 30,
        "l2_bytes": 50 << 20,
    }
    monkeypatch.setattr(hardware, "gpu_info", lambda: [gpu])
    assert hardware.live_hardware(cache) == first  # the same variables: the cache answers
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests/fakes/cuda"))
    assert hardware.live_hardware(cache)["gpus"] == [gpu]
    monkeypatch.delenv("PYTHONPATH")
    monkeypatch.setattr(hardware, "gpu_info", lambda: [])
    assert hardware.live_hardware(cache) == first  # probed again, under the first variables


def test_one_module_declares_what_a_measurement_depends_on_and_the_caches_import_it():
    declared = ROOT / "roofline/core/depends.py"
    for path in [*ROOT.glob("roofline/**/*.py"), *ROOT.glob("stages/*.py")]:
        if path == declared:
            continue
        text = path.read_text()
        for word in ('"PYTHONPATH"', "STAGE_SETTINGS = ", "MEASURING_KEYS = ", "rglob("):
            assert word not in text, f"{path.relative_to(ROOT)} lists {word} again"
    for cache in ("roofline/machines/keys.py", "stages/probe.py", "roofline/device/hardware.py"):
        assert "roofline.core.depends import" in (ROOT / cache).read_text(), cache


def test_a_variable_that_picks_a_cpu_librarys_kernel_keys_the_cpu_alone(monkeypatch):
    # A run under MKL_ENABLE_INSTRUCTIONS, then a plain one: the plain one measures again.
    from roofline.configuration.params import read_params
    from roofline.machines.keys import stage_key

    params = read_params(ROOT / "params.yaml")
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    plain = {name: stage_key(params, name, "benchmark", ROOT) for name in ("cpu", "h100")}
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "SSE4_2")
    capped = {name: stage_key(params, name, "benchmark", ROOT) for name in ("cpu", "h100")}
    assert capped["cpu"]["params"] != plain["cpu"]["params"]
    assert capped["h100"] == plain["h100"]  # cuBLAS reads no such variable
    assert capped["cpu"]["code"] == plain["cpu"]["code"]


def test_the_probes_cache_answers_only_under_the_same_library_variables(tmp_path, monkeypatch):
    from stages import probe

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dvc/tmp").mkdir(parents=True)
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    before = probe.inputs(["cpu"], [])
    probe.keep(["cpu"], [], before, ["cpu: here"])
    assert probe.answered_from_cache()
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "SSE4_2")
    assert not probe.answered_from_cache()


def test_a_kernel_of_yours_is_followed_wherever_python_finds_it(tmp_path, monkeypatch):
    from roofline.core.depends import installed_version, own_code, own_files

    monkeypatch.delenv("PYTHONPATH", raising=False)
    kern = tmp_path / "kern"
    kern.mkdir()
    (kern / "__init__.py").write_text("")
    (kern / "tiled.py").write_text("from .helper import tile\nimport numpy\n")
    (kern / "helper.py").write_text("def tile(a, b):\n    return a @ b\n")
    # A relative import is followed: editing helper.py re-measures the kernel.
    assert own_code("kern.tiled:tiled", tmp_path) == [
        "kern/__init__.py",
        "kern/helper.py",
        "kern/tiled.py",
    ]
    # A file that does not parse is still hashed, and stops nothing.
    (kern / "helper.py").write_bytes(b"def tile(a, b) \xff\n")
    assert "kern/helper.py" in own_code("kern.tiled:tiled", tmp_path)
    # Outside the repository, on PYTHONPATH: found there, by its full path.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "blocked.py").write_text("def mm(a, b):\n    return a @ b\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    assert own_code("blocked:mm", repo) == []
    monkeypatch.setenv("PYTHONPATH", str(elsewhere))
    assert own_code("blocked:mm", repo) == [str(elsewhere / "blocked.py")]
    # Installed as a package: known by its distribution's version.
    assert installed_version("numpy:matmul").startswith("numpy==")
    # Not there yet: the files it would be are watched, so creating it is seen.
    params = {"devices": {"cpu": {"backends": ["torch", "mine.kern:mm"]}}, "sweep": None}
    assert own_files(params, repo) == [Path("mine/kern/__init__.py"), Path("mine/kern.py")]


def test_backends_that_name_no_module_or_params_without_a_sweep_stop_nothing():
    from roofline.core.depends import own_backends

    odd = [":f", ".mod:f", 3, None, "torch", "numpy", "mod:f"]
    for sweep in (None, {}, {"name": "none"}):
        params = {"devices": {"cpu": {"backends": odd}}, "sweep": sweep}
        assert own_backends(params, "cpu", "benchmark") == ["mod:f"]
        assert own_backends(params, "cpu", "sweep") == []
    params = {"devices": {"cpu": {"backends": odd}}, "sweep": {"name": "full"}}
    assert own_backends(params, "cpu", "sweep") == ["mod:f"]
    assert own_backends(params, "cpu", "knobs") == []


def test_a_record_is_judged_older_under_its_own_variables_not_this_machines(monkeypatch):
    from roofline.configuration.params import read_params
    from roofline.machines.keys import outdated, stage_key

    params = read_params(ROOT / "params.yaml")
    from roofline.measuring.provenance import environment

    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the machine that measured it
    measures = {"benchmark": stage_key(params, "cpu", "benchmark", ROOT)}
    run = {"started_at": "T", "environment": environment()}  # as the record keeps it
    record = {"status": "measured", "run": run, "fingerprint": {"measures": measures}}
    monkeypatch.delenv("OMP_NUM_THREADS")  # the machine that renders it
    assert outdated({"benchmark": record}, params, "cpu") == {}
