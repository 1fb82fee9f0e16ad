"""The pipeline files, generated from conf/ by `roofline.compose` (--check catches drift).

- `experiments/x4-roofline/devices/dvc.yaml`: the probe of every device. It is the one stage
  that runs on every `dvc repro`.
- `experiments/x4-roofline/devices/<name>/dvc.yaml`, one per device: probe, then benchmark,
  sweep and knobs. Each device has its own dvc.lock, so two machines never conflict.
- `dvc.yaml`: aggregate, plot and report, over every device.
- `cloud/<name>.yaml`, one per GPU device with SkyPilot accelerators: the pod that measures it.

Each stage depends on exactly the code it runs (read from import statements) and on exactly
the params that change its output."""

from collections.abc import Sequence
from pathlib import Path
from typing import Required, TypedDict, Unpack

import yaml

from roofline.configuration.params import RENTED_KINDS, DeviceParams
from roofline.core.code import code_deps
from roofline.core.deliverables import written_by
from roofline.core.depends import PROBE_KEYS
from roofline.core.paths import EXPERIMENT, RECORDS, device_dir, fingerprint_path, posix
from roofline.machines.keys import fingerprint_params
from stages.probe import KEYS_FILE

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
# The last step leaves the device's dvc.lock and results.json on the DVC remote for the
# launcher (roofline.cloud): a managed job's pod leaves no cluster to fetch them from.
# The set-up (downloads: uv, the locked environment, a torch) has a deadline of its own, so a
# hung download cannot bill for ever either.
SETUP_MINUTES = 30
# A pod's run is stopped at this many times its planned minutes ($ROOFLINE_DEADLINE_S), then
# the pod goes down after its idle minutes: a hung run bills for that at most, never for ever.
DEADLINE_FACTOR = 2
DEADLINE_ENV = "ROOFLINE_DEADLINE_S"
IDLE_MINUTES = 10
PLANNED_MINUTES = 30  # the lab's table: about 30 minutes of pod time per GPU (roofline.cloud)
POD_SETUP = f"""set -e
timeout --kill-after=60 {SETUP_MINUTES * 60} bash scripts/pod-setup
"""
# The measuring steps run under the launcher's deadline ($ROOFLINE_DEADLINE_S: twice its
# --minutes, roofline.cloud_plan.deadline_minutes): a hung step ends the job, the pod then goes
# down when idle, so no pod bills for ever. What it left is handed back either way.
POD_RUN = """set -e
export PATH="$HOME/.local/bin:$PATH"
status=0
timeout --kill-after=60 "$ROOFLINE_DEADLINE_S" bash -ec '
uv run dvc pull --allow-missing
uv run dvc repro
uv run python -m roofline.sync push
' || status=$?
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "roofline: stopped at the launcher's deadline of $ROOFLINE_DEADLINE_S s (twice --minutes)"
fi
uv run python -m roofline.cloud --hand-back "$DEVICE"
exit "$status"
"""
SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")  # the DVC remote's, from your shell
# Outputs of a device's stages, which git leaves to DVC.
DEVICE_OUTPUTS = ("fingerprint.json", "results.json", "sweep.json", "knobs.json")


class OutFlags(TypedDict, total=False):
    """An output's or a metric's flags in dvc.yaml (DVC's OUT_PSTAGE_DETAILED_SCHEMA): those
    used here."""

    cache: bool
    persist: bool


class PlotProps(TypedDict, total=False):
    """A plot's properties in dvc.yaml's top-level `plots` (DVC's PLOT_DEFINITION): those used
    here."""

    template: str
    x: str
    y: str
    title: str


# An output or a metric in dvc.yaml: {path: its flags}.
Outs = list[dict[str, OutFlags]]
# A stage's params in dvc.yaml: a key of params.yaml, or {params file: [its keys]}.
ParamsList = list[str | dict[str, list[str]]]


class StageOptions(TypedDict, total=False):
    """The fields of a dvc.yaml stage that `stage` passes through as given."""

    outs: Outs
    metrics: Outs
    always_changed: bool


class DvcStage(StageOptions, total=False):
    """A stage in dvc.yaml (DVC's STAGE_DEFINITION): the fields used here."""

    cmd: Required[str]
    wdir: str
    deps: list[str]
    params: ParamsList


