"""Machines for end-to-end tests: temporary clones of a trimmed copy of this repository that
share a git origin and a DVC remote, each told what hardware it has through $ROOFLINE_HARDWARE.

The project has the real cpu and h100 devices plus `podhost`, a CPU device that only a pod has,
so that a pod measures something the laptop must then keep."""

import contextlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import yaml

ROOT = Path(__file__).resolve().parents[1]
# What some tests need that not every OS the README names has: each such test is marked, and
# skipped elsewhere with the reason (tests/conftest.py: pytest_collection_modifyitems).
POSIX = "needs bash, /proc or POSIX permissions (Linux, macOS): not on Windows"
# The ROCm stand-in plays a host under the installed amdsmi's own Python; its package is
# installed on Linux only (pyproject.toml), so a Mac or Windows PC skips what needs it.
AMDSMI_INSTALLED = importlib.machinery.PathFinder.find_spec("amdsmi") is not None
NO_AMDSMI = "needs the amdsmi package, which the ROCm stand-in plays under: installed on Linux only"
# The CUDA stand-in: first on PYTHONPATH, it plays $PLAYED_MACHINE's GPUs in every process.
STAND_IN = ROOT / "tests/fakes/cuda"
# A row's power over a tiny test window: the energy counter moves in steps, so the readings.
SHORT_WINDOW = "mean of the power readings (window under 1 s)"
DEVICES = "experiments/x4-roofline/devices"
# A played CPU's cache levels, small: the cache ceilings' buffers are sized from these, as a
# real run's are from the levels its probe read, never from this host's (whose VM may say more).
PLAYED_CACHES = {
    "caches": [
        {"level": "L1", "size_bytes": 32 << 10, "shared_by": 1},
        {"level": "L2", "size_bytes": 256 << 10, "shared_by": 1},
        {"level": "L3", "size_bytes": 1 << 20, "shared_by": 2},
    ],
    "caches_from": "sysfs",
}
CPU = {
    "logical_cores": 2,
    "isa": ["avx2", "fma"],
    "cache_bytes": 1 << 20,
    **PLAYED_CACHES,
    "memory_bytes": 16 << 30,
}
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
# A machine with none of the project's devices (its CPU is no device's, and a GPU beside it keeps
# `cpu` from counting it): its `dvc repro` measures nothing and renders the deliverables.
ELSEWHERE = {"cpu": {"model": "Render-only CPU", **CPU}, "gpus": POD["gpus"]}
PODHOST = {
    "kind": "cpu",
    "skus": {
        "host": {"name": "*", "sku": "the pod's host CPU", "cost_per_hour": 2.0, "clock_ghz": 3.0}
    },
    "recognise": {"cpu_model": "^Pod CPU$", "with_gpu_present": True},
    "dtypes": ["float32"],
    "shapes": [[40, 40, 40]],
}


