"""A pod's hand-back: its device's dvc.lock and results.json.

The pod leaves them on the DVC remote under its launch's run id, and the launcher
(roofline.cloud) fetches them from there. Each file is checked before it is used. A malformed
one is that pod's problem, named; it never ends the launcher or another pod's hand-back."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from roofline.core.depends import STAGE_SETTINGS
from roofline.core.errors import ConfigError
from roofline.core.paths import device_dir, fingerprint_path, posix, results_path
from roofline.machines.keys import fingerprint_values

if TYPE_CHECKING:
    from dvc.data_cloud import Remote

HANDED_BACK = ("dvc.lock", "results.json")
HANDBACK_FOLDER = "roofline-handback"
# A run id is joined into a path on the remote: a plain name, never `..` or a separator.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def checked_run_id(run_id: str) -> str:
    if not RUN_ID.fullmatch(run_id) or ".." in run_id:
        raise ConfigError(
            f"run id {run_id!r} is not a plain name (letters, digits, '_', '.', '-'; no '..'): "
            "it names a folder on the DVC remote"
        )
    return run_id


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def lock_md5s(lock: dict[str, Any], stage: str, kind: Literal["deps", "outs"]) -> dict[str, Any]:
    entries = lock.get("stages", {}).get(stage, {}).get(kind, [])
    return {entry["path"]: entry.get("md5") for entry in entries if isinstance(entry, dict)}


def parsed(lock_bytes: bytes, results: bytes) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """The handed-back lock and results as mappings, or what is wrong with them."""
    try:
        lock = yaml.safe_load(lock_bytes.decode("utf-8"))
    except UnicodeDecodeError as err:
        return f"its dvc.lock is not UTF-8 text ({err.reason} at byte {err.start})"
    except yaml.YAMLError as err:
        return f"its dvc.lock is not YAML ({str(err).splitlines()[0]})"
    if not isinstance(lock, dict) or not isinstance(lock.get("stages", {}), dict):
        return f"its dvc.lock is not a DVC lock file (a {type(lock).__name__}, not stages)"
    try:
        record = json.loads(results)
    except (UnicodeDecodeError, ValueError) as err:
        return f"its results.json is not JSON ({err})"
    if not isinstance(record, dict):
        return f"its results.json is not a results record (a JSON {type(record).__name__})"
    return lock, record


def handback_problem(
    name: str, lock_bytes: bytes | str | None, results: bytes | None
) -> str | None:
    """Why a pod's dvc.lock must not be handed back (its run did not measure the device, or
    what it left is malformed), or None when it records a finished measurement of it."""
    if isinstance(lock_bytes, str):
        lock_bytes = lock_bytes.encode()
    if lock_bytes is None or results is None:
        left = [f for f, data in zip(HANDED_BACK, (lock_bytes, results), strict=True) if data]
        if left:
            return f"the pod handed back {left[0]}, not both, for it (its run failed midway)"
        return "the pod handed back no dvc.lock or results.json for it (its run failed early)"
    found = parsed(lock_bytes, results)
    if isinstance(found, str):
        return found
    lock, record = found
    if record.get("status") != "measured":
        return (
            f"its results are {record.get('status')}: the pod's probe did not find {name} "
            "(its log says which GPU it saw)"
        )
    measured_under = record.get("fingerprint") or {}
    for stage in STAGE_SETTINGS:  # each ran under the fingerprint the results were measured under
        ran = lock["stages"].get(stage)
        params = ran.get("params", {}) if isinstance(ran, dict) else {}
        if params.get(posix(fingerprint_path(name))) != fingerprint_values(measured_under, stage):
            return f"its {stage} did not finish after the probe (a failed or interrupted run)"
    if lock_md5s(lock, "benchmark", "outs").get(posix(results_path(name))) != md5(results):
        return "its results.json is not the one its dvc.lock records"
    return None


def handback_path(remote: Remote, run_id: str, file: str) -> str:
    return remote.fs.join(remote.path, HANDBACK_FOLDER, checked_run_id(run_id), file)


def hand_back(name: str, run_id: str, remote: Remote, root: Path = Path(".")) -> list[str]:
    """On the pod: leave the device's dvc.lock and results.json (of the checkout at `root`) on
    the DVC remote, under this launch's run id, for the launcher to fetch; the files left."""
    remote.fs.makedirs(remote.fs.join(remote.path, HANDBACK_FOLDER, checked_run_id(run_id)))
    left = []
    for file in HANDED_BACK:
        path = root / device_dir(name) / file
        if path.exists():
            remote.fs.pipe_file(handback_path(remote, run_id, file), path.read_bytes())
            left.append(file)
    return left


def fetch_handed_back(run_id: str, remote: Remote) -> dict[str, bytes | None]:
    """What a pod left under its run id (None for a file it did not leave)."""
    found: dict[str, bytes | None] = {}
    for file in HANDED_BACK:
        try:
            found[file] = remote.fs.cat_file(handback_path(remote, run_id, file))
        except FileNotFoundError:
            found[file] = None
    return found