class DvcPipeline(TypedDict, total=False):
    """A dvc.yaml file (DVC's MULTI_STAGE_SCHEMA): the fields used here."""

    stages: Required[dict[str, DvcStage]]
    plots: list[str | dict[str, PlotProps]]


class Autostop(TypedDict):
    idle_minutes: int
    down: bool


class SkyResources(TypedDict):
    accelerators: list[str]  # "NAME:COUNT", in order of preference
    disk_size: int  # GB
    autostop: Autostop


class SkyTask(TypedDict):
    """A SkyPilot task file (cloud/<name>.yaml): the fields used here."""

    name: str
    resources: SkyResources
    workdir: str
    envs: dict[str, str]
    secrets: dict[str, str]
    setup: str
    run: str


def stage(
    module: str,
    root: Path,
    *args: str,
    wdir: str | None = None,
    deps: Sequence[Path | str] = (),
    params: ParamsList | None = None,
    code: bool = True,
    **rest: Unpack[StageOptions],
) -> DvcStage:
    """A stage running `python -m module args`, depending on `deps` and (`code`) on its own code."""
    out: DvcStage = {"cmd": " ".join(["python", "-m", module, *args])}
    if wdir:
        out["wdir"] = wdir
    paths = list(dict.fromkeys([*map(posix, deps), *(code_deps(module, root) if code else [])]))
    if paths:
        out["deps"] = paths
    if params:
        out["params"] = params
    return out | rest


def measuring_code(root: Path) -> list[str]:
    """Every file the measuring stages run: what their keys hash (roofline/machines/keys.py)."""
    return sorted({f for stage in RECORDS for f in code_deps(f"stages.{stage}", root)})


def up_to_root(folder: Path) -> str:
    """A stage's wdir in a dvc.yaml in `folder`: its stages run from the repository root."""
    return "/".join([".."] * len(folder.parts))


def kept(path: Path) -> Outs:
    return [{posix(path): {"persist": True}}]


def probes_pipeline(root: Path) -> DvcPipeline:
    """The probe of every device, in one process: the one stage DVC runs on every `dvc repro`
    (five always-changed probe stages, one per device, made a no-op repro cost about twice
    `dvc status`: docs/development.md). Its lock records only the keys file, the same on every
    machine. DVC runs it before any device's stage because the keys file is aggregate's first
    dependency (tests/test_dvc_yaml.py asks DVC for its plan)."""
    return {
        "stages": {
            "probe": stage(
                "stages.probe",
                root,
                wdir=up_to_root(KEYS_FILE.parent),
                code=False,
                always_changed=True,
                outs=[{posix(KEYS_FILE): {"cache": False, "persist": True}}],
            )
        }
    }


def device_pipeline(name: str, root: Path) -> DvcPipeline:
    """One device's stages, run from the repository root. None depends on code or params.yaml
    directly: the probe of every device (probes_pipeline) runs every time and rewrites this
    device's fingerprint when it changes, which runs this probe stage, so that the device's own
    dvc.lock records it; each measuring stage depends on its part of the fingerprint (its key:
    the code and params that measure it), which the probe rewrites only where the device is,
    so no other machine's change stales them."""
    top = up_to_root(device_dir(name))
    stages = {
        "probe": stage(
            "stages.probe",
            root,
            name,
            wdir=top,
            code=False,
            params=[f"devices.{name}.{key}" for key in PROBE_KEYS],
            outs=kept(fingerprint_path(name)),
        )
    }
    for stage_name, output in RECORDS.items():
        stages[stage_name] = stage(
            f"stages.{stage_name}",
            root,
            name,
            wdir=top,
            code=False,
            params=[{posix(fingerprint_path(name)): fingerprint_params(stage_name)}],
            outs=kept(output(name)),
        )
    return {"stages": stages}


def task_file(name: str, dev: DeviceParams) -> SkyTask:
    """The SkyPilot task that measures a GPU device on a rented pod: the accelerators in the
    device's order of preference, taken down when idle so a lost laptop leaves nothing billing."""
    return {
        "name": f"roofline-{name}",
        "resources": {
            "accelerators": [f"{accelerator}:1" for accelerator in dev["sky_accelerators"]],
            "disk_size": 100,
            "autostop": {"idle_minutes": IDLE_MINUTES, "down": True},
        },
        "workdir": ".",  # this repository, .git included, as ~/sky_workdir on the pod
        # The deadline for a launch by hand (`sky launch`): twice the lab's 30 minutes.
        # A launch by hand's deadline; the launcher sets its own from --minutes.
        "envs": {
            "DEVICE": name,
            "UV_NO_SYNC": "1",
            DEADLINE_ENV: str(DEADLINE_FACTOR * PLANNED_MINUTES * 60),
        },
        "secrets": dict.fromkeys(SECRETS, ""),  # values from `--secret NAME`, never on disk
        "setup": POD_SETUP,
        "run": POD_RUN,
    }