def machine_env(
    cwd: Path, hardware: dict | None = None, env: dict[str, str | None] | None = None
) -> dict[str, str]:
    """The environment a command runs in on a machine: this one's, with DVC's analytics off,
    this Python's scripts first on PATH, the `hardware` described (in a file beside `cwd`), and
    `env`, which adds variables or removes those set to None."""
    merged = dict(
        os.environ,
        DVC_NO_ANALYTICS="1",
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    )
    if hardware is not None:
        described = cwd.parent / f"{cwd.name}-hardware.json"
        described.write_text(json.dumps(hardware))
        merged["ROOFLINE_HARDWARE"] = str(described)
    for key, value in (env or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def run(
    cwd: Path,
    *cmd: str,
    hardware: dict | None = None,
    check: bool = True,
    env: dict[str, str | None] | None = None,
):
    """Run a command on a machine: its output, or (exit code, output) when check is False."""
    merged = machine_env(cwd, hardware, env)
    done = subprocess.run(cmd, cwd=cwd, env=merged, capture_output=True, text=True)
    out = done.stdout + done.stderr
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({done.returncode}):\n{out}")
    return out if check else (done.returncode, out)


def gpu_check(out_dir: Path, machine: str, *options: str) -> tuple[int, str]:
    """`scripts/gpu-check --no-speed` as a user runs it, on the played `machine` (a name or a
    machine file for $PLAYED_MACHINE) and the bare image it promises (no dependency of the
    project beyond torch, numpy, nvidia-ml-py, PyYAML and pytest, and no pytest plugin): its
    exit code and output; its files in `out_dir`."""
    env = {"PYTHONPATH": str(STAND_IN), "PLAYED_MACHINE": machine, "ROOFLINE_HARDWARE": None}
    env |= {"PLAYED_BARE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    script = ["bash", "scripts/gpu-check", "--out", str(out_dir), "--no-speed", *options]
    return run(ROOT, *script, env=env, check=False)


def dvc(
    cwd: Path,
    *args: str,
    hardware: dict | None = None,
    check: bool = True,
    env: dict[str, str | None] | None = None,
):
    """`dvc ARGS` on a machine, as `run` runs a command: its output, or (exit code, output) when
    check is False. In this process, through DVC's own `main` (as DVC's tests call it), in the
    environment and folder `run` gives a process, with all it writes captured: a process of its
    own took 0.6-1.0 CPU-s more (start-up and imports; `dvc status`, a no-op `dvc repro`), some
    60 times a test run. The stages it runs are processes of their own, as ever."""
    import tempfile

    from dvc.cli import main

    merged = machine_env(cwd, hardware, env)
    with tempfile.TemporaryFile() as captured:
        with (
            open(captured.fileno(), "w", encoding="utf-8", buffering=1, closefd=False) as said,
            writing_to(said),
            environment(merged),
            contextlib.chdir(cwd),
            untraced(),
        ):
            code = main(list(args))
        captured.seek(0)
        out = captured.read().decode("utf-8", "replace")
    if check and code != 0:
        raise AssertionError(f"dvc {' '.join(args)} failed ({code}):\n{out}")
    return out if check else (code, out)


DVC_LOGGERS = ("dvc", "dvc_objects", "dvc_data")  # those dvc.logger.setup gives its handlers
COLORAMA_STREAMS = ("orig_stdout", "orig_stderr", "wrapped_stdout", "wrapped_stderr")


@contextlib.contextmanager
def writing_to(said: TextIO) -> Iterator[None]:
    """All this process and the processes it starts write, into `said`, in the order written:
    file descriptors 1 and 2, sys.stdout and sys.stderr, and the streams DVC keeps from when it
    was first imported (pytest's): its console handlers', and colorama's, which DVC's styled
    output puts back in sys.stdout (dvc.ui.disable_colorama)."""
    import logging

    import colorama.initialise

    handlers = [h for name in DVC_LOGGERS for h in logging.getLogger(name).handlers]
    kept_streams = [h.stream for h in handlers]
    kept_colorama = {name: getattr(colorama.initialise, name) for name in COLORAMA_STREAMS}
    sys.stdout.flush()
    sys.stderr.flush()
    kept_fds = os.dup(1), os.dup(2)
    try:
        for fd in (1, 2):
            os.dup2(said.fileno(), fd)
        for handler in handlers:
            handler.setStream(said)
        for name in COLORAMA_STREAMS:
            setattr(colorama.initialise, name, said)
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            yield
    finally:
        said.flush()
        for name, stream in kept_colorama.items():
            setattr(colorama.initialise, name, stream)
        for handler, stream in zip(handlers, kept_streams, strict=True):
            handler.setStream(stream)
        for fd, kept in zip((1, 2), kept_fds, strict=True):
            os.dup2(kept, fd)
            os.close(kept)


@contextlib.contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """os.environ set to `variables` for the block (what the processes started in it inherit)."""
    kept = dict(os.environ)
    os.environ.clear()
    os.environ.update(variables)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(kept)


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """Coverage's tracer, where pytest-cov runs one, paused for the block: around each test
    outside GPU_SIDE_TESTS (tests/conftest.py), and around DVC run in this process, whose code
    is not what it measures (a traced DVC took longer than its own process)."""
    measuring = sys.modules.get("coverage")  # imported by pytest-cov only under --cov
    tracer = measuring.Coverage.current() if measuring else None
    tracing = tracer is not None and sys.gettrace() is not None
    if tracing:
        tracer.stop()
    try:
        yield
    finally:
        if tracing:
            tracer.start()


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


@untraced()  # no GPU-side code: git, DVC's API, Hydra's composition
def make_project(
    where: Path,
    remote: str | None = None,
    gpus: tuple[str, ...] = ("h100",),
    podhost: bool = True,
    **remote_options: str,
) -> Path:
    """The repository's pipeline, trimmed to cpu, the `gpus` (h100 by default) and podhost
    (unless told not: a played GPU's test has no use for its four pending stages) at tiny
    sizes, pushed to a bare git origin; its DVC remote is a local folder unless `remote` says
    otherwise."""
    project = where / "project"
    project.mkdir()
    for part in ("conf", "stages", "roofline", "hydra_plugins"):
        shutil.copytree(ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__"))
    # Adding a device, as docs/configuration.md says: its conf file and its defaults line.
    if podhost:
        (project / "conf/device/podhost.yaml").write_text(yaml.safe_dump(PODHOST))
    cfg = yaml.safe_load((project / "conf/config.yaml").read_text())
    kept = ("device@devices.cpu", *(f"device@devices.{gpu}" for gpu in gpus))
    cfg["defaults"] = [
        d
        for d in cfg["defaults"]
        if not isinstance(d, dict)
        or not str(next(iter(d))).startswith("device@")
        or next(iter(d)) in kept
    ]
    if podhost:
        cfg["defaults"].insert(-1, {"device@devices.podhost": "podhost"})
    cfg["lab_devices"] = ["cpu", *(g for g in gpus if g == "h100")]  # of the lab's, those kept
    cfg["bench"] |= {"warmup": 1, "repeats": 2, "copy_mib": 4, "min_seconds": 0.0}
    cfg["bench"]["warmup_seconds"] = 0.05
    cfg["bench"]["sustained_seconds"] = 0.0  # the played GPU's minute: tests/test_gpu_paths.py
    (project / "conf/config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    cpu_conf = yaml.safe_load((project / "conf/device/cpu.yaml").read_text())
    cpu_conf |= {"dtypes": ["float32"], "shapes": [[48, 48, 48]]}
    cpu_conf["skus"]["any"]["clock_ghz"] = 3.0
    (project / "conf/device/cpu.yaml").write_text(yaml.safe_dump(cpu_conf))
    for gpu in gpus:  # the lab's kernel and float32, at 64^3 (and an AMD GPU's float8)
        conf = yaml.safe_load((project / f"conf/device/{gpu}.yaml").read_text())
        fp8 = [d for d in conf["dtypes"] if d.startswith("float8") and conf["kind"] == "rocm"]
        conf |= {"dtypes": ["float16", *fp8, "float32"], "shapes": [[64, 64, 64]]}
        (project / f"conf/device/{gpu}.yaml").write_text(yaml.safe_dump(conf, sort_keys=False))
    compose(project)  # params.yaml and the pipeline files

    git(project, "init", "-q", "-b", "main")
    shutil.copy(ROOT / ".gitignore", project / ".gitignore")  # bytecode and caches stay out
    # `dvc init`, `dvc config hydra.enabled true` and `dvc remote add -d store`, through DVC's
    # own API in this process: 0.05 s, where three processes of their own took 1.2 s. (Only
    # these: a `dvc pull` here, under .ci/run's coverage tracer, took longer than its process.)
    from dvc.repo import Repo

    with Repo.init(str(project)) as repo, repo.config.edit() as settings:
        settings["hydra"]["enabled"] = True
        settings["remote"]["store"] = {"url": remote or str(where / "remote"), **remote_options}
        settings["core"]["remote"] = "store"
    shutil.copytree(ROOT / ".dvc/plots", project / ".dvc/plots")  # the roofline's template
    git(project, "add", "-A")
    git(project, "commit", "-qm", "pipeline")
    git(where, "clone", "-q", "--bare", str(project), str(where / "origin.git"))
    return where / "origin.git"


@untraced()  # Hydra's composition, no GPU-side code
def compose(project: Path, *overrides: str) -> str:
    """`uv run python -m roofline.compose [overrides]` in `project`, as a user runs it after
    editing conf/: its output. In this process (a process of its own took 0.75 CPU-s), with this
    checkout's code: a project's copy of it, unedited (a test that edits the copy's compose
    code runs the module itself)."""
    import contextlib
    import io

    from roofline.compose import main

    said = io.StringIO()
    with contextlib.chdir(project), contextlib.redirect_stdout(said):
        main(list(overrides))
    return said.getvalue()


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


def copy_lab(where: Path) -> Path:
    """This working tree as git sees it (tracked files, and untracked ones it does not ignore),
    copied to `where/lab` and committed there: a project to change by hand as a newcomer would,
    then ask git what changed."""
    lab = where / "lab"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is not copied
            (lab / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, lab / name)
    git(lab, "init", "-q", "-b", "main")
    git(lab, "add", "-A")
    git(lab, "commit", "-qm", "the lab, copied")
    return lab


def add_device(lab: Path, name: str, conf: dict) -> None:
    """Add a device to a project as docs/configuration.md says: its conf file, and its one
    defaults line after the last device's."""
    (lab / f"conf/device/{name}.yaml").write_text(
        yaml.safe_dump(conf, sort_keys=False), encoding="utf-8"
    )
    config = lab / "conf/config.yaml"
    lines = config.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if line.lstrip().startswith("- device@devices."))
    lines.insert(last + 1, f"  - device@devices.{name}: {name}\n")
    config.write_text("".join(lines), encoding="utf-8")


def changed_files(lab: Path) -> set[str]:
    """The files that differ from the project's last commit, new ones included."""
    out = git(lab, "status", "--porcelain", "--untracked-files=all")
    return {line[3:] for line in out.splitlines()}


def made_once(shared: Path, name: str, make: Callable[[Path], object]) -> Path:
    """`shared/name`, made by `make` (given the empty folder) once for the whole test run: by
    the first pytest-xdist worker to ask; the others wait for it, then read it. Tests copy what
    they change (`copied`)."""
    from filelock import FileLock

    made, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            if made.exists():  # another worker's making failed part-way: made again, afresh
                shutil.rmtree(made)
            made.mkdir()
            make(made)
            done.write_text("made\n")
    return made


def rendered_once(shared: Path) -> Path:
    """A clone of the project whose `dvc repro` ran on a machine with none of its devices
    (ELSEWHERE): every record pending, every deliverable rendered. Made once (`made_once`), so
    no test pays for a whole pipeline to get records to push."""

    def make(made: Path) -> None:
        laptop = clone(make_project(made), made / "laptop", pull=False)
        dvc(laptop, "repro", hardware=ELSEWHERE)

    return made_once(shared, "rendered", make) / "laptop"


def copied(project: Path, where: Path) -> Path:
    """A copy of a clone (its DVC cache and remote settings too), to change without touching it."""
    shutil.copytree(project, where, symlinks=True)
    return where
