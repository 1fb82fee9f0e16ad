"""The results schema, aggregation, report and plot, on recorded results with known answers."""

import dataclasses
import json

import pandas as pd
import pytest

from roofline import schema
from roofline.aggregate import load_results, manifest, results_table
from roofline.plot import draw
from roofline.report import appendix, render
from roofline.schema import SchemaError, empty_row, measured_row, row_from_dict, write_text_atomic
from tests.conftest import config, device

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
    assert all(getattr(row, name) is None for name in schema.NUMBERS)


def good_row():
    return dataclasses.asdict(
        measured_row("cpu", "float32", [64, 64, 64], [2.0, 1.0, 3.0], 0.5, "x", 0.0)
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"status": "great"}, "status 'great'"),
        ({"median_s": -1.0}, "median_s=-1.0"),
        ({"mfu": float("nan")}, "mfu=nan"),
        ({"median_s": 1.5}, "is not the median of samples_s"),
        ({"speed": 3}, "unknown fields ['speed']"),
        ({"status": "pending"}, "a pending row carries numbers"),
    ],
)
def test_a_corrupt_row_names_the_file_and_row(edit, message):
    with pytest.raises(SchemaError) as err:
        row_from_dict(good_row() | edit, "results.json, row 3")
    assert "results.json, row 3" in str(err.value) and message in str(err.value)


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    path.write_text("old")

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(schema.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(path, "new")
    assert path.read_text() == "old"
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


CPU = device(
    kind="cpu", sku="laptop", cost_per_hour=0.0, dtypes=["float32", "float16"], shapes=[[N, N, N]]
)
H100 = device(
    kind="cuda",
    sku="NVIDIA H100 80GB SXM5",
    cost_per_hour=3.0,
    peak_tflops={"float16": 989.4, "bfloat16": 989.4},
    memory_bandwidth_gbps=3350,
    dtypes=["float16", "bfloat16"],
    shapes=[[N, N, N]],
)


def recorded(tmp_path):
    """A measured CPU (one row skipped) and a pending H100, as their results.json files."""
    cpu_rows = [
        measured_row(
            "cpu", "float32", [N, N, N], [3.5, 3.4, 3.6], 0.49, "2 cores x 3.83 GHz x 64", 4e-7
        ),
        empty_row("cpu", "float16", [N, N, N], "skipped", "no native float16 on this CPU"),
    ]
    cpu = {
        "device": "cpu",
        "sku": "laptop",
        "status": "measured",
        "hardware": {"model": "Laptop CPU", "logical_cores": 2, "isa": ["avx2"]},
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
        "rows": [dataclasses.asdict(r) for r in cpu_rows],
    }
    h100 = {
        "device": "h100",
        "sku": "NVIDIA H100 80GB SXM5",
        "status": "pending",
        "rows": [
            dataclasses.asdict(empty_row("h100", d, [N, N, N], "pending", "never measured"))
            for d in ("float16", "bfloat16")
        ],
    }
    paths = {}
    for name, record in {"cpu": cpu, "h100": h100}.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(record))
    return {name: load_results(name, path) for name, path in paths.items()}


def test_aggregate_makes_one_row_per_point_and_a_manifest(tmp_path):
    records = recorded(tmp_path)
    table = results_table(records)
    assert list(table.device) == ["cpu", "cpu", "h100", "h100"]
    assert list(table.status) == ["measured", "skipped", "pending", "pending"]
    assert table.loc[2:, ["median_s", "achieved_tflops", "mfu"]].isna().all().all()
    assert table.repeats.iloc[0] == 3
    info = manifest(config({"cpu": CPU, "h100": H100}, seed=7), records)
    assert info["bench"]["seed"] == 7
    assert info["devices"]["cpu"]["run_cost_usd"] == 0.0
    assert (
        info["devices"]["h100"]["status"] == "pending"
        and "run_cost_usd" not in info["devices"]["h100"]
    )
    assert info["devices"]["h100"]["datasheet"]["peak_tflops"]["float16"] == 989.4


