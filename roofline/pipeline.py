"""The pipeline files, generated from conf/ by `roofline.compose` (its --check catches drift):

- `experiments/x4-roofline/devices/<name>/dvc.yaml` per device: probe -> benchmark and sweep,
  with the device's own dvc.lock, so two machines committing at once never conflict;
- `dvc.yaml`: aggregate -> plot -> report over every device;
- `cloud/<name>.yaml` per GPU device with SkyPilot accelerators: the pod that measures it.

Each stage depends on exactly the code it runs (the repository's modules it imports, read
from their import statements) and on exactly the params that change its output."""

import ast
import itertools
from pathlib import Path
from typing import Any

import yaml

from roofline.params import MEASURING_KEYS, PROBE_KEYS
from roofline.paths import (
    EXPERIMENT,
    device_dir,
    fingerprint_path,
    knobs_path,
    results_path,
    sweep_path,
)

GENERATED = (
    "# Generated from conf/ by `uv run python -m roofline.compose`: edit conf/, not this file.\n"
)
HEADER = GENERATED + (
    "# persist: true keeps a recorded output on disk while its stage runs, so a refused or\n"
    "# failed run leaves it whole (DVC otherwise deletes outputs first).\n"
)
# The pod's set-up and run: scripts/pod-setup installs uv (the standalone installer, which
# works where the image's Python refuses pip, PEP 668), the locked environment, and a torch for
# the host's driver where it is older than the lock's CUDA needs; UV_NO_SYNC keeps that torch.
POD_SETUP = """set -e
bash scripts/pod-setup
"""
POD_RUN = """set -e
export PATH="$HOME/.local/bin:$PATH"
uv run dvc pull --allow-missing
uv run dvc repro
uv run python -m roofline.sync push
"""
SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")  # the DVC remote's, from your shell
OUR_PACKAGES = ("roofline", "stages")
# Outputs of a device's stages, which git leaves to DVC.
DEVICE_OUTPUTS = ("fingerprint.json", "results.json", "sweep.json", "knobs.json")


def module_file(module: str, root: Path) -> Path | None:
    """The repository file of a dotted module name, or None when it is not one of ours."""
    base = Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if (root / candidate).is_file():
            return candidate
    return None


def imported_modules(path: Path) -> set[str]:
    """Dotted names of our modules that a file imports, anywhere in it, or starts as a process
    of its own (`[sys.executable, "-m", "roofline.capped", ...]`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.List | ast.Tuple):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            names |= {module for flag, module in itertools.pairwise(words) if flag == "-m"}
    return {name for name in names if isinstance(name, str) and name.split(".")[0] in OUR_PACKAGES}


def code_deps(module: str, root: Path) -> list[str]:
    """Every file of ours that `python -m module` runs: the module, what it imports, and so on,
    with the packages' __init__ files."""
    seen: set[Path] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        packages = [".".join(parts[:i]) for i in range(1, len(parts))]
        for dotted in [*packages, name]:
            path = module_file(dotted, root)
            if path is not None and path not in seen:
                seen.add(path)
                todo += sorted(imported_modules(root / path))
    return sorted(str(path) for path in seen)


def stage(
    module: str,
    root: Path,
    *args: str,
    wdir: str | None = None,
    deps: list[Path | str] = (),
    params: list[str] | None = None,
    **rest: Any,
) -> dict[str, Any]:
    """A stage running `python -m module args`, depending on `deps` and on its own code."""
    out: dict[str, Any] = {"cmd": " ".join(["python", "-m", module, *args])}
    if wdir:
        out["wdir"] = wdir
    out["deps"] = [*map(str, deps), *code_deps(module, root)]
    if params:
        out["params"] = params
    return out | rest


# A device's measuring stages after its probe: the output each writes, and the top-level params
# (besides the device's measuring keys) that change it.
MEASURING_STAGES = {
    "benchmark": (results_path, ["bench"]),
    "sweep": (sweep_path, ["bench", "sweep"]),
    "knobs": (knobs_path, ["bench", "knobs"]),
}


def device_pipeline(name: str, root: Path) -> dict[str, Any]:
    """One device's measuring stages, run from the repository root."""
    top = "/".join([".."] * len(device_dir(name).parts))
    device_keys = [f"devices.{name}.{key}" for key in MEASURING_KEYS]

    def kept(path: Path) -> list[dict[str, Any]]:
        return [{str(path): {"persist": True}}]

    stages = {
        "probe": stage(
            "stages.probe",
            root,
            name,
            wdir=top,
            always_changed=True,  # cheap; its output changes only with the hardware or torch
            params=[f"devices.{name}.{key}" for key in PROBE_KEYS],
            outs=kept(fingerprint_path(name)),
        )
    }
    for stage_name, (output, params) in MEASURING_STAGES.items():
        stages[stage_name] = stage(
            f"stages.{stage_name}",
            root,
            name,
            wdir=top,
            deps=[fingerprint_path(name)],
            params=[*params, *device_keys],
            outs=kept(output(name)),
        )
    return {"stages": stages}


