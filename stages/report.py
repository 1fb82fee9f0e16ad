"""Stage report: results.csv + manifest.json -> REPORT.md (the plot is linked beside it)."""

import json

import pandas as pd

from roofline.paths import EXPERIMENT
from roofline.report import render
from roofline.schema import write_text_atomic
from stages import run


def main() -> None:
    rows = pd.read_csv(EXPERIMENT / "results.csv", keep_default_na=False, na_values=[""])
    manifest = json.loads((EXPERIMENT / "manifest.json").read_text())
    write_text_atomic(EXPERIMENT / "REPORT.md", render(rows, manifest))


if __name__ == "__main__":
    run(main)
