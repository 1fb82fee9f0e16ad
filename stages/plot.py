"""Stage plot: results.csv + manifest.json -> roofline.png, roofline-sweeps.png, and
roofline.json (the interactive roofline that `dvc plots show` renders)."""

import json

from roofline.ceilings import load_table
from roofline.paths import EXPERIMENT
from roofline.plot import draw, draw_sweeps, interactive
from roofline.schema import atomic_paths, json_text
from stages import RENDERED, run

OUTPUTS = [EXPERIMENT / name for name in ("roofline.png", "roofline-sweeps.png", "roofline.json")]


def main() -> None:
    rows = load_table(EXPERIMENT / "results.csv")
    manifest = json.loads((EXPERIMENT / "manifest.json").read_text())
    with atomic_paths(*OUTPUTS) as (png, sweeps_png, data):
        for fig, path in ((draw(rows, manifest), png), (draw_sweeps(rows, manifest), sweeps_png)):
            fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: stable
        data.write_text(json_text(interactive(rows, manifest)))


if __name__ == "__main__":
    run(main, RENDERED)
