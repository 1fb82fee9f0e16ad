"""The lab's verdict, for a script: exit 1 when a measured device's lab kernel is outside the
lab's band (+-20%), more than 10% below a figure published for its SKU, or above its dense
peak, printing why; exit 1 too when nothing it was asked about was measured (no device at all,
or a device named that is pending or lost), naming what to measure and how; exit 0 when every
measured device asked about is fine. Read from the deliverables, so a pod can refuse to hand
back a broken measurement and CI can gate on it:

    uv run python -m roofline.check            # every measured device
    uv run python -m roofline.check h100       # these devices only

A missing or corrupt results.csv or manifest.json ends in one message naming the file and the
command that re-renders it.
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

from roofline.core.errors import ConfigError, run
from roofline.core.paths import EXPERIMENT
from roofline.interpretation.ceilings import lab_headline
from roofline.interpretation.interpret import judge
from roofline.interpretation.manifest import Manifest, ManifestJson, as_manifest, load_manifest
from roofline.interpretation.tables import load_table

MEASURE = "`uv run dvc repro` on a machine with it measures it"


def problems(
    rows: pd.DataFrame, manifest: Manifest | ManifestJson, names: list[str] | None = None
) -> list[str]:
    """What is wrong with each measured device's lab kernel (named by device), or nothing; and
    a problem too where nothing asked about was measured: each device named that was not, or,
    with none named, every device when none was."""
    devices = as_manifest(manifest).devices
    unknown = [n for n in names or [] if n not in devices]
    if unknown:
        raise ConfigError(f"unknown device {unknown[0]!r}; allowed: {', '.join(devices)}")
    asked = names or list(devices)
    unmeasured = {n: devices[n].status for n in asked if devices[n].status != "measured"}
    found = []
    if names:
        found += [f"{n}: {status}, nothing to check; {MEASURE}" for n, status in unmeasured.items()]
    elif len(unmeasured) == len(asked):
        listed = ", ".join(f"{n} ({status})" for n, status in unmeasured.items()) or "none known"
        found.append(
            f"no device was measured, nothing to check: {listed}; `uv run dvc repro` on a "
            "machine with one of them measures it"
        )
    for name in asked:
        entry = devices[name]
        if name in unmeasured:
            continue
        head = lab_headline(rows, name, entry)
        if head is None:
            found.append(f"{name}: nothing of its lab kernel was measured (see REPORT-appendix.md)")
            continue
        found += [f"{name} ({entry.sku}): {why}" for why in judge(entry, head)[1].problems]
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("devices", nargs="*", help="devices to check (default: every one)")
    parser.add_argument("--dir", type=Path, default=EXPERIMENT, help="the deliverables' folder")
    args = parser.parse_args(argv)
    table, manifest = args.dir / "results.csv", args.dir / "manifest.json"
    if not table.exists() or not manifest.exists():
        raise ConfigError(f"no {table} or {manifest}: run `uv run dvc repro` first")
    # Both read and checked whole here: a field hand-edited past its type is named, with its file.
    recorded = load_manifest(manifest)
    found = problems(load_table(table, devices=recorded.devices), recorded, args.devices)
    for line in found:
        print(line)
    if found:
        sys.exit(1)
    print("every measured device is inside its band and near what is published for its SKU")


if __name__ == "__main__":
    run(main)
