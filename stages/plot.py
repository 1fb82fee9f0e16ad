"""Stage plot: results.csv + manifest.json -> roofline.png, roofline-sweeps.png and
roofline.json (the interactive roofline that `dvc plots show` renders); knobs.csv -> knobs.png."""

from roofline.core.files import atomic_paths, json_text
from roofline.core.paths import EXPERIMENT
from roofline.interpretation.manifest import load_manifest
from roofline.interpretation.tables import load_knobs, load_table
from roofline.rendering.plot import draw, draw_knobs, draw_sweeps, interactive
from stages import RENDERED, run

FIGURES = ("roofline.png", "roofline-sweeps.png", "knobs.png")


def main() -> None:
    manifest = load_manifest(EXPERIMENT / "manifest.json")
    rows = load_table(EXPERIMENT / "results.csv", devices=manifest.devices)
    knobs = load_knobs(EXPERIMENT / "knobs.csv", manifest.devices)
    figures = (draw(rows, manifest), draw_sweeps(rows, manifest), draw_knobs(knobs))
    outputs = [EXPERIMENT / name for name in (*FIGURES, "roofline.json")]
    with atomic_paths(*outputs) as (*pngs, data):
        for fig, path in zip(figures, pngs, strict=True):
            fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: stable
        data.write_text(json_text(interactive(rows, manifest)), encoding="utf-8")


if __name__ == "__main__":
    run(main, RENDERED)
