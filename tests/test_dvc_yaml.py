"""The pipeline files: generated from conf/, each stage depending on exactly the code it runs
and the params that change its output."""

import inspect
from modulefinder import ModuleFinder
from pathlib import Path

import pytest
import yaml

from roofline.compose import generated
from roofline.core.code import code_deps
from roofline.core.depends import settings
from roofline.machines.keys import schema_defaults
from roofline.machines.pipeline import orphans

ROOT = Path(__file__).resolve().parents[1]
DEVICES = ROOT / "experiments/x4-roofline/devices"


# Modules a stage starts as processes of their own (`python -m`), which no import names.
STARTED = {"stages.knobs": ["roofline.measuring.capped"]}


def imported_files(module: str) -> set[str]:
    """The repository's own files that `python -m module` can import, anywhere in its code
    (inside functions too), as the standard library's ModuleFinder reads the bytecode; with
    the modules it starts as processes of their own."""
    files = set()
    for name in [module, *STARTED.get(module, [])]:
        finder = ModuleFinder(path=[str(ROOT)])  # ours only: third-party ones are not followed
        finder.run_script(str(ROOT / (name.replace(".", "/") + ".py")))
        files |= {Path(m.__file__).resolve() for m in finder.modules.values() if m.__file__}
    ours = {f.relative_to(ROOT) for f in files if f.is_relative_to(ROOT)}
    return {str(f) for f in ours if f.parts[0] in ("roofline", "stages")}


def stages() -> list[tuple[str, dict]]:
    return list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items())


MEASURING = ["benchmark", "sweep", "knobs"]


@pytest.mark.parametrize(("name", "stage"), stages(), ids=[n for n, _ in stages()])
def test_each_stage_depends_on_exactly_the_code_it_imports(name, stage):
    module = stage["cmd"].split()[2]
    code_deps = {d for d in stage["deps"] if d.endswith(".py")}
    needed = imported_files(module)
    if name == "aggregate":  # it hashes the measuring code: a record by older code is shown so
        needed |= {f for s in MEASURING for f in imported_files(f"stages.{s}")}
    assert code_deps == needed, (
        f"{name}: missing {sorted(needed - code_deps)}, extra {sorted(code_deps - needed)}"
    )


@pytest.mark.parametrize("stage", MEASURING)
def test_a_measuring_stages_key_hashes_exactly_the_code_it_imports(stage):
    hashed = set(code_deps(f"stages.{stage}", ROOT))
    needed = imported_files(f"stages.{stage}")
    assert hashed == needed, f"missing {sorted(needed - hashed)}, extra {sorted(hashed - needed)}"


def test_device_stages_depend_on_no_code_and_measuring_stages_on_their_key_only():
    device = yaml.safe_load((DEVICES / "h100/dvc.yaml").read_text())["stages"]
    assert all("deps" not in stage for stage in device.values())
    assert device["probe"]["params"] == ["devices.h100.kind", "devices.h100.recognise"]
    assert device["benchmark"]["params"] == [
        {
            "experiments/x4-roofline/devices/h100/fingerprint.json": [
                "status",
                "hardware",
                "torch",
                "measures.benchmark",
            ]
        }
    ]
    params = {
        "bench": {"repeats": 10, "seed": 3},
        "sweep": {"name": "full"},
        "knobs": {"name": "lab"},
        "devices": {"h100": {"kind": "cuda", "x": 0, "backends": ["torch"]}},
    }
    # What the sweep reads, each entry at its schema default left out (repeats, backends).
    assert settings(params, "h100", "sweep", schema_defaults()) == {
        "bench": {"seed": 3},
        "sweep": {"name": "full"},
        "devices.h100": {"kind": "cuda", "recognise": None, "dtypes": None, "shapes": None},
    }
    assert (
        "devices"
        in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["aggregate"]["params"]
    )


def test_dvc_runs_the_probe_of_every_device_first_and_no_other_stage_every_time():
    """One always-changed stage for every device, not one each: each is a process of its own
    and DVC's bookkeeping on every `dvc repro` (docs/development.md). DVC plans it before any
    device's stage, as aggregate's first dependency: each device's probe then sees the
    fingerprint it wrote."""
    from dvc.repo import Repo
    from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

    with Repo(str(ROOT)) as repo:
        stages = collect_stages(repo, [str(ROOT / "dvc.yaml")])  # what plain `dvc repro` runs
        plan = plan_repro(get_active_graph(repo.index.graph), stages)
        names = [f"{Path(s.path).relative_to(ROOT)}:{s.name}" for s in plan]
        always = [name for name, s in zip(names, plan, strict=True) if s.always_changed]
    probes = "experiments/x4-roofline/devices/dvc.yaml:probe"
    assert names[0] == probes and always == [probes], names
    devices = yaml.safe_load((ROOT / "params.yaml").read_text())["devices"]
    for name in devices:
        assert f"experiments/x4-roofline/devices/{name}/dvc.yaml:probe" in names[1:]


def test_pipeline_files_are_conf_generated():
    files = generated(ROOT, [])
    drifted = [str(p) for p, text in files.items() if (ROOT / p).read_text() != text]
    assert not drifted, f"{drifted} drifted from conf/: run `uv run python -m roofline.compose`"
    names = yaml.safe_load(files[Path("params.yaml")])["devices"]
    assert not orphans(files, ROOT)
    aggregate = yaml.safe_load(files[Path("dvc.yaml")])["stages"]["aggregate"]["deps"]
    for name in names:
        assert f"experiments/x4-roofline/devices/{name}/results.json" in aggregate


def test_a_path_is_written_with_forward_slashes_whatever_the_os_spells_it():
    """Windows' str() of a path has backslashes: every path the pipeline files name goes through
    posix(), so a Windows laptop generates the same files and `compose --check` agrees."""
    from pathlib import PureWindowsPath

    from roofline.core.paths import posix
    from roofline.machines.pipeline import kept, stage

    spelt = PureWindowsPath(r"experiments\x4-roofline\devices\cpu\results.json")
    assert str(spelt).count("\\") == 4  # as Windows spells it
    assert posix(spelt) == "experiments/x4-roofline/devices/cpu/results.json"
    assert posix("experiments/x4-roofline") == "experiments/x4-roofline"
    assert kept(spelt) == [{"experiments/x4-roofline/devices/cpu/results.json": {"persist": True}}]
    made = stage("stages.plot", ROOT, deps=[spelt, "params.yaml"], code=False)
    assert made["deps"] == ["experiments/x4-roofline/devices/cpu/results.json", "params.yaml"]
    assert not any("\\" in text for text in generated(ROOT, []).values())


def test_dvc_parses_the_pipeline_files_with_ruamels_c_parser():
    # DVC loads every dvc.yaml and dvc.lock through YAML(typ="safe") (dvc.utils.strictyaml); the
    # pure-Python parser took about 0.2 s of each DVC command here (pyproject.toml says why).
    from dvc.utils import strictyaml
    from ruamel.yaml import YAML
    from ruamel.yaml.main import CParser

    assert inspect.signature(strictyaml.load).parameters["round_trip"].default is False
    assert CParser is not None and YAML(typ="safe").Parser is CParser
