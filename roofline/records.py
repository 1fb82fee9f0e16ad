"""The rules that keep one machine from measuring or overwriting another machine's results.

The record of a device is its results.json: what was measured, on which hardware (the
fingerprint it was measured under travels inside it). The probe's fingerprint file only tells
DVC which hardware the next measurement is for, so a run that probed and then failed leaves
nothing on record, and blocks no other machine.

probe:     device here and (nothing on record, or the same hardware) -> write its fingerprint;
           here but other hardware on record -> keep the record; not here -> the record's
           fingerprint (or "never measured"), which also undoes what a failed run probed.
benchmark: fingerprint "never measured" -> pending rows; fingerprint is this machine's device
           -> measure; anything else -> refuse (the stage is stale and the hardware is
           elsewhere), leaving the recorded results as they are."""

import hashlib
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from roofline.errors import RecordError
from roofline.hardware import BOOT_CACHE, describe, describe_apart, live_hardware, locate
from roofline.paths import device_dir, fingerprint_path, results_path
from roofline.schema import empty, read_json

NEVER = "never measured"
KNOWN = ("measured", "pending")  # the states a results.json can be on record in


def lock_stage(name: str, stage: str) -> dict[str, Any]:
    """What git's dvc.lock for this device records of one of its stages ({} when nothing)."""
    lock = device_dir(name) / "dvc.lock"
    if not lock.exists():
        return {}
    return (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).get(stage, {})


def lock_records_results(name: str) -> bool:
    """Whether dvc.lock says this device's benchmark has written results."""
    return bool(lock_stage(name, "benchmark").get("outs"))


def differs_from_lock(name: str, stage: str, path: Path) -> bool:
    """Whether a stage's output on disk is not the one dvc.lock records (edited or corrupted)."""
    outs = {out["path"]: out for out in lock_stage(name, stage).get("outs", [])}
    recorded = outs.get(str(path), {}).get("md5")
    return (
        bool(recorded and path.exists()) and hashlib.md5(path.read_bytes()).hexdigest() != recorded
    )


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


def points(dev: Any) -> list[tuple[str, list[int], str]]:
    """A device's (dtype, shape, backend) points, in config order."""
    return [
        (dtype.name, list(shape), backend)
        for dtype in dev.dtypes
        for shape in dev.shapes
        for backend in dev.backends
    ]


def pending_record(name: str, dev: Any) -> dict[str, Any]:
    """A never-measured device's results: a row per point, with no numbers."""
    rows = [
        empty(name, dtype, shape, "pending", "never measured", backend)
        for dtype, shape, backend in points(dev)
    ]
    return {"device": name, "status": "pending", "rows": [asdict(row) for row in rows]}


def sweep_record(name: str, sweep: str, status: str, **extra: Any) -> dict[str, Any]:
    """A device's sweep record; a pending or `none` sweep has no rows."""
    return {"device": name, "sweep": sweep, "status": status, "rows": [], **extra}


def knobs_record(name: str, knobs: str, status: str, **extra: Any) -> dict[str, Any]:
    """A device's knobs record; pending or `none` knobs have no rows."""
    return {"device": name, "knobs": knobs, "status": status, "rows": [], **extra}


def on_record(name: str, results: dict[str, Any] | None) -> dict:
    """The fingerprint of what is on record: the one a measured results.json was measured
    under, else "never measured". A record in a state this code does not know (from a newer
    version, or damaged) is refused: taking it for never measured would overwrite it."""
    status = results.get("status") if isinstance(results, dict) else None
    if results is not None and status not in KNOWN:
        path = results_path(name)
        raise RecordError(
            f"{path}: status {status!r}; allowed: {', '.join(KNOWN)}. It may come from a newer "
            "version of this lab, or be damaged; nothing was measured or overwritten. Update "
            f"this checkout (`git pull`), or restore it (`uv run dvc checkout --force {path}`)"
        )
    if status == "measured":
        if "fingerprint" in results:
            return results["fingerprint"]
        # A record from before fingerprints travelled inside results: the hardware and torch it
        # names are the same facts.
        torch_version = results.get("run", {}).get("versions", {}).get("torch", "")
        return fingerprint(name, results["hardware"], torch_version)
    return never_measured(name)


