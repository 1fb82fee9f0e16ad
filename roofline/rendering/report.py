"""REPORT.md, one page: the plot, one table, the lab's Definition of Done, a short gap paragraph
per device built from its numbers (roofline.interpretation.gaps); everything else is in the
appendix (roofline.rendering.appendix)."""

from types import SimpleNamespace
from typing import Any

import pandas as pd

from roofline.configuration.params import RENTED_KINDS
from roofline.core.dtypes import LAB_DTYPE
from roofline.interpretation.ceilings import lab_headline
from roofline.interpretation.figures import ratio
from roofline.interpretation.gaps import (
    above_peak,
    forced,
    noisy,
    room_for_losses,
    same_point,
)
from roofline.interpretation.interpret import (
    PUBLISHED_CAUSES,
    best_shape_figures,
    judge,
    published_figure,
    reaches,
)
from roofline.interpretation.manifest import (
    DeviceEntry,
    Manifest,
    ManifestJson,
    as_manifest,
)
from roofline.interpretation.node import node_spread
from roofline.interpretation.rows import KNOB_COLUMNS, knob_title
from roofline.rendering.causes import cause_sentences
from roofline.rendering.sentences import (
    cell,
    datasheet_sentence,
    spread_words,
    sustained_sentence,
)


def shown(rows: pd.DataFrame, manifest: Manifest) -> tuple[list[str], list[str]]:
    """(devices the report shows, devices not measured yet that it only names): a device not
    measured yet gets its line only if its conf shows it pending (the lab's own)."""
    shown, named = [], []
    for name in dict.fromkeys([*rows.device, *manifest.devices]):  # config order; the lost last
        entry = manifest.devices[name]
        visible = entry.status == "measured" or entry.show_pending
        (shown if visible else named).append(name)
    return shown, named


def verdict_cell(entry: DeviceEntry, head: Any) -> str:
    if head is None:
        return "nothing measured" if entry.status == "measured" else entry.status
    judged = judge(entry, head)[1]
    written_for = entry.lab.written_for
    band = judged.band or (
        f"no band for this SKU (the lab's is {written_for}'s)" if written_for else "no band"
    )
    flags = [*judged.flags, *(["noisy window: re-measure"] if noisy(head) else [])]
    return "; ".join([band, *(f"⚠ {flag}" for flag in flags)])


