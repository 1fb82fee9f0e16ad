"""Stage plot: draw the roofline from results.csv and manifest.json.

It writes roofline.png, roofline-sweeps.png and roofline.json (what `dvc plots show` draws),
and knobs.png from knobs.csv."""

from roofline.core.deliverables import outputs
from roofline.core.files import atomic_paths, json_text
from roofline.core.paths import EXPERIMENT
from roofline.interpretation.manifest import load_manifest
from roofline.interpretation.tables import load_knobs, load_table
from roofline.rendering.plot import draw, draw_knobs, draw_sweeps, interactive
from stages import RENDERED, run


def main() -> None:
    manifest = load_manifest(EXPERIMENT / "manifest.json")
    rows = load_table(EXPERIMENT / "results.csv", devices=manifest.devices)
    knobs = load_knobs(EXPERIMENT / "knobs.csv", manifest.devices)
    made = outputs(
        "plot",
        {
            "roofline.png": draw(rows, manifest),
            "roofline-sweeps.png": draw_sweeps(rows, manifest),
            "knobs.png": draw_knobs(knobs),
            "roofline.json": json_text(interactive(rows, manifest)),
        },
    )
    with atomic_paths(*made) as temps:
        for temp, thing in zip(temps, made.values(), strict=True):
            if isinstance(thing, str):
                temp.write_text(thing, encoding="utf-8")
            else:  # no version stamp: the same figure, the same bytes
                thing.savefig(temp, dpi=110, metadata={"Software": None})


if __name__ == "__main__":
    run(main, RENDERED)