def task_file(name: str, dev: dict[str, Any]) -> dict[str, Any]:
    """The SkyPilot task that measures a GPU device on a rented pod: the accelerators in the
    device's order of preference, taken down when idle so a lost laptop leaves nothing billing."""
    return {
        "name": f"roofline-{name}",
        "resources": {
            "accelerators": [f"{accelerator}:1" for accelerator in dev["sky_accelerators"]],
            "disk_size": 100,
            "autostop": {"idle_minutes": 10, "down": True},
        },
        "workdir": ".",  # this repository, .git included, as ~/sky_workdir on the pod
        "envs": {"DEVICE": name, "UV_NO_SYNC": "1"},
        "secrets": dict.fromkeys(SECRETS, ""),  # values from `--secret NAME`, never on disk
        "setup": POD_SETUP,
        "run": POD_RUN,
    }


def lab_pipeline(names: list[str], root: Path) -> dict[str, Any]:
    """aggregate -> plot -> report over every device's recorded results."""
    recorded = [output(name) for name in names for output, _ in MEASURING_STAGES.values()]
    table, manifest = EXPERIMENT / "results.csv", EXPERIMENT / "manifest.json"

    def untracked(*paths: Path) -> list[dict[str, Any]]:
        # In git, not DVC's cache; kept on disk while the stage runs, so a failed render
        # leaves the previous deliverables whole.
        return [{str(path): {"cache": False, "persist": True}} for path in paths]

    return {
        "stages": {
            "aggregate": stage(
                "stages.aggregate",
                root,
                deps=recorded,
                params=[
                    "bench",
                    "sweep",
                    "knobs",
                    "devices",
                    "lab_devices",
                ],  # peaks, prices, the DoD
                outs=untracked(table, manifest, EXPERIMENT / "knobs.csv"),
                metrics=untracked(EXPERIMENT / "metrics.json"),
            ),
            "plot": stage(
                "stages.plot",
                root,
                deps=[table, manifest, EXPERIMENT / "knobs.csv"],
                outs=untracked(
                    EXPERIMENT / "roofline.png",
                    EXPERIMENT / "roofline-sweeps.png",
                    EXPERIMENT / "roofline.json",
                    EXPERIMENT / "knobs.png",
                ),
            ),
            "report": stage(
                "stages.report",
                root,
                # The plot too: the page shows it, and its Definition of Done says it is drawn.
                deps=[table, manifest, EXPERIMENT / "knobs.csv", EXPERIMENT / "roofline.png"],
                outs=untracked(EXPERIMENT / "REPORT.md", EXPERIMENT / "REPORT-appendix.md"),
            ),
        },
        # `dvc plots show` / `dvc plots diff`: the roofline, interactive (template in
        # .dvc/plots/roofline.json: roofs, and every point with its shape, TFLOP/s and MFU).
        "plots": [
            {
                str(EXPERIMENT / "roofline.json"): {
                    "template": "roofline",
                    "x": "arithmetic_intensity",
                    "y": "tflops",
                    "title": "Dense matmul roofline",
                }
            },
            str(EXPERIMENT / "roofline.png"),
            str(EXPERIMENT / "roofline-sweeps.png"),
            str(EXPERIMENT / "knobs.png"),
        ],
    }


class Dumper(yaml.SafeDumper):
    """Multi-line strings (a task's shell script) as YAML literal blocks, readable as written."""


Dumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def dump(pipeline: dict[str, Any], header: str = HEADER) -> str:
    return header + yaml.dump(pipeline, Dumper=Dumper, sort_keys=False, width=100)


def task_path(name: str) -> Path:
    return Path("cloud") / f"{name}.yaml"


def pipeline_files(devices: dict[str, dict[str, Any]], root: Path) -> dict[Path, str]:
    """Every generated file (relative to the root) and its text, for these devices (plain
    dicts, as composed into params.yaml)."""
    names = list(devices)
    files = {Path("dvc.yaml"): dump(lab_pipeline(names, root))}
    for name, dev in devices.items():
        files[device_dir(name) / "dvc.yaml"] = dump(device_pipeline(name, root))
        files[device_dir(name) / ".gitignore"] = "".join(f"/{out}\n" for out in DEVICE_OUTPUTS)
        if dev["kind"] == "cuda" and dev["sky_accelerators"]:
            launch = f"# Launch: uv run --group cloud python -m roofline.cloud {name}\n"
            files[task_path(name)] = dump(task_file(name, dev), GENERATED + launch)
    return files


def orphans(files: dict[Path, str], root: Path) -> list[Path]:
    """Generated files (device pipelines, task files) that these devices no longer make."""
    found = [*(root / EXPERIMENT / "devices").glob("*/dvc.yaml"), *(root / "cloud").glob("*.yaml")]
    return sorted(path.relative_to(root) for path in found if path.relative_to(root) not in files)
