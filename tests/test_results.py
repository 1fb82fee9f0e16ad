"""The results schema, aggregation (measurements joined with their interpretation), report and
plot, on recorded results with known answers."""

import dataclasses
import json
import re

import pandas as pd
import pytest

from roofline.core import files
from roofline.core.files import write_text_atomic
from roofline.core.measurement import (
    SCHEMA_VERSION,
    SchemaError,
    empty,
    measurement,
    measurement_from_dict,
)
from roofline.interpretation.aggregate import aggregate, load_record
from roofline.interpretation.tables import load_table
from roofline.rendering.appendix import appendix
from roofline.rendering.plot import draw, interactive
from roofline.rendering.report import render
from tests.conftest import config, device, empty_row, measured_row

N = 8192


def test_measured_row_derives_every_figure_from_the_median():
    # 8192^3 float16 in 1.1, 1.0, 1.2 s: median 1.1 s; 2*8192^3 FLOP = 1.0995e12.
    row = measured_row("h100", "float16", [N, N, N], [1.1, 1.0, 1.2], 989.4, "datasheet", 1e-4)
    assert row.median_s == 1.1 and row.min_s == 1.0 and row.max_s == 1.2
    assert row.spread == pytest.approx(0.2 / 1.1)
    assert row.achieved_tflops == pytest.approx(2 * N**3 / 1.1 / 1e12)
    assert row.achieved_bw_gbps == pytest.approx(3 * N * N * 2 / 1.1 / 1e9)
    assert row.arithmetic_intensity == pytest.approx(N / 3)
    assert row.mfu == pytest.approx(2 * N**3 / 1.1 / 1e12 / 989.4)
    assert row.flag == ""


def test_a_result_above_the_dense_peak_is_flagged_as_a_bug():
    row = measured_row("a100", "float16", [N, N, N], [0.001], 312.0, "datasheet", 0.0)
    assert "above the dense peak" in row.flag and "a bug" in row.flag


def test_pending_rows_carry_no_numbers():
    row = empty_row("a100", "float16", [N, N, N], "pending", "never measured")
    numbers = [f.name for f in dataclasses.fields(row) if f.default is None]
    assert {"median_s", "achieved_tflops", "mfu", "check_error", "power_w"} <= set(numbers)
    assert all(getattr(row, name) is None for name in numbers) and not row.samples_s


def test_a_measurement_holds_no_interpretation():
    point = dataclasses.asdict(measurement("h100", "float16", [N, N, N], [1.0], 1e-4))
    assert not {"peak_tflops", "mfu", "flag", "median_s", "achieved_tflops"} & set(point)


def good_point():
    return dataclasses.asdict(measurement("cpu", "float32", [64, 64, 64], [2.0, 1.0, 3.0], 0.0))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"status": "great"}, "field status: 'great'; allowed: measured, pending"),
        ({"check_error": -1.0}, "field check_error: -1.0"),
        ({"power_w": float("nan")}, "field power_w: nan; allowed: float or null"),
        ({"power_w": "300"}, "field power_w: '300'; allowed: float or null"),
        ({"samples_s": [1.0, -2.0]}, "samples_s: 1 of its 2 samples are not > 0, the first -2.0"),
        ({"samples_s": [1.0, "2"]}, "samples_s: 1 of its 2 values are not finite numbers"),
        ({"samples_s": []}, "field samples_s: [] in a measured row"),
        ({"m": "64"}, "field m: '64'; allowed: a whole number >= 1"),
        ({"m": 64.0}, "field m: 64.0; allowed: a whole number >= 1"),
        ({"m": 0}, "field m: 0; allowed: a whole number >= 1"),
        ({"n": True}, "field n: True; allowed: a whole number >= 1"),
        ({"dtype": "float99"}, "field dtype: 'float99'; allowed: float32, "),
        ({"backend": 3}, "field backend: 3; allowed: str"),
        ({"device": 1}, "field device: 1; allowed: str"),
        ({"status": "pending"}, "a pending row carries numbers"),
    ],
)
def test_a_corrupt_row_names_the_file_row_and_field(edit, message):
    with pytest.raises(SchemaError) as err:
        measurement_from_dict(good_point() | edit, "results.json, row 3")
    assert "results.json, row 3" in str(err.value) and message in str(err.value)


