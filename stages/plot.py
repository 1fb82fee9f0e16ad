"""Stage plot: results.csv + manifest.json -> roofline.png, roofline-sweeps.png, and
roofline.json (the interactive roofline that `dvc plots show` renders)."""

import json

from matplotlib.figure import Figure

from roofline.ceilings import load_table
from roofline.paths import EXPERIMENT
from roofline.plot import draw, draw_sweeps, interactive
from roofline.schema import atomic_path, write_json_atomic
from stages import run


def save(fig: Figure, name: str) -> None:
    with atomic_path(EXPERIMENT / name) as tmp:
        fig.savefig(tmp, dpi=110, metadata={"Software": None})  # no version stamp: stable bytes


def main() -> None:
    rows = load_table(EXPERIMENT / "results.csv")
    manifest = json.loads((EXPERIMENT / "manifest.json").read_text())
    save(draw(rows, manifest), "roofline.png")
    save(draw_sweeps(rows, manifest), "roofline-sweeps.png")
    write_json_atomic(EXPERIMENT / "roofline.json", interactive(rows, manifest))


if __name__ == "__main__":
    run(main)
