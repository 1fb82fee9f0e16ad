"""The rules that keep one machine from measuring over another machine's results.

A device's record is its results.json, sweep.json and knobs.json. Each says what was measured,
on which hardware, by which code and settings (its fingerprint travels inside it). The probe's
fingerprint file only tells DVC what the next measurement is for. So a run that failed leaves
nothing on record, and blocks no other machine.

The probe, for each device:
- here, with nothing or the same hardware on record: it writes this machine's fingerprint;
- here, with other hardware on record: it keeps the record;
- not here: it writes the record's fingerprint (or "never measured"), which also undoes what a
  failed run probed;
- results that dvc.lock names but this workspace lacks: it says where they are (DVC's cache, the
  remote). Where they are nowhere ("lost"), a machine with the device measures it afresh; one
  without it refuses until `probe --lost` records them so.

The measuring stages (benchmark, sweep, knobs):
- fingerprint "never measured": a pending record;
- this machine's fingerprint: measure;
- anything else: keep the record as it is.

The fingerprint holds a key per measuring stage (roofline/machines/keys.py), which DVC reads as
that stage's params. Where the device is here, these are today's keys; elsewhere, the record's.
So a change of measuring code measures again the devices this machine has, and stales no other
device's stage: its lock, its files and the pod's `git pull` are left alone."""

import hashlib
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple, cast

import yaml

from roofline.core.depends import STAGE_SETTINGS
from roofline.core.errors import RecordError
from roofline.core.files import read_json
from roofline.core.measurement import SCHEMA_VERSION, check_version, empty
from roofline.core.paths import RECORDS, device_dir, fingerprint_path, posix, results_path
from roofline.device.description import Found, Identity
from roofline.device.hardware import BOOT_CACHE, live_hardware
from roofline.machines.identity import describe, describe_apart, locate, same_machine
from roofline.machines.keys import fingerprint_values, own_changed, recorded_key
from roofline.machines.record_types import (
    Fingerprint,
    LockedStage,
    Record,
    StageKey,
)

NEVER = "never measured"
# The states a record can be on record in; "lost": its data was in neither the workspace, DVC's
# cache nor the remote, and a machine without the device recorded it so (`probe --lost`).
LOST = "lost"
KNOWN = ("measured", "pending", LOST)


def lock_stage(name: str, stage: str) -> LockedStage:
    """What git's dvc.lock for this device records of one of its stages ({} when nothing)."""
    lock = device_dir(name) / "dvc.lock"
    if not lock.exists():
        return {}
    return (yaml.safe_load(lock.read_text(encoding="utf-8")) or {}).get("stages", {}).get(stage, {})


def locked_fingerprint(name: str, stage: str) -> dict[str, Any] | None:
    """The fingerprint values a stage's dvc.lock records it ran under (its params), or None.
    dvc.lock names files with "/" on every OS: so are they looked up."""
    return lock_stage(name, stage).get("params", {}).get(posix(fingerprint_path(name)))


def lock_records_results(name: str) -> bool:
    """Whether dvc.lock says this device's benchmark has written results."""
    return bool(lock_stage(name, "benchmark").get("outs"))


def locked_pending(name: str) -> bool:
    """Whether the results dvc.lock records are a never-measured device's pending ones: made
    from the config alone, so where they are missing they are written again, never lost."""
    locked = locked_fingerprint(name, "benchmark")
    return isinstance(locked, dict) and locked.get("status") == NEVER


def dvc_repo() -> Any:
    from dvc.repo import Repo  # only for a record missing or uncached: a rare path

    return Repo(".")


def in_cache(md5: str, repo: Any = None) -> bool:
    return (repo or dvc_repo()).cache.local.exists(md5)


def data_location(md5: str) -> str:
    """Where a recorded file's data is: "cache", "remote", "nowhere", or why it is not known."""
    repo = dvc_repo()
    if in_cache(md5, repo):
        return "cache"
    try:
        remote = repo.cloud.get_remote_odb(None, hash_name="md5")
        return "remote" if remote.exists(md5) else "nowhere"
    except Exception as err:  # no remote, unreachable, credentials: each is said alike
        return f"not known: the remote could not be asked ({type(err).__name__}: {err})"


def record_location(name: str, stage: str, path: Path) -> str:
    """Where the data is of a stage's output that dvc.lock records (data_location), or
    "unrecorded" where it records none."""
    md5 = locked_md5(name, stage, path)
    return data_location(md5) if md5 else "unrecorded"