def test_a_field_added_with_a_default_needs_no_new_schema_version():
    """Newer code of the same version added a field: this code reads it as absent; and a record
    from before a field with a default reads as its default. Neither is refused."""
    newer = good_point() | {"added_by_newer_code": 1.0, "mfu": 0.5}  # mfu: never recorded
    assert measurement_from_dict(newer, "results.json, row 3") == measurement_from_dict(
        good_point(), "results.json, row 3"
    )
    older = {k: v for k, v in good_point().items() if k != "telemetry_errors"}
    assert measurement_from_dict(older, "results.json, row 3").telemetry_errors == ""
    with pytest.raises(SchemaError, match=r"row 3: missing fields \['dtype'\]"):
        measurement_from_dict(
            {k: v for k, v in older.items() if k != "dtype"}, "results.json, row 3"
        )


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    path.write_text("old")

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(path, "new")
    assert path.read_text() == "old"
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


CPU = dict(
    kind="cpu", sku="laptop", cost_per_hour=0.0, dtypes=["float32", "float16"], shapes=[[N, N, N]]
)
H100 = dict(
    kind="cuda",
    sku="NVIDIA H100 80GB SXM5",
    cost_per_hour=3.0,
    peak_tflops={"float16": 989.4, "bfloat16": 989.4},
    memory_bandwidth_gbps=3350,
    dtypes=["float16", "bfloat16"],
    shapes=[[N, N, N]],
)
# The recorded CPU: 2 cores with AVX-512 (64 FLOP/cycle) at a measured 3.828125 GHz, so its
# computed float32 peak is 2 x 3.828125 x 64 = 490 GFLOP/s.
CPU_FOUND = {"model": "Laptop CPU", "logical_cores": 2, "isa": ["avx2", "avx512f", "fma"]}


def recorded(tmp_path):
    """A measured CPU (one point skipped) and a pending H100, as their results.json files, and
    their (empty) sweeps."""
    cpu_points = [
        measurement("cpu", "float32", [N, N, N], [3.5, 3.4, 3.6], 4e-7),
        empty("cpu", "float16", [N, N, N], "skipped", "no native float16 on this CPU"),
    ]
    cpu = {
        "device": "cpu",
        "status": "measured",
        "hardware": CPU_FOUND,
        "found": CPU_FOUND,
        "clock": {"ghz": 3.828125, "source": "measured all-core clock"},
        "run": {
            "started_at": "2026-11-30T00:00:00+00:00",
            "wall_s": 7200.0,
            "git_revision": "abc",
            "threads": 2,
            "versions": {"torch": "2.9", "mkl": "2024.2", "onednn": "3.1", "cuda": None},
        },
        "memory": {
            "bytes_moved": 2 << 30,
            "median_s": 0.1,
            "min_s": 0.09,
            "max_s": 0.11,
            "spread": 0.2,
            "gbps": 21.47,
            "samples_s": [0.1],
        },
        "rows": [dataclasses.asdict(p) for p in cpu_points],
    }
    h100 = {
        "device": "h100",
        "status": "pending",
        "rows": [
            dataclasses.asdict(empty("h100", d, [N, N, N], "pending", "never measured"))
            for d in ("float16", "bfloat16")
        ],
    }
    records = {}
    for name, record in {"cpu": cpu, "h100": h100}.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(record))
        records[name] = load_record(name, path)
    return records, {"cpu": None, "h100": None}


