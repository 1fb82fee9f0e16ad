"""Stage probe: record which hardware a device is, when it is on this machine.

Runs on every `dvc repro` (always_changed); its output only changes when the hardware or the
torch build does, so an unchanged machine re-measures nothing."""

import argparse
import sys
from importlib.metadata import version

from roofline.config import device_config, load_params
from roofline.hardware import live_hardware, locate, unmatched_gpus
from roofline.paths import fingerprint_path
from roofline.records import fingerprint, lock_records_fingerprint, probe_decision
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
    cfg = load_params()
    dev = device_config(cfg, name)
    path = fingerprint_path(name)
    recorded = read_json(path) if path.exists() else None
    if recorded is None and lock_records_fingerprint(name):
        sys.exit(
            f"{name}: dvc.lock records results for it, but {path} is not in this workspace: "
            "run `uv run dvc pull` first (or `uv run dvc checkout` if they are in the cache)"
        )
    hardware = live_hardware()
    _, here = locate(dev, hardware)
    fresh = fingerprint(name, here, version("torch")) if here else None
    new, message = probe_decision(name, recorded, here, fresh, args.replace)
    print(message)
    for gpu in unmatched_gpus(cfg.devices, hardware):
        print(
            f"note: GPU {gpu['name']!r} (sm_{gpu['compute_capability']}, {gpu['sm_count']} SMs) "
            "matches no device file; to measure it, add conf/device/<name>.yaml (see README: "
            "adding a device)"
        )
    if args.dry_run:
        print("(dry run: nothing written)")
    elif new is not None and new != recorded:
        write_json_atomic(path, new)


if __name__ == "__main__":
    run(main)
