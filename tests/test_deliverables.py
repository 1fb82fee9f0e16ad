"""One table of deliverables (roofline.core.deliverables): the stages write what it gives them,
the generated dvc.yaml declares it, and the docs' tables name the same files."""

import re
from pathlib import Path

import pytest
import yaml

from roofline.core.deliverables import DELIVERABLES, ROLES, outputs, written_by

ROOT = Path(__file__).resolve().parents[1]
FILES = {d.file for d in DELIVERABLES}


def files_in_table(markdown: str) -> set[str]:
    """The files the first column of a doc's `| file | what |` table names (the row of a device's
    records, under devices/, names no deliverable)."""
    table = markdown.split("| file | what |", 1)[1].split("\n\n", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines()[2:] if line.startswith("|")]
    rows = [re.findall(r"`([^`]+)`", cell) for cell in first_cells]
    return {name for names in rows if not names[0].startswith("devices/") for name in names}


@pytest.mark.parametrize("doc", ["README.md", "docs/methodology.md"])
def test_the_docs_tables_name_every_deliverable_and_no_other(doc):
    assert files_in_table((ROOT / doc).read_text(encoding="utf-8")) == FILES


def test_the_table_is_whole():
    assert len(FILES) == len(DELIVERABLES)  # each file once
    assert {d.role for d in DELIVERABLES} <= set(ROLES)
    assert {d.stage for d in DELIVERABLES} == {"aggregate", "plot", "report"}


def test_the_pipeline_declares_each_deliverable_where_the_table_says():
    pipeline = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    for d in DELIVERABLES:
        declared = pipeline["stages"][d.stage]["metrics" if d.role == "metrics" else "outs"]
        assert any(str(d.path) in entry for entry in declared), d.file
    plotted = {Path(p if isinstance(p, str) else next(iter(p))).name for p in pipeline["plots"]}
    assert plotted == {d.file for d in DELIVERABLES if d.role == "plot"}


def test_a_stage_writes_exactly_its_deliverables():
    made = {path.name: "" for path in written_by("report")}
    assert sorted(outputs("report", made)) == sorted(written_by("report"))
    with pytest.raises(ValueError, match=r"stage report writes \['REPORT\.md'\].*DELIVERABLES"):
        outputs("report", {"REPORT.md": ""})
    with pytest.raises(ValueError, match=r"not-a-deliverable\.csv"):
        outputs(
            "aggregate",
            {**{p.name: "" for p in written_by("aggregate")}, "not-a-deliverable.csv": ""},
        )
