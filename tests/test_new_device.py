"""Ordinary changes need no test edit. In a copy of the lab: a device added (one conf file, one
defaults line), a price changed and a SKU line added; `python -m roofline.compose` writes the
pipeline files, and the tests that ask for every device, and the golden pages, pass with
nothing else edited by hand."""

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.machines import DEVICES, ROOT, add_device, changed_files, compose, copy_lab, run

pytestmark = pytest.mark.slow  # a copy of the lab, composed, and its own pytest (~20 s)

# The tests that read the lab's device list or conf, or render its pages.
FOCUSED = (
    "tests/test_config.py",
    "tests/test_golden.py",
    "tests/test_cloud.py",
    "tests/test_failures.py",
    "tests/test_dvc_yaml.py",
)


def b200(h100: dict) -> dict:
    """A new CUDA role modelled on the h100's conf: its own name pattern, SKU line, price and
    SkyPilot name; no band or published figures (those are the lab's, for the h100)."""
    line = h100["skus"]["sxm5"] | {
        "name": "NVIDIA B200",
        "sku": "B200 HGX 180GB",
        "source": "played by tests/test_new_device.py",
        "memory_gb": 180,
        "cost_per_hour": 6.25,
        "lab_band_tflops": {},
        "lab_done_tflops": {},
        "published": [],
    }
    return h100 | {
        "recognise": {"gpu_name": "^NVIDIA B200( |$)"},
        "skus": {"hgx": line},
        "sky_accelerators": ["B200"],
    }


def test_a_new_device_a_price_and_a_sku_line_need_no_test_or_golden_edit(tmp_path):
    lab = copy_lab(tmp_path)
    h100_path, h200_path = lab / "conf/device/h100.yaml", lab / "conf/device/h200.yaml"
    add_device(lab, "b200", b200(yaml.safe_load(h100_path.read_text(encoding="utf-8"))))
    # A price, edited in place as a person would (the line keeps its comment).
    text = h100_path.read_text(encoding="utf-8")
    assert "cost_per_hour: 3.00" in text
    h100_path.write_text(
        text.replace("cost_per_hour: 3.00", "cost_per_hour: 3.50"), encoding="utf-8"
    )
    # A SKU line: another datasheet the h200 role is judged against when torch names it.
    h200 = yaml.safe_load(h200_path.read_text(encoding="utf-8"))
    h200["skus"]["played"] = h200["skus"]["nvl"] | {"name": "NVIDIA H200 played", "sku": "played"}
    h200_path.write_text(yaml.safe_dump(h200, sort_keys=False), encoding="utf-8")
    by_hand = {"conf/config.yaml", "conf/device/b200.yaml", "conf/device/h100.yaml"}
    assert changed_files(lab) == by_hand | {"conf/device/h200.yaml"}

    compose(lab)  # `uv run python -m roofline.compose`, in this process (tests/machines.py)
    generated = changed_files(lab) - by_hand - {"conf/device/h200.yaml"}
    assert generated == {
        "params.yaml",
        "dvc.yaml",
        "cloud/b200.yaml",
        f"{DEVICES}/b200/dvc.yaml",
        f"{DEVICES}/b200/.gitignore",
    }
    assert "b200" in yaml.safe_load((lab / "params.yaml").read_text(encoding="utf-8"))["devices"]

    # The copy's own tests, run as this one is, less this run's pytest and coverage settings.
    inherited = [k for k in os.environ if k.startswith(("PYTEST_", "COV_CORE_"))]
    code, out = run(
        lab,
        sys.executable,
        "-m",
        "pytest",
        "-n",
        "0",
        "-v",
        "-p",
        "no:cacheprovider",
        *FOCUSED,
        check=False,
        env=dict.fromkeys(inherited),
    )
    assert code == 0, out
    # The tests that ask for every device asked the conf, and found the new one.
    assert "test_task_file_validates_with_skypilots_loader[b200]" in out, out
    # Nothing rewritten by the tests: the golden pages stay as they were.
    assert changed_files(lab) == by_hand | {"conf/device/h200.yaml"} | generated


def test_a_device_file_without_a_kind_is_named_with_what_is_allowed(tmp_path):
    # OmegaConf's MissingMandatoryValue, as it was, named neither the file nor the kinds.
    for part in ("conf", "roofline", "stages", "hydra_plugins"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    add_device(
        tmp_path, "gh200", {"recognise": {"gpu_name": "^NVIDIA GH200"}, "dtypes": ["float16"]}
    )
    done = subprocess.run(
        [sys.executable, "-m", "roofline.compose", "--check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout + done.stderr) == (
        1,
        "error: invalid config:\n  devices.gh200.kind is not set (conf/device/gh200.yaml has no "
        "`kind:`); allowed: cpu, cuda, rocm, mps\n",
    )