def probe_decision(
    name: str,
    record: dict,
    here: dict | None,
    fresh: dict | None,
    replace: bool = False,
    claimed: dict | None = None,
) -> tuple[dict, str]:
    """(fingerprint to write, what happened, for the log).

    `record` is what is on record (on_record); `here` the identity of the device on this
    machine (None when absent); `fresh` the fingerprint this machine would write; `replace`
    takes the device over from other hardware; `claimed` the fingerprint file as it is (a
    `--replace`, or a run here that failed, left this machine's claim in it)."""
    never = record["status"] == NEVER
    if replace:
        if here is None:
            raise RecordError(f"{name}: cannot replace its hardware from a machine without it")
        if never:
            return fresh, f"{name}: nothing on record to replace: the next `dvc repro` measures it"
        if record["hardware"] == here:
            return fresh, (
                f"{name}: nothing to replace: its results were measured on this hardware "
                f"({describe(here)}). To measure it again here: `uv run dvc repro --force "
                f"{device_dir(name)}/dvc.yaml`"
            )
        return fresh, (
            f"{name}: replaced recorded hardware ({describe(record['hardware'])}) with "
            f"{describe(here)}"
        )
    if here is None:
        if never:
            return record, f"{name}: not on this machine, never measured: pending"
        return (
            record,
            f"{name}: not on this machine; keeping results from {describe(record['hardware'])}",
        )
    if never or record["hardware"] == here:
        return fresh, f"{name}: here ({describe(here)})"
    if claimed and claimed.get("hardware") == here:  # taken over with --replace, not measured yet
        return fresh, (
            f"{name}: here ({describe(here)}), taken over from {describe(record['hardware'])}: "
            "measuring it"
        )
    this, that = describe_apart(here, record["hardware"])
    return record, (
        f"{name}: this machine has {this} but the results on record were measured on "
        f"{that}; keeping them. To measure this machine instead: "
        f"`uv run python -m stages.probe {name} --replace` then `uv run dvc repro` (README: "
        "replacing a device's hardware)."
    )


class Decision(NamedTuple):
    """What a measuring stage does here: "pending" or "measure"; the device's part of this
    machine and its identity; the fingerprint it measures under."""

    action: str
    found: dict | None
    here: dict | None
    fingerprint: dict


def measure_or_pend(
    name: str,
    recorded: dict,
    here: dict | None,
    stage: str = "benchmark",
    output: Path | None = None,
) -> str:
    """ "pending" or "measure"; raises RecordError when neither is honest."""
    if recorded["status"] == NEVER:
        return "pending"
    if here is not None and recorded["hardware"] == here:
        return "measure"
    if output is not None and differs_from_lock(name, stage, output):
        raise RecordError(
            f"{name}: {output} is not the file dvc.lock records (it was edited or corrupted "
            f"here), and this machine cannot re-measure it: it was measured on "
            f"{describe(recorded['hardware'])}. Restore it: `uv run dvc checkout --force {output}`"
        )
    this, that = (
        describe_apart(here, recorded["hardware"]) if here else ("", describe(recorded["hardware"]))
    )
    this = f"has {this}" if here else f"has no {name}"
    raise RecordError(
        f"{name}: its {stage} stage is stale (its code or measuring params changed since it was "
        f"measured), but its results were measured on {that} and "
        f"this machine {this}. The recorded results are kept as they are. Either re-measure on "
        f"that hardware (`uv run dvc repro {device_dir(name)}/dvc.yaml` there), or render the "
        "report from the recorded results here (`uv run dvc repro -s aggregate plot report`), "
        "or revert the change."
    )


def decide(name: str, dev: Any, stage: str, output: Path) -> Decision:
    """For a measuring stage writing `output`; raises RecordError when it must not run here."""
    recorded = read_json(fingerprint_path(name))
    if recorded["status"] == NEVER:  # pending, whatever is here: no need to look
        return Decision("pending", None, None, recorded)
    found, here = locate(dev, live_hardware(BOOT_CACHE))
    return Decision(measure_or_pend(name, recorded, here, stage, output), found, here, recorded)
