"""Stage report: write the lab's page from results.csv and manifest.json.

REPORT.md is the one page. REPORT-appendix.md tells each device's whole story: every point
against the roofline's prediction."""

from datetime import datetime

from roofline.core import spent
from roofline.core.deliverables import outputs
from roofline.core.files import write_texts_atomic
from roofline.core.paths import EXPERIMENT
from roofline.interpretation.gaps import breakdown_table
from roofline.interpretation.manifest import load_manifest
from roofline.interpretation.tables import load_knobs, load_table
from roofline.rendering.appendix import appendix
from roofline.rendering.report import render
from stages import RENDERED, name_of_stage, run


def main() -> None:
    manifest = load_manifest(EXPERIMENT / "manifest.json")
    rows = load_table(EXPERIMENT / "results.csv", devices=manifest.devices)
    knobs = load_knobs(EXPERIMENT / "knobs.csv", manifest.devices)
    write_texts_atomic(
        outputs(
            "report",
            {
                "REPORT.md": render(
                    rows, manifest, knobs, plotted=(EXPERIMENT / "roofline.png").exists()
                ),
                "REPORT-appendix.md": appendix(rows, manifest, knobs),
                "breakdown.csv": breakdown_table(rows, manifest, knobs).to_csv(index=False),
            },
        )
    )
    # The last stage: where this run's time went (its measurements' split from their records).
    measured = {
        name: (datetime.fromisoformat(entry.measured.measured_at).timestamp(), entry.measured.spent)
        for name, entry in manifest.devices.items()
        if entry.measured is not None and entry.measured.spent
    }
    if said := spent.said_at_end(name_of_stage(), measured):
        print(said)


if __name__ == "__main__":
    run(main, RENDERED)