def aggregated(tmp_path, cpu=None, h100=None, **bench):
    """(results table, manifest) of the recorded results under this interpretation, the manifest
    through JSON as the report and plot stages read it."""
    cfg = config(
        {"cpu": device(**CPU | (cpu or {})), "h100": device(**H100 | (h100 or {}))}, **bench
    )
    table, _, info, _ = aggregate(cfg, *recorded(tmp_path))
    return table, json.loads(json.dumps(info))


def test_aggregate_makes_one_row_per_point_and_a_manifest(tmp_path):
    table, info = aggregated(tmp_path, seed=7)
    assert list(table.device) == ["cpu", "cpu", "h100", "h100"]
    assert list(table.status) == ["measured", "skipped", "pending", "pending"]
    assert table.loc[2:, ["median_s", "achieved_tflops", "mfu"]].isna().all().all()
    assert table.repeats.iloc[0] == 3
    assert table.peak_tflops.iloc[0] == pytest.approx(0.49)
    assert table.peak_source.iloc[0] == (
        "2 cores x 3.83 GHz (measured all-core clock) x 64 FLOP/cycle, AVX-512 FMA, 2 units assumed"
    )
    assert table.reason.iloc[2] == (
        "never measured: run `uv run dvc repro` on a machine with NVIDIA H100 80GB SXM5"
    )
    assert info["bench"]["seed"] == 7
    assert info["devices"]["cpu"]["run_cost_usd"] == 0.0
    assert info["devices"]["cpu"]["peaks_used"]["float32"]["tflops"] == pytest.approx(0.49)
    assert (
        info["devices"]["h100"]["status"] == "pending"
        and "run_cost_usd" not in info["devices"]["h100"]
    )
    assert info["devices"]["h100"]["datasheet"]["peak_tflops"]["float16"] == 989.4


def test_a_price_or_peak_changes_the_interpretation_not_the_measurement(tmp_path):
    table, info = aggregated(tmp_path, cpu={"cost_per_hour": 1.5, "peak_tflops": {"float32": 2.0}})
    achieved = 2 * N**3 / 3.5 / 1e12
    assert info["devices"]["cpu"]["run_cost_usd"] == 3.0  # 2 h at $1.5/h
    assert table.peak_tflops.iloc[0] == 2.0 and table.peak_source.iloc[0] == "set in conf"
    assert table.mfu.iloc[0] == pytest.approx(achieved / 2.0)
    # A conf clock replaces the measured one in the computed peak: 2 x 2.5 x 64 = 320 GFLOP/s.
    table, _ = aggregated(tmp_path, cpu={"clock_ghz": 2.5})
    assert table.peak_tflops.iloc[0] == pytest.approx(0.32)
    assert "2.50 GHz (set in conf)" in table.peak_source.iloc[0]


NEWER = SCHEMA_VERSION + 1  # a record by a version of this lab newer than this one


def test_a_record_is_checked_whole_and_a_newer_one_is_refused_with_the_way_out(tmp_path):
    records, _ = recorded(tmp_path)  # what load_record made of cpu.json, rows parsed
    good = json.loads((tmp_path / "cpu.json").read_text())
    path = tmp_path / "results.json"  # the name tells it which record it is
    cases = [
        (
            {"schema": NEWER},
            f"schema version {NEWER}, and this code reads up to {NEWER - 1}: it was written by a "
            "newer",
        ),
        ({"schema": NEWER, "rows": [{"future_field": 1}]}, f"schema version {NEWER}"),
        ({"status": "measured-v2"}, "field status: 'measured-v2'; allowed: measured, pending"),
        ({"run": None}, "field run: None"),
        ({"run": good["run"] | {"wall_s": "long"}}, "field run.wall_s: 'long'"),
        ({"memory": good["memory"] | {"gbps": None}}, "field memory.gbps: None"),
        ({"device": "h100"}, "not a record of device 'cpu'"),
    ]
    for edit, message in cases:
        path.write_text(json.dumps(good | edit))
        with pytest.raises(SchemaError, match=re.escape(message)) as err:
            load_record("cpu", path)
        assert str(path) in str(err.value)
        if "schema version" in message:
            assert "Update this checkout (`git pull`)" in str(err.value)
    path.write_text(json.dumps(good | {"schema": 2}))
    assert load_record("cpu", path)["rows"] == records["cpu"]["rows"]


