"""The one page and its appendix, rendered from fixed records under a frozen conf (tests/golden)
and compared whole: a changed sentence fails here and shows in review as a diff of the page.
After a change you mean: `uv run python -m tests.golden`, then review and commit the pages.
The devices named below are the frozen conf's (tests/golden/params.yaml), not the lab's: a
device added to conf/ changes neither them nor the pages (tests/test_new_device.py)."""

import re

import pytest

from tests.golden import PAGES, pages

REWRITE = "the page changed; if you meant it: `uv run python -m tests.golden`, then review the diff"


@pytest.fixture(scope="module")
def rendered():
    return pages()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_pages_are_the_golden_ones_whole(rendered, name):
    assert rendered[name] == PAGES[name].read_text(encoding="utf-8"), REWRITE


def sentences(paragraph: str) -> list[str]:
    """A paragraph's sentences: each ends at a full stop followed by a capital or the end."""
    return [s for s in re.split(r"(?<=\.)\s+(?=[A-Z*`])", paragraph.strip()) if s]


def test_the_page_is_one_page_with_a_short_paragraph_per_measured_device(rendered):
    page = rendered["REPORT.md"]
    prose = [line for line in page.splitlines() if not line.startswith(("|", "!["))]
    assert len(" ".join(prose).split()) <= 600
    gaps = page.split("## The gaps")[1].strip().split("\n\n")
    paragraphs = {p.split("**")[1]: p for p in gaps if p.startswith("**")}
    assert list(paragraphs) == ["cpu", "a100", "h100", "h200"]
    for name, paragraph in paragraphs.items():
        assert 3 <= len(sentences(paragraph)) <= 5, (name, sentences(paragraph))
        assert "Next knob: " in paragraph and " the gap" in paragraph, name
    # The lab's yardsticks at a glance: a verdict per device, the Definition of Done checked.
    table = [line for line in page.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[-1] for row in table] == [
        "no band |",
        "in band |",
        "in band |",
        "no band |",
    ]
    done = [line for line in page.splitlines() if line.startswith("- [")]
    assert len(done) == 5 and all(line.startswith("- [x] ") for line in done[:4])
    # The Hopper GPUs' measured steps explain their gap (the tensor pipes idle, from their own
    # counters). The A100 has no counters to split the kernel by, says so, and says what to
    # measure next; so does the CPU, whose record is from a run before its breakdown was
    # measured, and whose VM gave it no performance counters.
    assert done[4].startswith("- [ ] A concrete gap paragraph") and "2 of 4 (cpu: all of" in done[4]
    cpu = next(p for p in page.split("\n\n") if p.startswith("**cpu**"))
    assert "its own counters (its FP instructions per cycle) were not read: perf_event_open" in cpu
    assert "No measured step explains the gap; measure next: the clock under load" in cpu
    a100 = next(p for p in page.split("\n\n") if p.startswith("**a100**"))
    assert "its own counters were not read: GPM: this GPU has none" in a100
    for hopper in ("h100", "h200"):
        said = next(p for p in page.split("\n\n") if p.startswith(f"**{hopper}**"))
        assert "The tensor pipes idle in the busy SMs' cycles (the tensor pipes issued" in said
        assert "; the measured steps explain all of the gap." in said
    assert "- [x] h100 float16 ≥ 600 TFLOP/s: 702 measured." in done
    assert "mps (Apple silicon GPU)" in page.split("## The gaps")[1]  # pending, in one line


def test_the_appendix_keeps_what_the_page_leaves_out(rendered):
    extra = rendered["REPORT-appendix.md"]
    for kept in ("Gap breakdown", "Cost: ", "Roofline check", "skipped: numpy's BLAS has no"):
        assert kept in extra
    assert "Gap breakdown" not in rendered["REPORT.md"]


def test_the_breakdown_table_holds_the_appendixs_steps_as_numbers(rendered):
    """breakdown.csv and the appendix's breakdowns are one computation: each measured step's
    TFLOP/s as the appendix prints it, and its share the step's over the measured one above."""
    import io

    import pandas as pd

    table = pd.read_csv(io.StringIO(rendered["breakdown.csv"]))
    assert list(dict.fromkeys(table.device)) == ["cpu", "a100", "h100", "h200"]
    appendix = rendered["REPORT-appendix.md"]
    for device, steps in table.groupby("device", sort=False):
        section = appendix.split(f"### {device}: ")[1].split("\n### ")[0]
        above = None
        for step in steps.itertuples():
            if pd.isna(step.tflops):
                # Not measured, or measured apart from the kernel and below it: no number.
                assert pd.isna(step.share_of_above) and f"- {step.label}: {step.note}" in section
                assert (
                    step.note.startswith("not")
                    or re.search(r"\bbounds? nothing\b", step.note)
                    or "; too noisy to tell (spread " in step.note
                )
                continue
            assert f"- {step.label}: **{step.tflops:.4g} TFLOP/s**" in section, (device, step)
            if above is None:
                assert pd.isna(step.share_of_above)
            else:
                assert step.share_of_above == pytest.approx(step.tflops / above)
            above = step.tflops
        assert steps.step.iloc[[0, -1]].tolist() == ["peak", "achieved"]
