"""The rules that keep one machine from measuring or overwriting another machine's results.

probe:     device here and (nothing recorded, or the same hardware recorded) -> write its
           fingerprint; here but other hardware recorded -> keep the record; not here ->
           keep the record, or record "never measured".
benchmark: fingerprint "never measured" -> pending rows; fingerprint is this machine's device
           -> measure; anything else -> refuse (the stage is stale and the hardware is
           elsewhere), leaving the recorded results as they are."""

from dataclasses import asdict
from typing import Any

import yaml

from roofline.errors import RecordError
from roofline.hardware import describe, locate
from roofline.paths import device_dir, fingerprint_path
from roofline.schema import empty, read_json

NEVER = "never measured"


def lock_records_fingerprint(name: str) -> bool:
    """Whether git's dvc.lock for this device says its probe has written a fingerprint."""
    lock = device_dir(name) / "dvc.lock"
    if not lock.exists():
        return False
    stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {})
    return bool(stages.get("probe", {}).get("outs"))


def fingerprint(name: str, hardware_identity: dict[str, Any], torch_version: str) -> dict:
    # A new torch is a new measurement on the same hardware, so it belongs in the fingerprint.
    return {
        "device": name,
        "status": "recorded",
        "hardware": hardware_identity,
        "torch": torch_version,
    }


def never_measured(name: str) -> dict:
    return {"device": name, "status": NEVER}


def points(dev: Any) -> list[tuple[str, list[int]]]:
    """A device's (dtype, shape) points, in config order."""
    return [(dtype.name, list(shape)) for dtype in dev.dtypes for shape in dev.shapes]


def pending_record(name: str, dev: Any) -> dict[str, Any]:
    """A never-measured device's results: a row per point, with no numbers."""
    rows = [empty(name, dtype, shape, "pending", "never measured") for dtype, shape in points(dev)]
    return {"device": name, "status": "pending", "rows": [asdict(row) for row in rows]}


def sweep_record(name: str, sweep: str, status: str, **extra: Any) -> dict[str, Any]:
    """A device's sweep record; a pending or `none` sweep has no rows."""
    return {"device": name, "sweep": sweep, "status": status, "rows": [], **extra}


def probe_decision(
    name: str, recorded: dict | None, here: dict | None, fresh: dict | None, replace: bool = False
) -> tuple[dict | None, str]:
    """(fingerprint to write, or None to keep the recorded one; what happened, for the log).

    `here` is the identity of the device on this machine (None when absent); `fresh` the
    fingerprint this machine would write; `replace` takes the device over from other hardware."""
    if replace:
        if here is None:
            raise RecordError(f"{name}: cannot replace its hardware from a machine without it")
        was = describe(recorded["hardware"]) if recorded and recorded["status"] != NEVER else "none"
        return fresh, f"{name}: replaced recorded hardware ({was}) with {describe(here)}"
    if here is None:
        if recorded is None:
            return never_measured(name), f"{name}: not on this machine, never measured: pending"
        if recorded["status"] == NEVER:
            return None, f"{name}: not on this machine, never measured: pending"
        return (
            None,
            f"{name}: not on this machine; keeping results from {describe(recorded['hardware'])}",
        )
    if recorded is None or recorded["status"] == NEVER or recorded["hardware"] == here:
        return fresh, f"{name}: here ({describe(here)})"
    return None, (
        f"{name}: this machine has {describe(here)} but the results on record were measured on "
        f"{describe(recorded['hardware'])}; keeping them. To measure this machine instead: "
        f"`uv run python -m stages.probe {name} --replace` then `uv run dvc repro` (README: "
        "replacing a device's hardware)."
    )


def benchmark_decision(name: str, recorded: dict, here: dict | None) -> str:
    """ "pending" or "measure"; raises RecordError when neither is honest."""
    if recorded["status"] == NEVER:
        return "pending"
    if here is not None and recorded["hardware"] == here:
        return "measure"
    this = f"has {describe(here)}" if here else f"has no {name}"
    raise RecordError(
        f"{name}: its benchmark stage is stale (its code or params changed since it was "
        f"measured), but its results were measured on {describe(recorded['hardware'])} and "
        f"this machine {this}. The recorded results are kept as they are. Either re-measure on "
        f"that hardware (`uv run dvc repro {device_dir(name)}/dvc.yaml` there), or render the "
        "report from the recorded results here (`uv run dvc repro -s aggregate plot report`), "
        "or revert the change."
    )


def decide(name: str, dev: Any) -> tuple[str, dict | None, dict | None]:
    """For a measuring stage: ("pending" or "measure", the device's part of this machine, its
    identity); raises RecordError when it must not run here."""
    found, here = locate(dev)
    return benchmark_decision(name, read_json(fingerprint_path(name)), here), found, here