def summary_table(rows: pd.DataFrame, manifest: Manifest, devices: list[str]) -> str:
    """One line per device: its lab kernel's figures beside the lab's band and what others
    published for the SKU, and the verdict."""
    lines = [
        "| device | SKU | dtype | TFLOP/s | MFU | GB/s | FLOP/byte | lab's band | published | verdict |",
        "|---|---|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for name in devices:
        entry = manifest.devices[name]
        head = lab_headline(rows, name, entry)
        dtype = head.dtype if head is not None else LAB_DTYPE[entry.kind]
        band = entry.lab.band_tflops.get(dtype)
        shape = SimpleNamespace(dtype=dtype, m=8192, n=8192, k=8192) if head is None else head
        figure = published_figure(entry.datasheet.published, shape)
        cells = [name, entry.sku, dtype]
        if head is None:
            cells += ["", "", "", ""]
        else:
            cells += [
                f"{head.achieved_tflops:.4g}",
                cell(head.mfu, ".1%"),
                f"{head.achieved_bw_gbps:.1f}",
                f"{head.arithmetic_intensity:.0f}",
            ]
        cells += [
            f"{band[0]:g}-{band[1]:g} ±20%" if band else "",
            f"{figure.tflops:g}" if figure else "",
            verdict_cell(entry, head),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def definition_of_done(
    rows: pd.DataFrame, manifest: Manifest, unexplained: dict[str, str], plotted: bool
) -> list[str]:
    """The lab's Definition of Done, each item with what was measured; `unexplained`: why each
    measured device's paragraph is not concrete ("" where it is)."""
    lab = [n for n in manifest.lab_devices if n in manifest.devices]
    measured = [n for n in lab if manifest.devices[n].status == "measured"]
    pending = [n for n in lab if n not in measured]
    items = [
        (
            not pending,
            f"The lab's {len(lab)} devices measured ({', '.join(lab)}): "
            + (f"{', '.join(measured)} measured" if measured else "none measured")
            + (f"; {', '.join(pending)} pending" if pending else ""),
        )
    ]
    for name in lab:
        entry = manifest.devices[name]
        line = entry.lab.line
        for dtype, done in (line.lab_done_tflops if line else {}).items():
            wanted = f"{name} {dtype} ≥ {done:g} TFLOP/s"
            head = lab_headline(rows, name, entry)
            if head is None or head.dtype != dtype:
                items.append((False, f"{wanted}: pending"))
            elif entry.lab.written_for:
                items.append(
                    (
                        False,
                        f"{wanted} (written for the {line.sku}): {head.achieved_tflops:.4g} "
                        f"measured on another SKU, the {entry.sku}",
                    )
                )
            else:
                met = reaches(head.achieved_tflops, done)
                items.append((met, f"{wanted}: {head.achieved_tflops:.4g} measured"))
    items.append(
        (
            plotted,
            "The roofline plot is in the artifacts and above"
            if plotted
            else "The roofline plot: not drawn yet (the plot stage writes roofline.png)",
        )
    )
    shown = [n for n in unexplained if manifest.devices[n].status == "measured"]
    vague = [n for n in shown if unexplained[n]]
    named = [n for n in shown if not unexplained[n]]
    said = "; ".join(f"{n}: {unexplained[n]}" for n in vague)
    items.append(
        (
            bool(shown) and not vague,
            "A concrete gap paragraph per measured device, its measured causes explaining at "
            f"least two thirds of its gap, and the next knob: {len(named)} of "
            f"{len(shown)}" + (f" ({said})" if said else ""),
        )
    )
    return [f"- [{'x' if ok else ' '}] {text}." for ok, text in items]


# Another dtype is a knob where it is at least this much faster: two equal figures differ in
# their last bits (a played H100's float16 and float32 GEMMs both take 10 ms), and "measured
# 1.00x" was named the next knob wherever the other's last bits came out higher.
MIN_DTYPE_GAIN = 1.01


def knob_sentence(head: Any, rows: pd.DataFrame, knobs: pd.DataFrame) -> str:
    """The next knob: the largest measured one the kernel leaves unturned, else the fastest
    other dtype on the same shape."""
    left = knobs[(knobs.status == "measured") & (knobs.lab_turns.astype(str) == "False")]
    if not left.empty:
        best = SimpleNamespace(**left.loc[left.gain.idxmax()].to_dict())
        return (
            f"Next knob: {knob_title(best.knob, best.baseline, best.variant)}, measured "
            f"{best.gain:.3g}× at {best.m}×{best.n}×{best.k}."
        )
    same = same_point(rows, head)
    others = same[(same.dtype != head.dtype) & (same.achieved_tflops > head.achieved_tflops)]
    if not others.empty:
        best = SimpleNamespace(**others.loc[others.achieved_tflops.idxmax()].to_dict())
        gain = ratio(best.achieved_tflops, head.achieved_tflops)
        if gain >= MIN_DTYPE_GAIN:
            return (
                f"Next knob: {best.dtype}, measured {gain:.2f}× {head.dtype} on the same "
                f"shape, at the cost of {best.dtype}'s precision."
            )
    return (
        "Next knob: not measured yet; `uv run dvc exp run -S knobs=lab` measures the lab's "
        "knobs as gains."
    )


# A published figure's window (roofline.interpretation.lab_config.WINDOWS) in a reader's words.
WINDOW_WORDS = {
    "burst": "a burst",
    "sustained": "sustained",
    "": "its window not stated",
}


def best_shape_sentence(entry: DeviceEntry, head: Any) -> str:
    """Figures published at their source's best shape for this dtype (a vendor's "max
    achievable"), beside the headline as such: a different shape, so never a verdict on it."""
    figures = best_shape_figures(entry.datasheet.published, head.dtype)
    return " ".join(
        f"Published at its source's best shape, {'×'.join(map(str, f.shape))} (not "
        f"{head.m}×{head.n}×{head.k}): {f.tflops:g} TFLOP/s {head.dtype}, "
        f"{WINDOW_WORDS[f.window]} ({f.source}); this run's {head.m}×{head.n}×{head.k} is "
        f"{ratio(head.achieved_tflops, f.tflops):.0%} of it, shown for scale, not judged against it."
        for f in figures
    )


def node_sentence(rows: pd.DataFrame, head: SimpleNamespace) -> str:
    """Where the node's GPUs were measured at once: which GPU the figure is, the slowest and
    the spread (mamf-finder's advice: take the slowest GPU of a node seriously). "" where one
    GPU was measured."""
    spread = node_spread(rows, head)
    if spread is None:
        return ""
    return f"The median of its {spread.gpus} GPUs, measured at once (GPU {spread.median[0]}); " + (
        f"{spread_words(spread)}."
    )


def summary_paragraph(
    name: str, entry: DeviceEntry, rows: pd.DataFrame, knobs: pd.DataFrame
) -> tuple[str, str]:
    """3 to 5 sentences: what it reached, beside what others published; its largest measured
    losses with their share of the gap; the next knob; where its datasheet falls short. And
    why it is not concrete (the Definition of Done's word: measured steps explain two thirds of
    the gap, and a knob is named), or "" where it is."""
    head = lab_headline(rows, name, entry)
    if head is None:
        return (
            f"**{name}**: nothing was measured; every row is skipped or failed (appendix).",
            "nothing measured",
        )
    mfu = (
        f", MFU {head.mfu:.1%} of the dense {head.peak_tflops:.4g}"
        if pd.notna(head.mfu)
        else f"; **no MFU: above its dense peak {head.peak_tflops:.4g}**, a bug, not a result"
        if above_peak(head)
        else "; no MFU, no datasheet peak"
    )
    sentences = [
        f"**{name}** ({entry.sku}) ran {head.dtype} {head.m}×{head.n}×{head.k} at "
        f"**{head.achieved_tflops:.4g} TFLOP/s**{mfu}."
    ]
    if node := node_sentence(rows[rows.device == name], head):
        sentences.append(node)
    if settings := forced(entry):  # the number above is the forced kernel's
        sentences.append(
            f"This run had {', '.join(settings)} set, which forces the library's kernel or "
            "instruction set: unset it, and `uv run dvc repro` measures what the library picks."
        )
    figure, judged = judge(entry, head)
    if figure:
        text = (
            f"Published for this SKU: {figure.tflops:g} TFLOP/s, {WINDOW_WORDS[figure.window]} "
            f"({figure.source}); this run's burst is {judged.published_share:.0%} of it"
        )
        sentences.append(text + (f": check {PUBLISHED_CAUSES}." if judged.below_published else "."))
    if best := best_shape_sentence(entry, head):
        sentences.append(best)
    if sustained := sustained_sentence(entry, rows[rows.device == name]):
        sentences.append(sustained)
    room = room_for_losses(len(sentences))
    causes, unexplained = cause_sentences(name, entry, rows, head, knobs, room)
    knob = knob_sentence(head, rows[rows.device == name], knobs)
    sentences += [
        s for s in (*causes, knob, datasheet_sentence(entry), older_sentence(name, entry)) if s
    ]
    if not unexplained and knob.startswith("Next knob: not measured"):
        unexplained = "no knob measured"
    return " ".join(sentences), unexplained


def remeasure(name: str, entry: DeviceEntry) -> str:
    how = "`uv run dvc repro` on a machine that has it"
    if entry.kind in RENTED_KINDS:
        how += f", or `uv run --group cloud python -m roofline.cloud {name}`"
    return how


def older_sentence(name: str, entry: DeviceEntry) -> str:
    """A device measured by older measuring code or params than today's: its numbers are that
    code's, never claimed as today's; each stage with the revision and time that measured it."""
    older = entry.measured.measured_by_older if entry.measured else None
    if not older:
        return ""
    what = sorted({part for stage in older.values() for part in stage.older})
    runs: dict[tuple, list[str]] = {}
    for stage in ("benchmark", "sweep", "knobs"):
        if stage in older:
            revision = older[stage].git_revision or "unknown"
            short = revision[:12] + ("+dirty" if revision.endswith("+dirty") else "")
            runs.setdefault((short, older[stage].measured_at), []).append(stage)
    said = "; ".join(
        f"{', '.join(stages)} at revision {rev}, {when or 'unknown'}"
        for (rev, when), stages in runs.items()
    )
    return (
        f"⚠ Measured by older measuring {' and '.join(what)} ({said}): these are that code's "
        f"numbers; to re-measure, {remeasure(name, entry)}."
    )


def pending_line(name: str, entry: DeviceEntry) -> str:
    how = remeasure(name, entry)
    if entry.status == "lost":
        return (
            f"- **{name}** ({entry.sku}): ⚠ lost: its results were in neither the workspace, "
            f"DVC's cache nor the remote (a push that failed), and were recorded as lost; to "
            f"measure it afresh, {how}."
        )
    return f"- **{name}** ({entry.sku}): pending; {how}."


def render(
    rows: pd.DataFrame,
    manifest: Manifest | ManifestJson,
    knobs: pd.DataFrame | None = None,
    plotted: bool = True,
) -> str:
    """REPORT.md: one page. The plot, one table, the lab's Definition of Done, a paragraph per
    measured device and a line per pending one; everything else is in the appendix."""
    manifest = as_manifest(manifest)
    devices, unmeasured = shown(rows, manifest)
    knobs = knobs if knobs is not None else pd.DataFrame(columns=KNOB_COLUMNS)
    paragraphs = {
        name: summary_paragraph(name, manifest.devices[name], rows, knobs[knobs.device == name])
        for name in devices
        if manifest.devices[name].status == "measured"
    }
    out = [
        "# Roofline report: dense matmul, FP16 8192³ on GPUs (FP32 on a CPU)",
        "",
        "C = A·B, FLOPs = 2·M·N·K, bytes = each operand moved once; MFU = achieved / the dense "
        "datasheet peak of the SKU measured (a CPU's: computed). The lab's band allows ±20%; "
        "a run more than 10% below a published figure for its SKU is flagged. How each figure "
        "was measured, every gap's breakdown and each point's prediction: "
        "[the appendix](REPORT-appendix.md).",
        "",
        "![roofline](roofline.png)",
        "",
        summary_table(rows, manifest, devices),
        "",
        "## Definition of Done",
        "",
        *definition_of_done(
            rows, manifest, {n: why for n, (_, why) in paragraphs.items()}, plotted
        ),
        "",
        "## The gaps",
    ]
    for name in devices:
        entry = manifest.devices[name]
        out += ["", paragraphs[name][0] if name in paragraphs else pending_line(name, entry)]
    if unmeasured:
        listed = ", ".join(f"{n} ({manifest.devices[n].sku})" for n in unmeasured)
        out += ["", f"Not measured, and shown once a machine that has them runs: {listed}."]
    return "\n".join(out) + "\n"
