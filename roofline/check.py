"""The lab's verdict, for a script: exit 1 when a measured device's lab kernel is outside the
lab's band (+-20%), more than 10% below a figure published for its SKU, or above its dense
peak, printing why; exit 0 when none is. Read from the deliverables, so a pod can refuse to hand
back a broken measurement and CI can gate on it:

    uv run python -m roofline.check            # every measured device
    uv run python -m roofline.check h100       # these devices only
"""

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from roofline.ceilings import lab_headline, load_table
from roofline.errors import ConfigError, run
from roofline.interpret import judge
from roofline.paths import EXPERIMENT


def problems(rows: pd.DataFrame, manifest: dict, names: list[str] | None = None) -> list[str]:
    """What is wrong with each measured device's lab kernel (named by device), or nothing."""
    known = list(manifest["devices"])
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        raise ConfigError(f"unknown device {unknown[0]!r}; allowed: {', '.join(known)}")
    found = []
    for name in names or known:
        entry = manifest["devices"][name]
        if entry["status"] != "measured":
            continue
        head = lab_headline(rows, name, entry)
        if head is None:
            found.append(f"{name}: nothing of its lab kernel was measured (see REPORT-appendix.md)")
            continue
        found += [f"{name} ({entry['sku']}): {why}" for why in judge(entry, head)[1]["problems"]]
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
    found = problems(load_table(table), json.loads(manifest.read_text()), args.devices)
    for line in found:
        print(line)
    if found:
        sys.exit(1)
    print("every measured device is inside its band and near what is published for its SKU")


if __name__ == "__main__":
    run(main)
