"""Which datasheet a measurement is judged against. A device is a role the lab compares (cpu,
a100, h100, h200, mps); a SKU is one datasheet line in its conf file (`skus.<id>`, an id that
`dvc exp run -S devices.h100.skus.pcie.cost_per_hour=2.5` can name), chosen by the exact name
torch reports (`name`; "*": any, for a CPU or a Mac's GPU). The name measured is a measurement;
the line chosen for it is interpretation, applied by `aggregate` (and the GPU suite), never by
a measuring stage, so adding or fixing a line re-renders and re-measures nothing.

A measured name with no line (a new variant, a MIG slice) keeps its measurement and gets no MFU;
`missing` says which line to add. The lab's band and done threshold sit on the line they were
written for, so they apply to that SKU only. The lines' schema is
roofline/interpretation/lab_config.py;
this module is plain Python, so the GPU suite reads conf files without omegaconf."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from roofline.core.dtypes import DTYPES

if TYPE_CHECKING:  # plain Python at run time: the GPU suite reads conf files with this module
    from roofline.configuration.params import DeviceParams
    from roofline.interpretation.interpret import JudgedDevice
    from roofline.machines.record_types import Record

# A datasheet line's name that fits any name measured (a CPU, a Mac's GPU).
ANY = "*"


def measured_name(record: Record) -> str | None:
    """The name of what a results record measured (a GPU's name as torch reports it, a CPU's
    model), or None for a device never measured."""
    if record.get("status") != "measured":
        return None
    hardware = record["hardware"]
    return hardware.get("name") or hardware.get("model")


def peaks_of(table: dict[str, float | None]) -> dict[str, float]:
    """A line's dense peaks, nulls dropped, each dtype with none taking the figure of the dtype
    it shares one with (DType.peak_as)."""
    given = {d: p for d, p in table.items() if p is not None}
    shared = {d: given[t.peak_as] for d, t in DTYPES.items() if t.peak_as in given}
    return shared | given


def judged(name: str, dev: DeviceParams, measured: str | None) -> JudgedDevice:
    """The device as the deliverables judge it: its conf as plain data (composed, or a conf file
    read as YAML) with the datasheet line of the SKU `measured` (None: not measured, so the
    first line, the lab's) in place of its table. Peaks left null are dropped."""
    lines = list((dev.get("skus") or {}).values())
    exact = [line for line in lines if line["name"] == measured]
    chosen = lines[:1] if measured is None else exact or [s for s in lines if s["name"] == ANY]
    line = dict(chosen[0]) if chosen else {}
    out = {k: v for k, v in dev.items() if k != "skus"} | {
        "sku": (measured if line.get("name") == ANY and measured else line.get("sku"))
        or measured
        or name,
        "sku_name": line.get("name"),
        "source": line.get("source", ""),
        "peak_tflops": peaks_of(line.get("peak_tflops") or {}),
        "lab_band_tflops": line.get("lab_band_tflops") or {},
        "lab_done_tflops": line.get("lab_done_tflops") or {},
        "published": line.get("published") or [],
        "missing": None,
        "lab_sku": None,
        "lab_line": None,
    }
    figures = ("memory_bandwidth_gbps", "memory_gb", "peak_clock_mhz", "sm_count", "clock_ghz")
    for figure in (*figures, "cost_per_hour"):
        out[figure] = line.get(figure)
    if not line:
        out["missing"] = f"no datasheet for {measured!r} in conf/device/{name}.yaml, so no MFU" + (
            " (a MIG slice: a share of its GPU, which no datasheet states)"
            if " MIG " in f" {measured} "
            else f": add a line under skus with name: {measured} (docs/configuration.md: adding a SKU)"
        )
    # The line the lab's band and done threshold were written for, whichever SKU was measured.
    lab = next((s for s in lines if s.get("lab_band_tflops") or s.get("lab_done_tflops")), None)
    if lab:
        out["lab_line"] = {k: lab.get(k) or {} for k in ("lab_band_tflops", "lab_done_tflops")}
        out["lab_line"]["sku"] = lab["sku"]
        if not chosen or lab is not chosen[0]:
            out["lab_sku"] = lab["sku"]  # written for another SKU: not applied to this one
    return cast("JudgedDevice", out)
