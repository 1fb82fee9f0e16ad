"""Stage plot: results.csv + manifest.json -> roofline.png and roofline-sweeps.png."""

import json

import pandas as pd
from matplotlib.figure import Figure

from roofline.paths import EXPERIMENT
from roofline.plot import draw, draw_sweeps
from roofline.schema import atomic_path
from stages import run


def save(fig: Figure, name: str) -> None:
    with atomic_path(EXPERIMENT / name) as tmp:
        fig.savefig(tmp, dpi=110, metadata={"Software": None})  # no version stamp: stable bytes


def main() -> None:
    rows = pd.read_csv(EXPERIMENT / "results.csv")
    manifest = json.loads((EXPERIMENT / "manifest.json").read_text())
    save(draw(rows, manifest), "roofline.png")
    save(draw_sweeps(rows, manifest), "roofline-sweeps.png")


if __name__ == "__main__":
    run(main)