def test_a_run_costs_its_hours_times_the_price(tmp_path):
    records = recorded(tmp_path)
    priced = device(
        **{
            **dict(kind="cpu", sku="laptop", dtypes=["float32"], shapes=[[N, N, N]]),
            "cost_per_hour": 1.5,
        }
    )
    assert (
        manifest(config({"cpu": priced, "h100": H100}), records)["devices"]["cpu"]["run_cost_usd"]
        == 3.0
    )


def test_aggregate_refuses_a_results_file_for_another_device(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"device": "a100", "rows": []}))
    with pytest.raises(SchemaError, match="not a results record for device 'h100'"):
        load_results("h100", path)
    with pytest.raises(SchemaError, match="dvc pull"):
        load_results("h100", tmp_path / "missing.json")


def test_report_explains_the_measured_and_shows_how_to_measure_the_pending(tmp_path):
    records = recorded(tmp_path)
    table = results_table(records)
    text = render(table, manifest(config({"cpu": CPU, "h100": H100}), records))
    assert "![roofline](roofline.png)" in text
    assert "**float32 8192×8192×8192** ran at **0.3141 TFLOP/s**" in text  # 2*8192^3 / 3.5 s
    assert "MFU 64.1%" in text  # 0.3141 / 0.49
    assert "float16 skipped: no native float16 on this CPU" in text
    assert "### h100: NVIDIA H100 80GB SXM5 (pending)" in text
    assert "uv run dvc pull --allow-missing && uv run dvc repro && uv run dvc push" in text
    assert "float16 ridge 295 FLOP/byte" in text


def test_plot_draws_every_device(tmp_path):
    records = recorded(tmp_path)
    info = json.loads(json.dumps(manifest(config({"cpu": CPU, "h100": H100}), records)))
    csv = tmp_path / "results.csv"
    results_table(records).to_csv(csv, index=False)
    fig = draw(pd.read_csv(csv), info)
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert any(label.startswith("h100 (pending): datasheet 3350 GB/s") for label in labels)
    assert "measured float32" in labels
    points = [tuple(p) for c in fig.axes[0].collections for p in c.get_offsets()]
    assert points == [pytest.approx((8192 / 6, 2 * 8192**3 / 3.5 / 1e12))]  # (FLOP/byte, TFLOP/s)
    roof_labels = [t.get_text() for t in fig.axes[0].texts]
    assert roof_labels == ["cpu float32 0.49", "h100 float16 989"]
    fig.savefig(tmp_path / "roofline.png")
    assert (tmp_path / "roofline.png").stat().st_size > 10_000


def test_report_has_the_breakdown_cost_and_roofline_check_and_an_appendix(tmp_path):
    records = recorded(tmp_path)
    sweep_row = measured_row("cpu", "float32", [4096, 4096, 4096], [0.4], 0.49, "computed", 0.0)
    sweep_row.series = "square"
    sweeps = {"cpu": {"rows": [sweep_row]}}
    table = results_table(records, sweeps)
    info = json.loads(json.dumps(manifest(config({"cpu": CPU, "h100": H100}), records)))
    text = render(table, info)
    assert "4096×4096×4096" not in text.split("## Gaps")[0]  # the one-page table is the lab's rows
    assert "- dense peak: **0.49 TFLOP/s**" in text
    # 2*4096^3 / 0.4 s = 0.3436 TFLOP/s, the best float32 measured: the ceiling.
    assert (
        "- measured compute ceiling: **0.3436 TFLOP/s**; best float32 shape measured, 4096x4096x4096 (square)"
        in text
    )
    assert (
        "- achieved: **0.3141 TFLOP/s**; what remains: 91.4% of the step above is achieved" in text
    )
    assert "Cost: own machine, no hourly price; the run took 7200 s." in text
    # 8192^3 predicted at the ceiling: 1.0995e12 / 0.3436e12 = 3.2 s; measured 3.5 s: +9%.
    assert (
        "2 compute-bound points, median |error| 4.7%, worst +9% at float32 8192×8192×8192 (lab): "
        "compute-bound below the best shape's rate" in text
    )
    extra = appendix(table, info)
    assert (
        "| square | float32 | 4096×4096×4096 | 682.7 | 0.3436 | 0.4 | 0.4 | +0% | compute |"
        in extra
    )
    assert "- lab float16 8192×8192×8192: skipped: no native float16 on this CPU" in extra
