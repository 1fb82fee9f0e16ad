"""Measure a device on a rented pod through SkyPilot (cloud/<device>.yaml, generated from its
conf file), after saying what it should cost, and hand the device's dvc.lock back for you to
commit, only when the pod measured the device.

    uv run --group cloud python -m roofline.cloud h100 [--minutes 30] [--dry-run]

SkyPilot picks the cheapest cloud it has credentials for (`sky check`); the pod pulls the
recorded results, runs `dvc repro` (which measures only its GPU) and pushes to the DVC remote.
The DVC remote's keys go to the pod as SkyPilot secrets, from AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY in your shell; nothing is written to disk on the way."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml

from roofline.configuration.config import device_config, to_plain
from roofline.configuration.params import STAGE_PARAMS
from roofline.core.errors import ConfigError, RooflineError, run
from roofline.core.paths import device_dir, fingerprint_path, results_path
from roofline.interpretation.datasheets import judged
from roofline.interpretation.lab_schema import load_lab_params
from roofline.machines.keys import fingerprint_values
from roofline.machines.pipeline import SECRETS, task_path

if TYPE_CHECKING:  # the several-machines rules' imports: not for the cost line and --help
    from roofline.machines.records import LockFile

# What the launcher fetches from the pod: the device's lock and the results it records.
HANDED_BACK = ("dvc.lock", "results.json")


def expected_cost(cost_per_hour: float | None, minutes: float) -> str:
    if cost_per_hour is None:
        return "unknown: no cost_per_hour in its conf/device datasheet; SkyPilot's table shows the price"
    return f"about ${cost_per_hour * minutes / 60:.2f} ({minutes:g} min at ${cost_per_hour:g}/h, conf/device)"


def cluster(name: str) -> str:
    return f"roofline-{name}"


def commands(name: str, fetched: Path) -> list[list[str]]:
    """Launch the pod, fetch what it would hand back into `fetched`, take it down."""
    secrets = [arg for secret in SECRETS for arg in ("--secret", secret)]
    remote = [f"{cluster(name)}:sky_workdir/{device_dir(name)}/{file}" for file in HANDED_BACK]
    return [
        ["sky", "launch", "-c", cluster(name), str(task_path(name)), *secrets],
        ["rsync", "-a", *remote, f"{fetched}/"],  # SkyPilot sets up ssh to the cluster
        ["sky", "down", "-y", cluster(name)],
    ]


def missing_before_launch(environ: dict[str, str], default_remote: str | None) -> list[str]:
    """What the pod will need and this machine cannot give it (checked before renting)."""
    missing = [
        f"{secret} is not set in this shell (the pod pushes its results with it)"
        for secret in SECRETS
        if not environ.get(secret)
    ]
    if not default_remote:
        missing.append(
            "no default DVC remote is set in .dvc/config (the pod pushes its results there): "
            "`uv run dvc remote add -d NAME URL`, then commit .dvc/config"
        )
    return missing


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def lock_md5s(lock: LockFile, stage: str, kind: Literal["deps", "outs"]) -> dict[str, str | None]:
    entries = lock.get("stages", {}).get(stage, {}).get(kind, [])
    return {entry["path"]: entry.get("md5") for entry in entries}


def handback_problem(name: str, lock_text: str | None, results: bytes | None) -> str | None:
    """Why a pod's dvc.lock must not be handed back (its run did not measure the device), or
    None when it records a finished measurement of it."""
    if lock_text is None or results is None:
        return "the pod wrote no dvc.lock or results.json for it (its run failed early)"
    record = json.loads(results)
    if record.get("status") != "measured":
        return (
            f"its results are {record.get('status')}: the pod's probe did not find {name} "
            "(its log says which GPU it saw)"
        )
    lock = yaml.safe_load(lock_text) or {}
    measured_under = record.get("fingerprint") or {}
    for stage in STAGE_PARAMS:  # each ran under the fingerprint the results were measured under
        params = lock.get("stages", {}).get(stage, {}).get("params", {})
        if params.get(str(fingerprint_path(name))) != fingerprint_values(measured_under, stage):
            return f"its {stage} did not finish after the probe (a failed or interrupted run)"
    if lock_md5s(lock, "benchmark", "outs").get(str(results_path(name))) != md5(results):
        return "its results.json is not the one its dvc.lock records"
    return None


def say_and_run(command: list[str], dry_run: bool) -> None:
    print(f"$ {shlex.join(command)}", flush=True)
    if not dry_run:
        subprocess.run(command, check=True)


def read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("device", help="a GPU device with a cloud/<device>.yaml")
    parser.add_argument(
        "--minutes", type=float, default=30, help="expected time on the pod (default 30)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the cost and the commands only"
    )
    args = parser.parse_args(argv)
    name = args.device
    # Priced as the lab's SKU, the device's first datasheet line: the pod may get another.
    dev = judged(name, to_plain(device_config(load_lab_params(), name)), None)
    if not task_path(name).exists():
        known = ", ".join(sorted(p.stem for p in task_path(name).parent.glob("*.yaml")))
        raise ConfigError(
            f"no {task_path(name)}; task files exist for: {known} (a GPU device gets one "
            "from its sky_accelerators: `uv run python -m roofline.compose`)"
        )
    from dvc.repo import Repo  # here: the cost line and --help stay fast

    missing = missing_before_launch(dict(os.environ), Repo(".").config["core"].get("remote"))
    if missing and not args.dry_run:
        raise ConfigError("nothing was launched:\n  " + "\n  ".join(missing))
    for problem in missing:
        print(f"a launch would stop here: {problem}")
    print(
        f"{name} ({dev['sku']}): expected cost {expected_cost(dev['cost_per_hour'], args.minutes)}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        launch, fetch, down = commands(name, Path(tmp))
        try:
            for command in (launch, fetch):
                say_and_run(command, args.dry_run)
        except subprocess.CalledProcessError as err:
            raise RooflineError(
                f"`{shlex.join(err.cmd)}` failed ({err.returncode}); the pod was taken down, "
                "nothing was handed back and nothing here changed"
            ) from err
        finally:
            say_and_run(down, args.dry_run)  # never leave a pod billing
        if args.dry_run:
            return
        lock_bytes = read(Path(tmp, "dvc.lock"))
        problem = handback_problem(
            name, lock_bytes.decode() if lock_bytes else None, read(Path(tmp, "results.json"))
        )
        if problem:
            raise RooflineError(
                f"{name} was not measured on the pod: {problem}. Nothing was handed back and "
                "nothing here changed."
            )
        lock = device_dir(name) / "dvc.lock"
        shutil.copyfile(Path(tmp, "dvc.lock"), lock)
    print(
        f"{name} measured. Then: git add {lock} && git commit -m 'measure {name}' && "
        "uv run dvc pull && uv run dvc repro"
    )


if __name__ == "__main__":
    run(main)
