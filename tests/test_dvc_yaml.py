"""The pipeline files: each stage depends on exactly the code it runs, and every device has its
own stage file."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEVICES = ROOT / "experiments/x4-roofline/devices"


def imported_files(module: str) -> set[str]:
    """The repository's own files that `python -m module` imports."""
    code = (
        f"import sys, {module}\n"
        "print('\\n'.join(m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    files = {Path(line).resolve() for line in out.stdout.split()}
    ours = {f.relative_to(ROOT) for f in files if f.is_relative_to(ROOT)}
    return {
        str(f)
        for f in ours
        if f.parts[0] in ("roofline", "stages") and str(f) != "roofline/__init__.py"
    }


def stages() -> list[tuple[str, dict]]:
    found = [
        (name, stage)
        for name, stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items()
    ]
    for name in ("probe", "benchmark", "sweep"):
        found.append((name, yaml.safe_load((DEVICES / "cpu/dvc.yaml").read_text())["stages"][name]))
    return found


@pytest.mark.parametrize(("name", "stage"), stages(), ids=[n for n, _ in stages()])
def test_each_stage_depends_on_the_code_it_imports(name, stage):
    module = stage["cmd"].split()[2]
    code_deps = {d for d in stage["deps"] if d.endswith(".py")}
    needed = imported_files(module)
    assert needed <= code_deps, f"{name}: add to its deps: {sorted(needed - code_deps)}"
    if name == "probe":
        return  # always runs; its deps only document it
    assert code_deps <= needed, f"{name}: deps it does not import: {sorted(code_deps - needed)}"


def test_every_configured_device_has_its_own_stage_file_and_results_dependency():
    config = yaml.safe_load((ROOT / "conf/config.yaml").read_text())
    names = [
        key.split(".")[-1]
        for entry in config["defaults"]
        if isinstance(entry, dict)
        for key in entry
        if key.startswith("device@")
    ]
    aggregate = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["aggregate"]["deps"]
    template = (DEVICES / "cpu/dvc.yaml").read_text()
    for name in names:
        assert (DEVICES / name / "dvc.yaml").read_text() == template.replace("cpu", name)
        assert f"experiments/x4-roofline/devices/{name}/results.json" in aggregate
        assert f"experiments/x4-roofline/devices/{name}/sweep.json" in aggregate