def test_aggregate_refuses_a_results_file_for_another_device(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"device": "a100", "rows": []}))
    with pytest.raises(SchemaError, match="not a record of device 'h100'"):
        load_record("h100", path)
    with pytest.raises(SchemaError, match="dvc pull"):
        load_record("h100", tmp_path / "missing.json")


def test_report_explains_the_measured_and_shows_how_to_measure_the_pending(tmp_path):
    table, info = aggregated(tmp_path)
    text = render(table, info)
    assert "![roofline](roofline.png)" in text
    # 2*8192^3 / 3.5 s = 0.3141 TFLOP/s; against the computed 0.49: MFU 64.1%.
    assert "| cpu | Laptop CPU | float32 | 0.3141 | 64.1% | 0.2 | 1365 |  |  | no band |" in text
    assert (
        "**cpu** (Laptop CPU) ran float32 8192×8192×8192 at **0.3141 TFLOP/s**, MFU 64.1% of "
        "the dense 0.49." in text
    )
    assert "| h100 | NVIDIA H100 80GB SXM5 | float16 |  |  |  |  |  |  | pending |" in text
    assert "- **h100** (NVIDIA H100 80GB SXM5): pending; `uv run dvc repro` on a machine" in text
    extra = appendix(table, info)
    assert "**float32 8192×8192×8192** ran at **0.3141 TFLOP/s**" in extra
    assert "float16 (torch) skipped: no native float16 on this CPU" in extra
    assert "### h100: NVIDIA H100 80GB SXM5 (pending)" in extra
    assert "uv run dvc pull --allow-missing && uv run dvc repro && uv run dvc push" in extra
    assert "float16 ridge 295 FLOP/byte" in extra


def test_plot_draws_every_device(tmp_path):
    table, info = aggregated(tmp_path)
    csv = tmp_path / "results.csv"
    table.to_csv(csv, index=False)
    fig = draw(load_table(csv), info)
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert any(label.startswith("h100 (pending): datasheet 3350 GB/s") for label in labels)
    assert "measured float32" in labels
    points = [tuple(p) for c in fig.axes[0].collections for p in c.get_offsets()]
    assert points == [pytest.approx((8192 / 6, 2 * 8192**3 / 3.5 / 1e12))]  # (FLOP/byte, TFLOP/s)
    roof_labels = [t.get_text() for t in fig.axes[0].texts]
    assert roof_labels == ["cpu float32 0.49", "h100 float16 989"]
    fig.savefig(tmp_path / "roofline.png")
    assert (tmp_path / "roofline.png").stat().st_size > 10_000
    # Plain numbers on the log axes, as drawn: no mathtext powers of ten.
    xs = {t.get_text() for t in fig.axes[0].get_xticklabels()}
    assert {"0.1", "1", "10", "100", "1000", "10000"} <= xs
    ys = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "1000" in ys and not any("$" in tick or "e" in tick for tick in xs | set(ys))


def test_a_kernel_of_your_own_wears_a_marker_of_its_own_on_both_plots(tmp_path):
    from roofline.rendering.plot import draw_sweeps

    table, info = aggregated(tmp_path)
    measured = table[table.status == "measured"]
    own = "kernels.tiled:tiled"
    rows = pd.concat([table, measured.assign(backend="numpy"), measured.assign(backend=own)])
    for fig in (draw(rows, info), draw_sweeps(rows, info)):
        drawn = [c for c in fig.axes[0].collections if len(c.get_offsets())]
        looks = [(c.get_hatch(), len(c.get_facecolor())) for c in drawn]
        # torch filled, numpy hollow (no face), yours hatched and hollow: three looks, one each.
        assert looks == [(None, 1), (None, 0), ("////", 0)], looks
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert any(own in label for label in legend), legend


