"""Where the pipeline's artifacts live."""

from pathlib import Path, PurePath

EXPERIMENT = Path("experiments/x4-roofline")


def posix(path: PurePath | str) -> str:
    """A path as the generated pipeline files write it, on every OS: with forward slashes
    (Windows' str() gives backslashes, and `compose --check` would then differ)."""
    return PurePath(path).as_posix()


def device_dir(name: str) -> Path:
    return EXPERIMENT / "devices" / name


def fingerprint_path(name: str) -> Path:
    return device_dir(name) / "fingerprint.json"


def results_path(name: str) -> Path:
    return device_dir(name) / "results.json"


def sweep_path(name: str) -> Path:
    return device_dir(name) / "sweep.json"


def knobs_path(name: str) -> Path:
    return device_dir(name) / "knobs.json"


# A device's measuring stages, each with the record it writes, in the order they run.
RECORDS = {"benchmark": results_path, "sweep": sweep_path, "knobs": knobs_path}
