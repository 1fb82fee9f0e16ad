"""The layout shows the design: roofline's subpackages, and which may run which. The rules are
about packages, read from import statements (roofline.machines.code), with no module list."""

from pathlib import Path

import pytest

from roofline.machines.code import code_deps, imported_modules

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent.name for p in (ROOT / "roofline").glob("*/__init__.py"))

# Lowest first: each package imports only those before it (the shared records, the device seam,
# configuration, the several-machines rules, measuring, interpretation, rendering).
LAYERS = [
    "core",
    "device",
    "configuration",
    "machines",
    "measuring",
    "interpretation",
    "rendering",
]
# What the deliverables derive from measurements: a measuring stage running any of it would
# stale every GPU measured elsewhere when a column is renamed or a flag reworded; and
# interpretation never measures.
INTERPRETING = ("interpretation", "rendering")


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "roofline" and len(parts) > 2 else None


def test_every_subpackage_has_its_layer():
    assert sorted(LAYERS) == PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_packages_before_it(package):
    wrong = []
    for path in sorted((ROOT / "roofline" / package).glob("*.py")):
        for module in imported_modules(path):
            used = package_of(module)
            below = LAYERS[: LAYERS.index(package)]
            if package in INTERPRETING and used == "measuring":
                below = []
            if used and used != package and used not in below:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong


@pytest.mark.parametrize("stage", ["probe", "benchmark", "sweep", "knobs"])
def test_no_measuring_stage_runs_interpretation_or_rendering(stage):
    ran = code_deps(f"stages.{stage}", ROOT)
    assert not [f for f in ran if f.split("/")[1] in INTERPRETING]
