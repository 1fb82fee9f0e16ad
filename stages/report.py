"""Stage report: results.csv + manifest.json (+ the plot it shows) -> REPORT.md (one page) and
REPORT-appendix.md (each device's whole story, every point against the roofline's prediction)."""

from roofline.core.files import write_texts_atomic
from roofline.core.paths import EXPERIMENT
from roofline.interpretation.manifest import load_manifest
from roofline.interpretation.tables import load_knobs, load_table
from roofline.rendering.report import appendix, render
from stages import RENDERED, run


def main() -> None:
    rows = load_table(EXPERIMENT / "results.csv")
    knobs = load_knobs(EXPERIMENT / "knobs.csv")
    manifest = load_manifest(EXPERIMENT / "manifest.json")
    write_texts_atomic(
        {
            EXPERIMENT / "REPORT.md": render(
                rows, manifest, knobs, plotted=(EXPERIMENT / "roofline.png").exists()
            ),
            EXPERIMENT / "REPORT-appendix.md": appendix(rows, manifest, knobs),
        }
    )


if __name__ == "__main__":
    run(main, RENDERED)
