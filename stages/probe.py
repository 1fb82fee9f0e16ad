"""Stage probe: record which hardware each device's next measurement is for.

`python -m stages.probe` probes every device, in one process: the pipeline's one stage that
runs on every `dvc repro` (always_changed, experiments/x4-roofline/devices/dvc.yaml), which DVC
runs first, its keys file being aggregate's first dependency. For each device: when the device
is here (and nothing, or the same hardware, is on record) it writes this machine's fingerprint,
with the keys of the code and params that would measure it now; otherwise the fingerprint of
what is on record, the keys its records were measured by included, so a run that probed and
then failed leaves no claim behind and a change of measuring code stales no device measured
elsewhere. A fingerprint only changes when the hardware, the torch build, the measuring code or
params, or the record do. It also writes KEYS_FILE. All or none: a device it cannot decide for
stops it before it writes anything. When nothing it decides from has changed since the last
time (PROBE_CACHE), it says what it said then, without importing what decides.

`python -m stages.probe <name>` probes one device: its own pipeline's probe stage, which DVC
runs when the fingerprint file differs from what its dvc.lock records (the probe above rewrote
it) or when forced, and which decides as the probe above did; the device's dvc.lock records
the fingerprint. It depends on no code of its own in dvc.yaml, and its lock entry must not
change on a machine that only keeps another machine's record."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.core.errors import ConfigError, RecordError  # imported by `stages` anyway
from roofline.core.paths import EXPERIMENT, RECORDS, fingerprint_path, results_path
from stages import run

if TYPE_CHECKING:
    from roofline.configuration.params import Params, ProbeDevice
    from roofline.device.description import Hardware

# The keys every device would be measured by now ({device: {stage: {code, params}}}): the same
# on every machine with the same checkout. Aggregate's first dependency, so DVC runs the probe
# of every device before any device's stage (roofline/machines/pipeline.py).
KEYS_FILE = EXPERIMENT / "devices" / "keys.json"
# What the probe of every device said, and the state of all it decided from. It runs on every
# `dvc repro`: deciding took about 70 ms, most of it imports; answering from here, 36 ms
# (measured 2026-12, a 2-core VM: docs/development.md).
PROBE_CACHE = Path(".dvc/tmp/probe.json")
# Variables that change which hardware is here.
HARDWARE_VARIABLES = ("ROOFLINE_HARDWARE", "PYTHONPATH")


def read_if_there(path: Path) -> Any:
    from roofline.core.files import read_json

    return read_json(path) if path.exists() else None


def inputs(names: list[str]) -> list[Any]:
    """The state of all the probe of every device decides from: the size and mtime of every file
    it reads (params.yaml, each device's fingerprint and records, the keys file, the hardware
    description or its cache, our code), this boot's key (the CPUs this process may use, the
    torch installed: hardware.boot) and the variables that say which hardware is here."""
    from roofline.device.hardware import BOOT_CACHE, boot
    from roofline.machines.code import OUR_PACKAGES, stats  # cheap: the fast path's imports

    files = [
        Path("params.yaml"),
        KEYS_FILE,
        BOOT_CACHE,
    ]  # roofline.configuration.params imports yaml
    files += [at(name) for name in names for at in (fingerprint_path, *RECORDS.values())]
    files += [Path(v) for v in [os.environ.get(HARDWARE_VARIABLES[0])] if v]
    files += sorted(p for part in OUR_PACKAGES for p in Path(part).rglob("*.py"))
    return [stats(files), boot(), [os.environ.get(name) for name in HARDWARE_VARIABLES]]


def answered_from_cache() -> bool:
    """Say what the last probe of every device said, where nothing it decided from changed."""
    try:
        kept = json.loads(PROBE_CACHE.read_text(encoding="utf-8"))
        if kept["inputs"] != inputs(kept["devices"]):
            return False
        said = kept["said"]
        if not isinstance(said, list) or not all(isinstance(line, str) for line in said):
            raise TypeError("what it said is not a list of lines")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False  # none yet, or unreadable: decided afresh (and written whole again)
    print("\n".join(said))
    return True


def keep(names: list[str], before: list[Any], said: list[str]) -> None:
    """Keep what the probe said for the next run, where nothing changed while it decided (its
    own writes included: the run after them keeps it)."""
    from roofline.core.files import keep_cache

    if inputs(names) == before:
        keep_cache(PROBE_CACHE, {"devices": names, "inputs": before, "said": said})


def decide(
    name: str,
    dev: ProbeDevice,
    params: Params,
    hardware: Hardware,
    replace: bool = False,
    lost: bool = False,
) -> tuple[dict[Path, Any], str, bool]:
    """What the probe writes for a device ({path: record}, its fingerprint included), what it
    says, and whether it decided from files alone (not from DVC's cache or remote)."""
    from roofline.device.hardware import torch_version
    from roofline.machines.identity import locate
    from roofline.machines.keys import measuring_keys, pending_keys
    from roofline.machines.records import (
        fingerprint,
        lock_records_results,
        lost_records,
        missing,
        on_record,
        probe_decision,
        record_location,
    )

    _, here = locate(dev, hardware)
    path = fingerprint_path(name)
    claimed = read_if_there(path)
    fresh = fingerprint(name, here, torch_version(), measuring_keys(params, name)) if here else None
    results = results_path(name)
    on_disk = {stage: read_if_there(at(name)) for stage, at in RECORDS.items()}
    writes: dict[Path, Any] = {}
    from_files = True
    if lost:
        if here is not None:
            raise RecordError(
                f"{name}: this machine has it: plain `uv run dvc repro` measures it afresh"
            )
        writes = lost_records(name)  # refuses unless each is nowhere to be found
        on_disk |= {stage: writes[at(name)] for stage, at in RECORDS.items() if at(name) in writes}
        new = on_record(name, on_disk, pending_keys(params, name))
        message = (
            f"{name}: recorded as lost ({', '.join(map(str, writes))}); `uv run dvc repro` "
            "renders the rest"
        )
    elif not results.exists() and lock_records_results(name):
        where = record_location(name, "benchmark", results)
        if here is None or where in ("cache", "remote"):
            raise missing(name, results, where)
        # Nowhere, or a remote that cannot be asked: the device is here, so nothing is lost
        # by measuring it afresh (a pulled record would be superseded anyway).
        new, from_files = fresh, False
        gone = "lost (in neither this workspace, DVC's cache nor the remote)"
        if where != "nowhere":
            gone = f"in neither this workspace nor DVC's cache, and the remote's are {where}"
        message = f"{name}: here; the results dvc.lock records are {gone}: measuring it afresh"
    else:
        record = on_record(name, on_disk, pending_keys(params, name))
        new, message = probe_decision(name, record, here, fresh, replace, claimed)
    if new != claimed:
        writes[path] = new
    return writes, message, from_files


def probe(argv: list[str]) -> None:
    import argparse

    from roofline.configuration.params import probe_devices, read_params
    from roofline.core.files import json_text, write_texts_atomic
    from roofline.device.hardware import BOOT_CACHE, live_hardware
    from roofline.machines.identity import unmatched_gpus
    from roofline.machines.keys import measuring_keys

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "device", nargs="?", help="a device name from params.yaml (devices.<name>); none: all"
    )
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
    if (args.replace or args.lost) and not args.device:
        parser.error("--replace and --lost are for one device: name it")
    params = read_params()
    devices = probe_devices(params=params)  # kind and recognise checked: no schema to build
    if args.device and args.device not in devices:
        raise ConfigError(f"unknown device {args.device!r}; allowed: {', '.join(devices)}")
    names = [args.device] if args.device else list(devices)
    before = inputs(names) if not argv else None  # only the probe of every device is kept
    hardware = live_hardware(BOOT_CACHE)
    writes: dict[Path, Any] = {}
    said, from_files = [], True
    for name in names:
        decided, message, alone = decide(
            name, devices[name], params, hardware, args.replace, args.lost
        )
        print(message)
        said.append(message)
        writes |= decided
        from_files &= alone
    for gpu in unmatched_gpus(devices, hardware):
        said.append(
            f"note: GPU {gpu['name']!r} (sm_{gpu['compute_capability']}, {gpu['sm_count']} SMs) "
            "matches no device file; to measure it, add conf/device/<name>.yaml (see "
            "docs/configuration.md: adding a device)"
        )
        print(said[-1])
    if not args.device and hardware.get("gpu_note"):  # said once a run: by the first probe
        said.append(f"note: {hardware['gpu_note']}")
        print(said[-1])
    texts = {path: json_text(record) for path, record in writes.items()}
    if not args.device:  # what aggregate depends on first; its text only changes with a key
        keys = json_text({name: measuring_keys(params, name) for name in devices})
        if not KEYS_FILE.exists() or KEYS_FILE.read_text(encoding="utf-8") != keys:
            texts[KEYS_FILE] = keys
    if args.dry_run:
        print("(dry run: nothing written)")
        return
    if texts:
        write_texts_atomic(texts)
    if before is not None and from_files:
        keep(names, before, said)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv and answered_from_cache():
        return
    probe(argv)


if __name__ == "__main__":
    run(main)
