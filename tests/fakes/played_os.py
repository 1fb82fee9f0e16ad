"""A pytest plugin that collects the tests as a Mac or a Windows PC would: amdsmi absent (not
found at all, as where its package is not installed: `find_spec` says None), and, while each
test module is imported and collected, `sys.platform` and `platform.system()` played as the
OS named in $PLAYED_OS ("macos" or "windows"). The libraries that choose their own parts by
platform when imported (torch, psutil, filelock, joblib, click, DVC, ...) are imported first
under the real one: on this machine their Mac or Windows parts do not exist. What is played is
our code: the tests and the lab's modules they import. `os.name` stays "posix" (pathlib picks its path
class by it), so a test module that branches on `os.name` at import is not played.

    PYTHONPATH=tests/fakes PLAYED_OS=windows python -m pytest -p played_os --collect-only
"""

import contextlib
import importlib
import importlib.machinery
import importlib.util
import os
import platform
import sys

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
OPTIONAL = ("sky", "boto3", "moto.server")  # the `cloud` group
for library in REAL_FIRST:
    importlib.import_module(library)
for library in OPTIONAL:
    with contextlib.suppress(ImportError):
        importlib.import_module(library)

_find = importlib.machinery.PathFinder.find_spec.__func__


def _without_amdsmi(cls, name, path=None, target=None):
    return None if name.split(".")[0] == "amdsmi" else _find(cls, name, path, target)


importlib.machinery.PathFinder.find_spec = classmethod(_without_amdsmi)
sys.modules.pop("amdsmi", None)
assert importlib.util.find_spec("amdsmi") is None  # absent, not merely failing to import

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