def test_report_has_the_breakdown_cost_and_roofline_check_and_an_appendix(tmp_path):
    records, sweeps = recorded(tmp_path)
    point = measurement("cpu", "float32", [4096, 4096, 4096], [0.4], 0.0)
    point.series = "square"
    sweeps["cpu"] = {
        "sweep": "full",
        "status": "measured",
        "run": {"started_at": "2026-11-30T01:00:00+00:00", "wall_s": 60.0, "git_revision": "abc"},
        "rows": [point],
    }
    cfg = config({"cpu": device(**CPU), "h100": device(**H100)})
    table, _, info, _ = aggregate(cfg, records, sweeps)
    info = json.loads(json.dumps(info))
    assert "4096×4096×4096" not in render(table, info)  # the page's table: the lab's kernel
    text = appendix(table, info)
    assert "- dense peak: **0.49 TFLOP/s**" in text
    # A CPU's breakdown is its own run's steps (none in this record: an older run's), never
    # another shape's: what remains holds the gap, 0.3141 / 0.49.
    assert "- measured compute ceiling" not in text
    assert (
        "- achieved: **0.3141 TFLOP/s**; what remains (not split by a measurement): achieved is "
        "64.1% of the step above" in text
    )
    assert "Cost: own machine, no hourly price; the run took 7200 s." in text
    # 8192^3 predicted at the ceiling: 1.0995e12 / 0.3436e12 = 3.2 s; measured 3.5 s: +9.4%.
    # The 4096^3 point defines the ceiling, so it checks nothing.
    assert (
        "1 compute-bound point, median |error| 9.4%, worst +9% at float32 8192×8192×8192 (lab, torch): "
        "compute-bound below the best shape's rate" in text
    )
    extra = text
    assert (
        "| square | float32 | 4096×4096×4096 | 682.7 | 0.3436 | 0.4 | 0.4 | defines it | compute |"
        in extra
    )
    assert "- lab float16 8192×8192×8192: skipped: no native float16 on this CPU" in extra


def test_with_no_sweep_the_report_says_what_it_cannot_check(tmp_path):
    text = appendix(*aggregated(tmp_path))
    assert "Roofline check: nothing to check yet." in text and "sweep=short" in text
    assert "median |error|" not in text  # no error that is zero by construction
    assert "- threading across the cores: not measured: not measured by this record's run" in text
    # The achieved figure is then a fraction of the dense peak, the last step with a number.
    assert "what remains (not split by a measurement): achieved is 64.1% of the step above" in text
    assert "which with no sweep is the lab kernel itself" in text


def test_the_interactive_roofline_has_roof_corners_and_points_with_one_set_of_keys(tmp_path):
    table, info = aggregated(tmp_path)
    csv = tmp_path / "results.csv"
    table.to_csv(csv, index=False)
    data = interactive(load_table(csv), info)
    assert len({tuple(sorted(d)) for d in data}) == 1  # DVC's plots need one set of keys
    (point,) = [d for d in data if d["kind"] == "point"]
    assert point["shape"] == "8192x8192x8192" and point["mfu"] == pytest.approx(0.641, abs=1e-3)
    # The H100's datasheet roof: 3350 GB/s from 0.1 FLOP/byte, the ridge at 295.3, flat to 1e4.
    h100 = [(d["arithmetic_intensity"], d["tflops"]) for d in data if d["device"] == "h100"]
    assert h100 == [
        (0.1, pytest.approx(0.335)),
        (pytest.approx(989.4 / 3.35), 989.4),
        (1e4, 989.4),
    ]


def test_every_drawn_device_gets_a_colour_however_many_there_are():
    from roofline.rendering.plot import palette

    names = [f"gpu{i}" for i in range(12)]
    colors = palette(names)
    assert list(colors) == names and colors["gpu0"] == colors["gpu8"]  # the palette cycles


