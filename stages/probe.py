"""Stage probe: record which hardware a device's next measurement is for.

Runs on every `dvc repro` (always_changed). When the device is here (and nothing, or the same
hardware, is on record) it writes this machine's fingerprint; otherwise the fingerprint of what
is on record (results.json), so a run that probed and then failed leaves no claim behind. Its
output only changes when the hardware, the torch build or the record does, so an unchanged
machine re-measures nothing."""

import argparse

from roofline.errors import ConfigError, RecordError
from roofline.hardware import BOOT_CACHE, live_hardware, locate, torch_version, unmatched_gpus
from roofline.params import probe_devices
from roofline.paths import fingerprint_path, results_path
from roofline.records import fingerprint, lock_records_results, on_record, probe_decision
from roofline.schema import read_json, write_json_atomic
from stages import run


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
        "--dry-run",
        action="store_true",
        help="say what the probe decides for this machine, and write nothing",
    )
    args = parser.parse_args(argv)
    name = args.device
    devices = probe_devices()  # kind and recognise only: no schema to build on every run
    if name not in devices:
        raise ConfigError(f"unknown device {name!r}; allowed: {', '.join(devices)}")
    dev = devices[name]
    results = results_path(name)
    if not results.exists() and lock_records_results(name):
        raise RecordError(
            f"{name}: dvc.lock records results for it, but {results} is not in this workspace: "
            "run `uv run dvc pull` first (or `uv run dvc checkout --force` if they are in the "
            "cache)"
        )
    record = on_record(name, read_json(results) if results.exists() else None)
    hardware = live_hardware(BOOT_CACHE)
    _, here = locate(dev, hardware)
    fresh = fingerprint(name, here, torch_version()) if here else None
    path = fingerprint_path(name)
    claimed = read_json(path) if path.exists() else None
    new, message = probe_decision(name, record, here, fresh, args.replace, claimed)
    print(message)
    for gpu in unmatched_gpus(devices, hardware):
        print(
            f"note: GPU {gpu['name']!r} (sm_{gpu['compute_capability']}, {gpu['sm_count']} SMs) "
            "matches no device file; to measure it, add conf/device/<name>.yaml (see README: "
            "adding a device)"
        )
    if args.dry_run:
        print("(dry run: nothing written)")
    elif new != claimed:
        write_json_atomic(path, new)


if __name__ == "__main__":
    run(main)
