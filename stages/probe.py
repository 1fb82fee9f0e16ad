"""Stage probe: record which hardware each device's next measurement is for.

`python -m stages.probe` probes every device in one process. It is the one stage that runs on
every `dvc repro` (always_changed), and DVC runs it first.

For each device it writes a fingerprint: the hardware, the torch build, and the keys of what
would measure it (roofline/machines/keys.py). Where the device is here, that is this machine's
fingerprint. Elsewhere it is the fingerprint on record, with the keys its records were measured
by: a run that failed leaves no claim behind, and a change of code stales no device measured on
another machine. A fingerprint changes only when one of those things does.

It also writes KEYS_FILE, aggregate's first dependency. It writes all or nothing: a device it
cannot decide for stops it first. When nothing it decides from has changed since the last run
(PROBE_CACHE), it repeats what it said then, without importing what decides.

`python -m stages.probe <name>` probes one device: the first stage of the device's own
pipeline. DVC runs it when the fingerprint differs from the one its dvc.lock records (the probe
above rewrote it), or when forced. It decides as the probe above does, and depends on no code
of its own in dvc.yaml: its lock entry must not change on a machine that only keeps another
machine's record."""

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


def read_if_there(path: Path) -> Any:
    from roofline.core.files import read_json

    return read_json(path) if path.exists() else None


def inputs(names: list[str], own: list[str]) -> list[Any]:
    """The state of all the probe of every device decides from: the size and mtime of every
    file it reads (params.yaml, each device's fingerprint and records, the keys file, the
    hardware description or its cache, the lab's code and `own`, the files of your own
    kernels), this boot's key (hardware.boot: the variables that change which hardware is
    seen, the CPUs this process may use, the torch installed), and the variables that pick a
    library's kernel or threads."""
    from roofline.core.code import stats  # cheap: the fast path's imports
    from roofline.core.depends import conf_files, every_library_variable, lab_files
    from roofline.device.hardware import BOOT_CACHE, HARDWARE_ENV, boot

    files = [Path("params.yaml"), KEYS_FILE, BOOT_CACHE, *conf_files()]  # conf/: conf_drift
    files += [at(name) for name in names for at in (fingerprint_path, *RECORDS.values())]
    files += [Path(v) for v in [os.environ.get(HARDWARE_ENV)] if v]
    files += [*lab_files(), *map(Path, own)]
    return [stats(files), boot(), every_library_variable()]


def answered_from_cache() -> bool:
    """Say what the last probe of every device said, where nothing it decided from changed."""
    try:
        kept = json.loads(PROBE_CACHE.read_text(encoding="utf-8"))
        if kept["inputs"] != inputs(kept["devices"], kept["own"]):
            return False
        said = kept["said"]
        if not isinstance(said, list) or not all(isinstance(line, str) for line in said):
            raise TypeError("what it said is not a list of lines")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False  # none yet, or unreadable: decided afresh (and written whole again)
    print("\n".join(said))
    return True


def keep(names: list[str], own: list[str], before: list[Any], said: list[str]) -> None:
    """Keep what the probe said for the next run, where nothing changed while it decided (its
    own writes included: the run after them keeps it)."""
    from roofline.core.files import keep_cache

    if inputs(names, own) == before:
        keep_cache(PROBE_CACHE, {"devices": names, "own": own, "inputs": before, "said": said})


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
        locked_pending,
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
    elif not results.exists() and lock_records_results(name) and not locked_pending(name):
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

    from roofline.configuration.params import conf_drift, probe_devices, read_params
    from roofline.core.depends import own_files
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
    own = [str(path) for path in own_files(params)]
    before = inputs(names, own) if not argv else None  # only the probe of every device is kept
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
    if not args.device and (drift := conf_drift()):
        said.append(f"note: {drift}")
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
        keep(names, own, before, said)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv and answered_from_cache():
        return
    probe(argv)


if __name__ == "__main__":
    run(main)