def lab_pipeline(names: list[str], root: Path) -> DvcPipeline:
    """aggregate -> plot -> report over every device's recorded results."""
    recorded = [output(name) for name in names for output in RECORDS.values()]
    tables = written_by("aggregate", "out")  # what the plot and the report read

    def untracked(*paths: Path) -> Outs:
        # In git, not DVC's cache; kept on disk while the stage runs, so a failed render
        # leaves the previous deliverables whole.
        return [{posix(path): {"cache": False, "persist": True}} for path in paths]

    plots = written_by("plot", "plot")
    return {
        "stages": {
            "aggregate": stage(
                "stages.aggregate",
                root,
                # The keys first (see probes_pipeline), and the measuring code: a record
                # measured by older code is shown as such.
                deps=[KEYS_FILE, *recorded, *measuring_code(root)],
                params=[
                    "bench",
                    "sweep",
                    "knobs",
                    "devices",
                    "lab_devices",
                ],  # peaks, prices, the DoD
                outs=untracked(*tables),
                metrics=untracked(*written_by("aggregate", "metrics")),
            ),
            "plot": stage("stages.plot", root, deps=tables, outs=untracked(*written_by("plot"))),
            "report": stage(
                "stages.report",
                root,
                # The plot too: the page shows it, and its Definition of Done says it is drawn.
                deps=[*tables, EXPERIMENT / "roofline.png"],
                outs=untracked(*written_by("report")),
            ),
        },
        # `dvc plots show` / `dvc plots diff`: the roofline interactive (template in
        # .dvc/plots/roofline.json: roofs, and every point with its shape, TFLOP/s and MFU), the
        # figures as they are.
        "plots": [
            {posix(path): PLOT_TEMPLATES[path.name]} if path.name in PLOT_TEMPLATES else posix(path)
            for path in plots
        ],
    }


PLOT_TEMPLATES = {
    "roofline.json": {
        "template": "roofline",
        "x": "arithmetic_intensity",
        "y": "tflops",
        "title": "Dense matmul roofline",
    }
}


class Dumper(yaml.SafeDumper):
    """Multi-line strings (a task's shell script) as YAML literal blocks, readable as written."""


Dumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def dump(pipeline: DvcPipeline | SkyTask, header: str = HEADER) -> str:
    return header + yaml.dump(pipeline, Dumper=Dumper, sort_keys=False, width=100)


def task_path(name: str) -> Path:
    return Path("cloud") / f"{name}.yaml"


def pipeline_files(devices: dict[str, DeviceParams], root: Path) -> dict[Path, str]:
    """Every generated file (relative to the root) and its text, for these devices (plain
    dicts, as composed into params.yaml)."""
    names = list(devices)
    files = {
        Path("dvc.yaml"): dump(lab_pipeline(names, root)),
        KEYS_FILE.parent / "dvc.yaml": dump(probes_pipeline(root)),
    }
    for name, dev in devices.items():
        files[device_dir(name) / "dvc.yaml"] = dump(device_pipeline(name, root))
        files[device_dir(name) / ".gitignore"] = "".join(f"/{out}\n" for out in DEVICE_OUTPUTS)
        if dev["kind"] in RENTED_KINDS and dev["sky_accelerators"]:
            launch = f"# Launch: uv run --group cloud python -m roofline.cloud {name}\n"
            files[task_path(name)] = dump(task_file(name, dev), GENERATED + launch)
    return files


def orphans(files: dict[Path, str], root: Path) -> list[Path]:
    """Generated files (device pipelines, task files) that these devices no longer make."""
    found = [*(root / EXPERIMENT / "devices").glob("*/dvc.yaml"), *(root / "cloud").glob("*.yaml")]
    return sorted(path.relative_to(root) for path in found if path.relative_to(root) not in files)
