"""Stage plot: results.csv + manifest.json -> roofline.png."""

import json
import os
import tempfile

import pandas as pd

from roofline.paths import EXPERIMENT
from roofline.plot import draw
from stages import run


def main() -> None:
    rows = pd.read_csv(EXPERIMENT / "results.csv")
    manifest = json.loads((EXPERIMENT / "manifest.json").read_text())
    fig = draw(rows, manifest)
    fd, tmp = tempfile.mkstemp(dir=EXPERIMENT, prefix=".roofline.", suffix=".png")
    os.close(fd)
    fig.savefig(tmp, dpi=110, metadata={"Software": None})  # no version stamp: stable bytes
    os.replace(tmp, EXPERIMENT / "roofline.png")


if __name__ == "__main__":
    run(main)
