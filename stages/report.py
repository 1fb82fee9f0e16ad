"""Stage report: results.csv + manifest.json -> REPORT.md (one page, the plot beside it) and
REPORT-appendix.md (every point against the roofline's prediction, the sweeps)."""

import json

from roofline.ceilings import load_knobs, load_table
from roofline.paths import EXPERIMENT
from roofline.report import appendix, render
from roofline.schema import write_texts_atomic
from stages import RENDERED, run


def main() -> None:
    rows = load_table(EXPERIMENT / "results.csv")
    knobs = load_knobs(EXPERIMENT / "knobs.csv")
    manifest = json.loads((EXPERIMENT / "manifest.json").read_text())
    write_texts_atomic(
        {
            EXPERIMENT / "REPORT.md": render(rows, manifest, knobs),
            EXPERIMENT / "REPORT-appendix.md": appendix(rows, manifest),
        }
    )


if __name__ == "__main__":
    run(main, RENDERED)
