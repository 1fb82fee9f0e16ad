"""A pytest plugin that collects the tests as a Mac or a Windows PC would: amdsmi, and the
packages named in $PLAYED_ABSENT, absent (not found, as where the package is not installed:
`find_spec` finds no installed copy), and, while each test module is imported and collected,
`sys.platform` and `platform.system()` played as the OS named in $PLAYED_OS ("macos" or
"windows"). The libraries that choose their own parts by platform when imported (torch,
psutil, filelock, joblib, click, DVC, ...) are imported first under the real one: on this
machine their Mac or Windows parts do not exist. What is played is our code: the tests and the
lab's modules they import. `os.name` stays "posix" (pathlib picks its path class by it), so a
test module that branches on `os.name` at import is not played.

    PLAYED_OS=windows python -m pytest -p tests.fakes.played_os --collect-only
"""

import contextlib
import importlib
import importlib.machinery
import importlib.util
import os
import platform
import sys
import sysconfig
from pathlib import Path

import pytest

REAL_FIRST = (
    "torch",
    "numpy",
    "pandas",
    "psutil",
    "filelock",
    "joblib",
    "click",
    "dvc.repo",
    "hydra",
    "omegaconf",
    "matplotlib.pyplot",
    "seaborn",
    "threadpoolctl",
    "cpuinfo",
    "yaml",
    "requests",
)
OPTIONAL = ("sky", "boto3", "moto.server")  # SkyPilot is the `cloud` group's
# Absent as on a machine without their packages: amdsmi always (Linux only), and the packages
# named in $PLAYED_ABSENT (comma-separated), as `sky` where `uv run pytest` alone set it up.
ABSENT = {"amdsmi", *filter(None, os.environ.get("PLAYED_ABSENT", "").split(","))}
for library in REAL_FIRST:
    importlib.import_module(library)
for library in OPTIONAL:
    if library.split(".")[0] not in ABSENT:
        with contextlib.suppress(ImportError):
            importlib.import_module(library)

_find = importlib.machinery.PathFinder.find_spec.__func__


INSTALLED = {Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")}


def _installed(spec: importlib.machinery.ModuleSpec) -> bool:
    """Whether a spec is an installed package's (what a machine without it lacks), not a folder
    of the same name elsewhere on the path, which such a machine still finds."""
    found = [spec.origin] if spec.origin else list(spec.submodule_search_locations or [])
    return any(Path(where).is_relative_to(site) for where in found for site in INSTALLED)


def _without_absent(cls, name, path=None, target=None):
    spec = _find(cls, name, path, target)
    absent = spec is not None and name.split(".")[0] in ABSENT and _installed(spec)
    return None if absent else spec


importlib.machinery.PathFinder.find_spec = classmethod(_without_absent)
for name in ABSENT:
    sys.modules.pop(name, None)
    found = importlib.util.find_spec(name)  # absent, not merely failing to import
    assert found is None or not _installed(found), found

PLAYED = {"macos": ("darwin", "Darwin"), "windows": ("win32", "Windows")}


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """Each module imported (and its tests collected) under the played platform."""
    played = os.environ.get("PLAYED_OS")
    if not played or not isinstance(collector, pytest.Module):
        return (yield)
    real = sys.platform, platform.system
    sys.platform, system = PLAYED[played]
    platform.system = lambda: system
    try:
        return (yield)
    finally:
        sys.platform, platform.system = real
