"""What a measurement was measured by, as a key per measuring stage: a hash of the code the
stage runs and one of the params it reads. DVC re-runs a device's measuring stage when its key
in the device's fingerprint changes, and the probe writes new keys only on a machine that has
the device: elsewhere the fingerprint carries the keys its records were measured by, so a
change of measuring code stales the devices this machine can measure and no other. The
aggregate stage compares a record's keys with the current ones, and the report shows a device
measured by older code or params as such."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.configuration.params import MEASURING_KEYS, STAGE_PARAMS, Params
from roofline.core.files import keep_cache
from roofline.machines.code import stats

if TYPE_CHECKING:  # types only: the probe imports this module on every `dvc repro`
    from roofline.machines.record_types import Fingerprint, Record, StageKey

UNRECORDED = "unrecorded"  # a record from before keys were recorded
# The code keys as last computed, with the size and mtime of every file of ours they came from:
# a probe runs on every `dvc repro`, and parsing the code each time would cost it more than
# the rest of its work.
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


def stage_params(params: Params, name: str, stage: str) -> dict[str, object]:
    """The params a device's measuring stage reads: its top-level ones and the device's keys
    (dotted name -> its value as params.yaml holds it; only hashed)."""
    dev = params["devices"][name]
    return {key: params.get(key) for key in STAGE_PARAMS[stage]} | {
        f"devices.{name}": {key: dev.get(key) for key in MEASURING_KEYS}
    }


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def code_key(stage: str, root: Path = Path(".")) -> str:
    """The hash of every file of ours that the stage runs, by path and content."""
    from roofline.machines.code import code_deps  # parses the code: only where the cache is stale

    files = code_deps(f"stages.{stage}", root)
    # The same on every system: paths with "/", lines ending in "\n" (a Windows checkout's
    # CRLF files are the same code).
    return digest(
        b"".join(
            Path(f).as_posix().encode() + b"\0" + (root / f).read_bytes().replace(b"\r\n", b"\n")
            for f in files
        )
    )


def code_keys(root: Path = Path(".")) -> dict[str, str]:
    """Each measuring stage's code key, kept in CODE_CACHE while no file of ours changes."""
    from roofline.machines.code import OUR_PACKAGES

    files = sorted(
        p.relative_to(root) for part in OUR_PACKAGES for p in (root / part).rglob("*.py")
    )
    signature = stats(files, root)
    cache = root / CODE_CACHE
    try:
        kept = json.loads(cache.read_text(encoding="utf-8"))
        if kept["signature"] == signature:
            return kept["keys"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet, or unreadable: computed afresh
    keys = {stage: code_key(stage, root) for stage in STAGE_PARAMS}
    keep_cache(cache, {"signature": signature, "keys": keys})
    return keys


def stage_key(params: Params, name: str, stage: str, root: Path = Path(".")) -> StageKey:
    """{code, params}: what a measurement of this stage of the device, made now, depends on."""
    text = json.dumps(stage_params(params, name, stage), sort_keys=True, default=str)
    return {"code": code_keys(root)[stage], "params": digest(text.encode())}


def measuring_keys(params: Params, name: str, root: Path = Path(".")) -> dict[str, StageKey]:
    return {stage: stage_key(params, name, stage, root) for stage in STAGE_PARAMS}


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
    """What of the stage's current key differs from the record's: "code", "params", or both."""
    was = recorded_key(record, stage)
    if not isinstance(was, dict):
        return ["code", "params"]
    return [part for part in ("code", "params") if was.get(part) != current[part]]


def outdated(
    records: Mapping[str, Record | None], params: Params, name: str
) -> dict[str, list[str]]:
    """For each measured record of a device (stage -> record), what of the code and params that
    measured it differs from today's; stages measured by today's, or that ran nothing, are left
    out."""
    current = measuring_keys(params, name)
    out = {}
    for stage, record in records.items():
        # A record that ran something (a `none` sweep or knobs measured nothing to be older).
        measured = isinstance(record, dict) and record.get("status") == "measured"
        measured = measured and bool(record.get("run"))
        if measured and (parts := older(record, stage, current[stage])):
            out[stage] = parts
    return out