def missing(name: str, path: Path, where: str, that: str = "") -> RecordError:
    """The error for a record dvc.lock names and this workspace lacks, by where its data is."""
    if where == "cache":
        return RecordError(
            f"{name}: {path} is in DVC's cache, not in this workspace: run "
            f"`uv run dvc checkout {path}`"
        )
    if where == "nowhere":
        measured = f" (measured on {that})" if that else ""
        return RecordError(
            f"{name}: dvc.lock records {path}{measured}, but it is in neither this workspace, "
            "DVC's cache nor the remote: it is lost (was the push from the machine that "
            "measured it refused?). Re-measure it where it is: plain `uv run dvc repro` on a "
            f"machine with it measures it afresh. Or record it as lost and render the rest: "
            f"`uv run python -m stages.probe {name} --lost`, then `uv run dvc repro` (the lost "
            "lock stays in git's history)"
        )
    known = "" if where == "remote" else f" ({where})"
    return RecordError(
        f"{name}: {path} is not in this workspace: run `uv run dvc pull` first{known}"
    )


def locked_md5(name: str, stage: str, path: Path) -> str | None:
    """The md5 dvc.lock records for a stage's output (None when it records none)."""
    outs = {out["path"]: out for out in lock_stage(name, stage).get("outs", [])}
    return outs.get(posix(path), {}).get("md5")


