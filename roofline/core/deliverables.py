"""The lab's deliverables, each named once: its file in experiments/x4-roofline/, the stage that
writes it, how DVC keeps it and what it is, in a line. The stages write them through `outputs`,
the generated dvc.yaml declares them from here (roofline.machines.pipeline), and the tables of
README.md and docs/methodology.md are checked against this one (tests/test_deliverables.py)."""

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from roofline.core.paths import EXPERIMENT

# How DVC keeps a deliverable: an output; a metrics file (`dvc metrics show`); a plot (`dvc
# plots show`), an output too.
ROLES = ("out", "metrics", "plot")


@dataclass(frozen=True)
class Deliverable:
    file: str  # its name in EXPERIMENT
    stage: str  # the stage that writes it
    role: str  # one of ROLES
    what: str

    @property
    def path(self) -> Path:
        return EXPERIMENT / self.file


DELIVERABLES = (
    Deliverable(
        "results.csv",
        "aggregate",
        "out",
        "one row per (device, dtype, shape, backend): status, figures, MFU, flags",
    ),
    Deliverable(
        "knobs.csv", "aggregate", "out", "each knob of the lab's lesson as a measured gain"
    ),
    Deliverable(
        "manifest.json",
        "aggregate",
        "out",
        "versions, libraries, settings, SKUs, each device's run",
    ),
    Deliverable(
        "metrics.json", "aggregate", "metrics", "TFLOP/s and MFU per device and dtype, knob gains"
    ),
    Deliverable("roofline.png", "plot", "plot", "every device on one log-log roofline"),
    Deliverable("roofline-sweeps.png", "plot", "plot", "each device's ceilings and every point"),
    Deliverable("roofline.json", "plot", "plot", "the roofline as data for `dvc plots show`"),
    Deliverable("knobs.png", "plot", "plot", "the knobs' ladders, drawn"),
    Deliverable("REPORT.md", "report", "out", "the lab's one page"),
    Deliverable("REPORT-appendix.md", "report", "out", "everything the page leaves out"),
    Deliverable(
        "breakdown.csv", "report", "out", "each headline's gap breakdown, step by step, as numbers"
    ),
)


def written_by(stage: str, *roles: str) -> list[Path]:
    """The paths of what `stage` writes, in the table's order; of those `roles` only, if any."""
    return [d.path for d in DELIVERABLES if d.stage == stage and (not roles or d.role in roles)]


Made = TypeVar("Made")


def outputs(stage: str, made: dict[str, Made]) -> dict[Path, Made]:
    """A stage's deliverables (file name -> what it writes there) by their paths; ValueError, before
    anything is written, where they are not exactly the ones the table gives the stage."""
    wanted = [p.name for p in written_by(stage)]
    if sorted(made) != sorted(wanted):
        raise ValueError(
            f"stage {stage} writes {sorted(made)}, and roofline.core.deliverables gives it "
            f"{sorted(wanted)}: add or remove the line in DELIVERABLES"
        )
    return {EXPERIMENT / name: thing for name, thing in made.items()}
