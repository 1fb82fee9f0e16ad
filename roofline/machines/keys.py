"""A key per measuring stage of a device: what it was measured by, as hashes.

The key hashes what roofline/core/depends.py declares: the lab's code the stage runs
("code"), the settings it is measured under ("params") and, for the benchmark, each backend of
your own ("own": one hash per backend). DVC re-runs a device's stage when its key in the
device's fingerprint changes. The probe writes new keys only on a machine that has the device;
elsewhere the fingerprint keeps the keys its records were measured by. So a change of code
stales only the devices this machine can measure. The aggregate compares each record's keys
with today's, and the report marks a device measured by older code or params."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.core.code import digest, files_digest, stats
from roofline.core.depends import (
    STAGE_SETTINGS,
    installed_version,
    lab_files,
    own_backends,
    own_code,
    settings,
)
from roofline.core.files import keep_cache

if TYPE_CHECKING:  # types only: the probe imports this module on every `dvc repro`
    from roofline.configuration.params import Params
    from roofline.machines.record_types import Fingerprint, Record, StageKey

UNRECORDED = "unrecorded"  # a record from before keys were recorded
# The lab's code keys as last computed, with the size and mtime of every lab file: parsing the
# code on every probe would cost more than the rest of its work.
CODE_CACHE = Path(".dvc/tmp/code-keys.json")


def fingerprint_params(stage: str) -> list[str]:
    """What DVC reads of a device's fingerprint as a measuring stage's params: all it is
    measured under (roofline/machines/pipeline.py)."""
    return ["status", "hardware", "torch", f"measures.{stage}"]


def fingerprint_values(fingerprint: Fingerprint, stage: str) -> dict[str, object]:
    """What a stage's dvc.lock records of the fingerprint it ran under (its params)."""
    return {
        key: (fingerprint.get("measures") or {}).get(stage)
        if key.startswith("measures.")
        else fingerprint.get(key)
        for key in fingerprint_params(stage)
    }


def code_key(stage: str, root: Path = Path(".")) -> str:
    """The hash of the lab's files that the stage runs."""
    from roofline.core.depends import lab_code  # parses the code: only where the cache is stale

    return files_digest(lab_code(stage, root), root)


def code_keys(root: Path = Path(".")) -> dict[str, str]:
    """Each measuring stage's code key, kept in CODE_CACHE while no lab file changes."""
    signature = stats(lab_files(root), root)
    cache = root / CODE_CACHE
    try:
        kept = json.loads(cache.read_text(encoding="utf-8"))
        if kept["signature"] == signature:
            return kept["keys"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet, or unreadable: computed afresh
    keys = {stage: code_key(stage, root) for stage in STAGE_SETTINGS}
    keep_cache(cache, {"signature": signature, "keys": keys})
    return keys


def own_keys(params: Params, name: str, stage: str, root: Path = Path(".")) -> dict[str, str]:
    """Each backend of your own that the stage runs -> the hash of its files (for a module
    installed as a package, of its distribution's version)."""
    keys = {}
    for backend in own_backends(params, name, stage):
        files = own_code(backend, root)
        keys[backend] = (
            files_digest(files, root) if files else digest(installed_version(backend).encode())
        )
    return keys


def schema_defaults() -> dict[str, object]:
    """Each settings section of the schema, and a device's, at its defaults (depends.settings)."""
    from roofline.configuration.measuring_config import Config, DeviceConfig  # omegaconf: slow

    defaults = Config()
    return {
        "bench": defaults.bench,
        "sweep": defaults.sweep,
        "knobs": defaults.knobs,
        "device": DeviceConfig(),
    }


def stage_key(
    params: Params,
    name: str,
    stage: str,
    root: Path = Path("."),
    environment: Mapping[str, str] | None = None,
) -> StageKey:
    """What a measurement of this stage of the device, made now, depends on, as hashes
    (`environment`: a record's variables in place of this process's; depends.settings)."""
    measured_under = settings(params, name, stage, schema_defaults(), environment)
    text = json.dumps(measured_under, sort_keys=True, default=str)
    key: StageKey = {"code": code_keys(root)[stage], "params": digest(text.encode())}
    if own := own_keys(params, name, stage, root):
        key["own"] = own
    return key


def measuring_keys(params: Params, name: str, root: Path = Path(".")) -> dict[str, StageKey]:
    return {stage: stage_key(params, name, stage, root) for stage in STAGE_SETTINGS}


def pending_keys(params: Params, name: str) -> dict[str, str]:
    """A never-measured device's keys: its pending rows change with its points only."""
    dev = params["devices"][name]
    points = json.dumps([dev.get(key) for key in ("dtypes", "shapes", "backends")], default=str)
    named = {stage: str((params.get(stage) or {}).get("name")) for stage in ("sweep", "knobs")}
    return {"benchmark": digest(points.encode())} | {
        s: digest(n.encode()) for s, n in named.items()
    }


def recorded_key(record: Record | None, stage: str) -> StageKey | str:
    """The key a stage's record was measured by (UNRECORDED for one from before keys)."""
    if not isinstance(record, dict):
        return UNRECORDED
    if record.get("status") == "lost":  # `probe --lost` wrote it: its stage keeps it so
        return "lost"
    return (record.get("fingerprint") or {}).get("measures", {}).get(stage, UNRECORDED)


def older(record: Record, stage: str, current: StageKey) -> list[str]:
    """What of the stage's current key differs from the record's: "code" (the lab's, or a
    kernel of yours), "params", or both."""
    was = recorded_key(record, stage)
    if not isinstance(was, dict):
        return ["code", "params"]
    code = was.get("code") != current["code"] or was.get("own", {}) != current.get("own", {})
    return ["code"] * code + ["params"] * (was.get("params") != current["params"])


def own_changed(was: StageKey | str, now: StageKey) -> list[str] | None:
    """The backends of your own to measure again when only they changed since `was`: their
    rows alone are re-measured. None where anything else changed (the lab's code, a
    setting, the list of backends): then every point is."""
    if not isinstance(was, dict) or (was.get("code"), was.get("params")) != (
        now["code"],
        now["params"],
    ):
        return None
    before, after = was.get("own", {}), now.get("own", {})
    if before.keys() != after.keys():
        return None
    return [backend for backend in after if before[backend] != after[backend]] or None


def outdated(
    records: Mapping[str, Record | None], params: Params, name: str
) -> dict[str, list[str]]:
    """For each measured record of a device (stage -> record), what of the code and params that
    measured it differs from today's; stages measured by today's, or that ran nothing, are left
    out."""
    out = {}
    for stage, record in records.items():
        # A record that ran something (a `none` sweep or knobs measured nothing to be older).
        measured = isinstance(record, dict) and record.get("status") == "measured"
        if not (measured and record.get("run")):
            continue
        # Its variables are the measuring machine's, not this one's: compared under its own, so
        # another machine's OMP_NUM_THREADS never makes a record look older.
        environment = record["run"].get("environment") or {}
        if parts := older(record, stage, stage_key(params, name, stage, environment=environment)):
            out[stage] = parts
    return out