def md5_of(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def differs_from_lock(name: str, stage: str, path: Path) -> bool:
    """Whether a stage's output on disk is not the one dvc.lock records (edited or corrupted)."""
    recorded = locked_md5(name, stage, path)
    return bool(recorded and path.exists()) and md5_of(path) != recorded


def fingerprint(
    name: str,
    hardware_identity: Identity | None,
    torch_version: str | None,
    measures: Mapping[str, StageKey | str],
) -> Fingerprint:
    """What a device's measurements depend on: its hardware, the torch build (a new torch is
    a new measurement on the same hardware) and each measuring stage's key."""
    return {
        "device": name,
        "status": "recorded",
        "hardware": hardware_identity,
        "torch": torch_version,
        "measures": dict(measures),
    }


def never_measured(
    name: str, measures: Mapping[str, StageKey | str], status: str = NEVER
) -> Fingerprint:
    return {
        "device": name,
        "status": status,
        "hardware": None,
        "torch": None,
        "measures": dict(measures),
    }


def lost_fingerprint(name: str) -> Fingerprint:
    return never_measured(name, dict.fromkeys(STAGE_SETTINGS, LOST), LOST)


def points(dev: Any) -> list[tuple[str, list[int], str]]:
    """A device's (dtype, shape, backend) points, in config order."""
    return [
        (dtype.name, list(shape), backend)
        for dtype in dev.dtypes
        for shape in dev.shapes
        for backend in dev.backends
    ]


def pending_record(name: str, dev: Any) -> Record:
    """A never-measured device's results: a row per point, with no numbers."""
    rows = [
        empty(name, dtype, shape, "pending", "never measured", backend)
        for dtype, shape, backend in points(dev)
    ]
    return record(name, "pending", rows=[asdict(row) for row in rows])


def record(name: str, status: str, **extra: Any) -> Record:
    """A measuring stage's record, in this code's schema version (`extra`: its other fields)."""
    return cast(Record, {"schema": SCHEMA_VERSION, "device": name, "status": status, **extra})


def sweep_record(name: str, sweep: str, status: str, **extra: Any) -> Record:
    """A device's sweep record; a pending or `none` sweep has no rows."""
    return record(name, status, sweep=sweep, **({"rows": []} | extra))


def knobs_record(name: str, knobs: str, status: str, **extra: Any) -> Record:
    """A device's knobs record; pending or `none` knobs have no rows."""
    return record(name, status, knobs=knobs, **({"rows": []} | extra))


def on_record(
    name: str, records: Mapping[str, Record | None], pending: Mapping[str, str]
) -> Fingerprint:
    """The fingerprint of what is on record: the hardware and torch a measured results.json
    was measured under, with each stage's key from its own record (`records`: stage -> its
    record as read, None when absent), else "never measured" with `pending`'s keys. A record
    in a state this code does not know (from a newer version, or damaged) is refused: taking
    it for never measured would overwrite it."""
    for stage, record in records.items():
        if record is not None:
            check_version(record, RECORDS[stage](name))
    results = records["benchmark"]
    status = results.get("status") if isinstance(results, dict) else None
    if results is not None and status not in KNOWN:
        path = results_path(name)
        raise RecordError(
            f"{path}: status {status!r}; allowed: {', '.join(KNOWN)}. It may come from a newer "
            "version of this lab, or be damaged; nothing was measured or overwritten. Update "
            f"this checkout (`git pull`), or restore it (`uv run dvc checkout --force {path}`)"
        )
    if status == LOST:
        return lost_fingerprint(name)
    if status != "measured":
        return never_measured(name, pending)
    # A record from before fingerprints travelled inside results names the same facts.
    was = results.get("fingerprint") or {
        "hardware": results["hardware"],
        "torch": results.get("run", {}).get("versions", {}).get("torch", ""),
    }
    measures = {stage: recorded_key(records.get(stage), stage) for stage in STAGE_SETTINGS}
    return fingerprint(name, was["hardware"], was["torch"], measures)


def probe_decision(
    name: str,
    record: Fingerprint,
    here: Identity | None,
    fresh: Fingerprint | None,
    replace: bool = False,
    claimed: Fingerprint | None = None,
) -> tuple[Fingerprint | None, str]:
    """(fingerprint to write, what happened, for the log).

    `record` is what is on record (on_record); `here` the identity of the device on this
    machine (None when absent); `fresh` the fingerprint this machine would write; `replace`
    takes the device over from other hardware; `claimed` the fingerprint file as it is (a
    `--replace`, or a run here that failed, left this machine's claim in it)."""
    never = record["status"] in (NEVER, LOST)  # nothing on record to keep for the hardware
    if replace:
        if here is None:
            raise RecordError(f"{name}: cannot replace its hardware from a machine without it")
        if never:
            return fresh, f"{name}: nothing on record to replace: the next `dvc repro` measures it"
        if same_machine(record["hardware"], here):
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
        if record["status"] == LOST:
            return record, f"{name}: not on this machine; recorded as lost"
        if never:
            return record, f"{name}: not on this machine, never measured: pending"
        return (
            record,
            f"{name}: not on this machine; keeping results from {describe(record['hardware'])}",
        )
    if never or record["hardware"] == here:
        return fresh, f"{name}: here ({describe(here)})"
    if same_machine(record["hardware"], here):  # run with other cores: measured as it runs now
        return fresh, (
            f"{name}: here ({describe(here)}); its results were measured with "
            f"{usable(record['hardware'])} cores usable: measuring it with {usable(here)}"
        )
    if claimed and claimed.get("hardware") == here:  # taken over with --replace, not measured yet
        return fresh, (
            f"{name}: here ({describe(here)}), taken over from {describe(record['hardware'])}: "
            "measuring it"
        )
    this, that = describe_apart(here, record["hardware"])
    return record, (
        f"{name}: this machine has {this} but the results on record were measured on "
        f"{that}; keeping them. To measure this machine instead: "
        f"`uv run python -m stages.probe {name} --replace` then `uv run dvc repro` "
        "(docs/several-machines.md: replacing a device's hardware)."
    )


def usable(identity: Identity) -> int:
    return identity.get("usable_cores") or identity["logical_cores"]


class Decision(NamedTuple):
    """What a measuring stage does here: "pending", "measure" or "keep" (the record as it is,
    and `why`); the device's part of this machine and its identity; the fingerprint."""

    action: str
    found: Found | None
    here: Identity | None
    fingerprint: Fingerprint
    why: str = ""


def measured_under_this(name: str, stage: str, recorded: Fingerprint) -> bool:
    """Whether dvc.lock says the stage's output was measured under this very fingerprint."""
    locked = locked_fingerprint(name, stage)
    return locked == fingerprint_values(recorded, stage)


def only_the_cache_changed(name: str, stage: str, output: Path, recorded: Fingerprint) -> bool:
    """Whether the output is the one dvc.lock records, measured under this very fingerprint,
    and DVC's cache lacks it (a deleted cache): re-measuring it would gain nothing."""
    md5 = locked_md5(name, stage, output)
    return bool(
        measured_under_this(name, stage, recorded)
        and md5
        and output.exists()
        and md5_of(output) == md5
        and not in_cache(md5)
    )


def edited(name: str, output: Path, why: str, then: str = "") -> RecordError:
    return RecordError(
        f"{name}: {output} is not the file dvc.lock records (it was edited or corrupted here); "
        f"{why}. Restore it: `uv run dvc checkout --force {output}`{then}"
    )


def kept(name: str, stage: str, output: Path, recorded: Fingerprint, here: Identity | None) -> str:
    """Why a stage of a device measured elsewhere keeps its record; raises RecordError where
    the record on disk is not the one on record."""
    that = describe(recorded["hardware"])
    if not output.exists():
        raise missing(name, output, record_location(name, stage, output), that)
    if differs_from_lock(name, stage, output):
        raise edited(name, output, f"this machine cannot re-measure it: it was measured on {that}")
    where = (
        f"this machine has {describe_apart(here, recorded['hardware'])[0]}"
        if here
        else "not on this machine"
    )
    return f"{name}: {where}; keeping its {stage} record, measured on {that}"


def decide(name: str, dev: Any, stage: str, output: Path) -> Decision:
    """For a measuring stage writing `output`; raises RecordError when it must not run here."""
    recorded = read_json(fingerprint_path(name))
    if recorded["status"] == NEVER:  # pending, whatever is here: no need to look
        return Decision("pending", None, None, recorded)
    if recorded["status"] == LOST:  # the lost records stand until a machine with it measures
        return Decision("keep", None, None, recorded, f"{name}: recorded as lost; kept so")
    found, here = locate(dev, live_hardware(BOOT_CACHE))
    if here is None or recorded["hardware"] != here:
        if not output.exists() and not locked_md5(name, stage, output):
            # Measured elsewhere without this stage (its code came later): nothing to keep.
            return Decision("pending", found, here, recorded)
        if output.exists() and read_json(output).get("status") == LOST:  # `probe --lost`
            return Decision("keep", found, here, recorded, f"{name}: its {stage} record is lost")
        return Decision("keep", found, here, recorded, kept(name, stage, output, recorded, here))
    if differs_from_lock(name, stage, output) and measured_under_this(name, stage, recorded):
        raise edited(
            name,
            output,
            "nothing it was measured under changed, so nothing was measured or overwritten",
            f" (then `uv run dvc repro --force {device_dir(name)}/dvc.yaml` measures it again)",
        )
    if only_the_cache_changed(name, stage, output, recorded):
        why = (
            f"{name}: {output} is the one dvc.lock records, measured under this fingerprint; "
            "only DVC's cache lacked it: kept, not re-measured (`uv run dvc pull` restores the "
            "cache of other devices' records)"
        )
        return Decision("keep", found, here, recorded, why)
    return Decision("measure", found, here, recorded)


def own_only(name: str, fingerprint: Fingerprint) -> tuple[Record, list[str]] | None:
    """The device's results and the backends of your own to measure again, where only their
    files changed since those results were measured on this hardware and torch (keys.own_changed);
    None where every point is measured again."""
    path = results_path(name)
    if not path.exists() or differs_from_lock(name, "benchmark", path):
        return None
    previous = read_json(path)
    was = previous.get("fingerprint") or {}
    if previous.get("status") != "measured" or previous.get("schema") != SCHEMA_VERSION:
        return None
    if (was.get("hardware"), was.get("torch")) != (fingerprint["hardware"], fingerprint["torch"]):
        return None
    now = fingerprint["measures"]["benchmark"]
    backends = (
        own_changed(recorded_key(previous, "benchmark"), now) if isinstance(now, dict) else None
    )
    return (previous, backends) if backends else None


def lost_records(name: str) -> dict[Path, Record]:
    """For `probe --lost`: a "lost" record for each of the device's records that dvc.lock names,
    this workspace lacks, and neither DVC's cache nor the remote has; raises RecordError naming
    where one is, where it is somewhere."""
    out = {}
    for stage, where in RECORDS.items():
        path = where(name)
        md5 = locked_md5(name, stage, path)
        if path.exists() or not md5:
            continue
        if (found := data_location(md5)) != "nowhere":
            raise missing(name, path, found)
        out[path] = record(name, LOST, rows=[], lost={"md5": md5, "stage": stage})
    if not out:
        raise RecordError(f"{name}: nothing of it is lost: every record dvc.lock names is here")
    return out
