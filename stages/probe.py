"""Stage probe: record which hardware a device's next measurement is for.

Runs on every `dvc repro` (always_changed). When the device is here (and nothing, or the same
hardware, is on record) it writes this machine's fingerprint, with the keys of the code and
params that would measure it now; otherwise the fingerprint of what is on record, the keys its
records were measured by included, so a run that probed and then failed leaves no claim behind
and a change of measuring code stales no device measured elsewhere. Its output only changes
when the hardware, the torch build, the measuring code or params, or the record do.

It depends on no code of its own in dvc.yaml: it runs every time anyway, and its lock entry
must not change on a machine that only keeps another machine's record."""

import argparse
from pathlib import Path
from typing import Any

from roofline.errors import ConfigError, RecordError
from roofline.hardware import BOOT_CACHE, live_hardware, locate, torch_version, unmatched_gpus
from roofline.keys import measuring_keys, pending_keys
from roofline.params import probe_devices, read_params
from roofline.paths import RECORDS, fingerprint_path, results_path
from roofline.records import (
    fingerprint,
    lock_records_results,
    lost_records,
    missing,
    on_record,
    probe_decision,
    record_location,
)
from roofline.schema import json_text, read_json, write_json_atomic, write_texts_atomic
from stages import run


def read_if_there(path: Path) -> Any:
    return read_json(path) if path.exists() else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("device", help="a device name from params.yaml (devices.<name>)")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="record this machine's hardware for the device even though other "
        "hardware is on record (a new laptop); the next `dvc repro` re-measures it",
    )
    parser.add_argument(
        "--lost",
        action="store_true",
        help="on a machine without the device: record its results as lost, when they are in "
        "neither this workspace, DVC's cache nor the remote, so the rest renders",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say what the probe decides for this machine, and write nothing",
    )
    args = parser.parse_args(argv)
    name = args.device
    params = read_params()
    devices = probe_devices(params=params)  # kind and recognise checked: no schema to build
    if name not in devices:
        raise ConfigError(f"unknown device {name!r}; allowed: {', '.join(devices)}")
    dev = devices[name]
    hardware = live_hardware(BOOT_CACHE)
    _, here = locate(dev, hardware)
    path = fingerprint_path(name)
    claimed = read_if_there(path)
    fresh = fingerprint(name, here, torch_version(), measuring_keys(params, name)) if here else None
    results = results_path(name)
    on_disk = {stage: read_if_there(at(name)) for stage, at in RECORDS.items()}
    if args.lost:
        if here is not None:
            raise RecordError(
                f"{name}: this machine has it: plain `uv run dvc repro` measures it afresh"
            )
        lost = lost_records(name)  # refuses unless each is nowhere to be found
        if not args.dry_run:
            write_texts_atomic({at: json_text(record) for at, record in lost.items()})
        on_disk |= {stage: lost[at(name)] for stage, at in RECORDS.items() if at(name) in lost}
        new = on_record(name, on_disk, pending_keys(params, name))
        message = (
            f"{name}: recorded as lost ({', '.join(map(str, lost))}); `uv run dvc repro` "
            "renders the rest"
        )
    elif not results.exists() and lock_records_results(name):
        where = record_location(name, "benchmark", results)
        if here is None or where in ("cache", "remote"):
            raise missing(name, results, where)
        # Nowhere, or a remote that cannot be asked: the device is here, so nothing is lost
        # by measuring it afresh (a pulled record would be superseded anyway).
        new = fresh
        gone = "lost (in neither this workspace, DVC's cache nor the remote)"
        if where != "nowhere":
            gone = f"in neither this workspace nor DVC's cache, and the remote's are {where}"
        message = f"{name}: here; the results dvc.lock records are {gone}: measuring it afresh"
    else:
        record = on_record(name, on_disk, pending_keys(params, name))
        new, message = probe_decision(name, record, here, fresh, args.replace, claimed)
    print(message)
    for gpu in unmatched_gpus(devices, hardware):
        print(
            f"note: GPU {gpu['name']!r} (sm_{gpu['compute_capability']}, {gpu['sm_count']} SMs) "
            "matches no device file; to measure it, add conf/device/<name>.yaml (see "
            "docs/configuration.md: adding a device)"
        )
    if args.dry_run:
        print("(dry run: nothing written)")
    elif new != claimed:
        write_json_atomic(path, new)


if __name__ == "__main__":
    run(main)