def measured_h100(tmp_path, name: str) -> dict:
    """The pending H100 of `recorded` measured instead, on a GPU torch names `name`."""
    records, sweeps = recorded(tmp_path)
    found = {"name": name, "compute_capability": "9.0", "sm_count": 114, "memory_gib": 80}
    seconds = 2 * N**3 / 500e12  # 500 TFLOP/s
    records["h100"] = dict(
        records["cpu"],
        device="h100",
        hardware=found,
        found=found,
        rows=[measurement("h100", "float16", [N, N, N], [seconds], 1e-3)],
    )
    return records, sweeps


TWO_LINES = {
    "kind": "cuda",
    "dtypes": ["float16"],
    "shapes": [[N, N, N]],
    "skus": {
        "sxm5": {
            "name": "NVIDIA H100 80GB HBM3",
            "sku": "H100 SXM5 80GB",
            "peak_tflops": {"float16": 989.4},
            "lab_band_tflops": {"float16": [700.0, 850.0]},
            "lab_done_tflops": {"float16": 600},
        },
        "pcie": {
            "name": "NVIDIA H100 PCIe",
            "sku": "H100 PCIe 80GB",
            "peak_tflops": {"float16": 756.5},
        },
    },
}


@pytest.mark.parametrize(
    ("name", "sku", "peak", "says"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB", 989.4, "| 700-850 ±20% |  | below band |"),
        (
            "NVIDIA H100 PCIe",
            "H100 PCIe 80GB",
            756.5,
            "The lab's band and done threshold were written for H100 SXM5 80GB; this is H100 "
            "PCIe 80GB, so they are not applied.",
        ),
        (
            "NVIDIA H100 SXM5 96GB",
            "NVIDIA H100 SXM5 96GB",
            None,
            "No datasheet for 'NVIDIA H100 SXM5 96GB' in conf/device/h100.yaml, so no MFU: add a "
            "line under skus with name: NVIDIA H100 SXM5 96GB (docs/configuration.md: adding a SKU).",
        ),
    ],
)
def test_the_sku_measured_chooses_the_datasheet_and_the_lab_band_applies_to_its_own(
    tmp_path, name, sku, peak, says
):
    cfg = config({"cpu": device(**CPU), "h100": device(**TWO_LINES)})
    table, _, info, _ = aggregate(cfg, *measured_h100(tmp_path, name))
    (row,) = table[table.device == "h100"].itertuples()
    assert row.sku == sku and row.status == "measured" and row.achieved_tflops == pytest.approx(500)
    assert (row.peak_tflops == peak) if peak else (pd.isna(row.peak_tflops) and pd.isna(row.mfu))
    manifest = json.loads(json.dumps(info))
    text = render(table, manifest)
    assert says in text
    extra = appendix(table, manifest)
    assert ("the lab's sanity band" in extra) == (sku == "H100 SXM5 80GB")


@pytest.mark.parametrize(
    ("achieved", "problem"),
    [
        (760.0, None),  # inside 700-850, above 90% of the 736.2 published
        (500.0, "float16 500.0 TFLOP/s is below the lab's band 700-850 +-20% (560-1020)"),
        (600.0, "is 19% below the 736.2 published for this SKU (zzc0721"),  # in band (>= 560)
    ],
)
def test_the_check_command_exits_1_on_a_device_below_its_band_or_a_published_figure(
    tmp_path, capsys, achieved, problem
):
    from roofline import check
    from roofline.interpretation.lab_config import load_lab_params
    from tests.machines import ROOT

    cfg = load_lab_params(ROOT / "params.yaml")  # the lab's own datasheets and bands
    records, sweeps = measured_h100(tmp_path, "NVIDIA H100 80GB HBM3")
    seconds = 2 * N**3 / (achieved * 1e12)
    records["h100"]["rows"] = [measurement("h100", "float16", [N, N, N], [seconds], 1e-3)]
    records = {name: records[name] for name in ("cpu", "h100")}
    cfg.devices = {name: cfg.devices[name] for name in records}
    table, _, info, _ = aggregate(cfg, records, sweeps)
    out = tmp_path / "deliverables"
    out.mkdir()
    table.to_csv(out / "results.csv", index=False)
    (out / "manifest.json").write_text(json.dumps(info))
    with pytest.raises(SystemExit) as exit_:
        check.main(["--dir", str(out), "h100"])
        raise SystemExit(0)
    said = capsys.readouterr().out
    if problem is None:
        assert exit_.value.code == 0 and "every measured device is inside its band" in said
    else:
        assert exit_.value.code == 1 and problem in said and said.startswith("h100 (H100 SXM5")


def test_the_page_keeps_config_order_and_names_each_older_stages_revision(tmp_path):
    from roofline.interpretation.manifest import as_manifest
    from roofline.rendering.report import older_sentence, shown
    from tests.manifests import entry

    table, manifest = aggregated(tmp_path)
    manifest["devices"] = dict(reversed(manifest["devices"].items()))  # as JSON sorts them
    assert shown(table, as_manifest(manifest))[0] == ["cpu", "h100"]
    older = entry(
        kind="cuda",
        measured_by_older={
            "benchmark": {"older": ["code"], "git_revision": "a" * 40, "measured_at": "T1"},
            "sweep": {
                "older": ["params"],
                "git_revision": "b" * 40 + "+dirty",
                "measured_at": "T2",
            },
        },
    )
    said = older_sentence("h100", older)
    assert said.startswith(
        "⚠ Measured by older measuring code and params (benchmark at revision aaaaaaaaaaaa, T1; "
        "sweep at revision bbbbbbbbbbbb+dirty, T2): these are that code's numbers; to re-measure"
    ), said
    assert older_sentence("h100", entry(kind="cuda")) == ""
    assert older_sentence("h100", entry(kind="cuda", status="pending")) == ""


def test_a_results_table_with_its_header_only_is_refused_with_the_way_to_remake_it(tmp_path):
    # Rendered as it was, every device read "pending" and the page sent the user to measure.
    table, info = aggregated(tmp_path)
    csv = tmp_path / "results.csv"
    table.head(0).to_csv(csv, index=False)
    with pytest.raises(SchemaError) as refused:
        load_table(csv, devices=info["devices"])
    assert str(refused.value) == (
        f"{csv} has its header only, though manifest.json lists cpu, h100 (aggregate writes a "
        "row for every point of every device, pending or measured); remake it from the recorded "
        "results: `uv run dvc repro --force -s aggregate`"
    )
    table[table.device == "cpu"].to_csv(csv, index=False)
    with pytest.raises(SchemaError, match=r"results.csv has no row of h100, though manifest"):
        load_table(csv, devices=info["devices"])
    lost = info["devices"] | {"h100": info["devices"]["h100"] | {"status": "lost"}}
    assert len(load_table(csv, devices=lost)) == 2  # a lost device has no row to write
    table.to_csv(csv, index=False)
    assert len(load_table(csv, devices=info["devices"])) == len(table)


def test_a_run_under_a_forced_kernel_says_so_on_the_one_page(tmp_path):
    # MKL_ENABLE_INSTRUCTIONS=SSE4_2 took a CPU to MFU 0.6%, and the page said nothing of it.
    table, info = aggregated(tmp_path)
    info["devices"]["cpu"]["environment"] = {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
    said = next(line for line in render(table, info).splitlines() if "**cpu**" in line)
    assert (
        "This run had MKL_ENABLE_INSTRUCTIONS=SSE4_2 set, which forces the library's kernel or "
        "instruction set: unset it, and `uv run dvc repro` measures what the library picks."
    ) in said
    info["devices"]["cpu"]["environment"] = {"OMP_NUM_THREADS": "2"}  # no kernel forced
    said = next(line for line in render(table, info).splitlines() if "**cpu**" in line)
    assert "forces the library's kernel" not in said
