"""A node's GPUs measured at once: one row per GPU under the device's record, the median GPU's
row the device's figure, the slowest and the spread in the report; a single GPU unchanged."""

import csv
import json
import os
import tempfile
import time
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from roofline.core.measurement import measurement
from roofline.interpretation.node import median_gpus, node_spread, other_gpu
from roofline.interpretation.rows import row
from roofline.measuring.benchmark import READY_TIMEOUT_S
from roofline.rendering.report import node_sentence
from tests.fakes.cuda.played_cuda import H100_SXM
from tests.machines import ROOT, STAND_IN, clone, compose, dvc, make_project, results


def json_file(machine: dict) -> str:
    """A machine for $PLAYED_MACHINE, as a JSON file."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
        json.dump(machine, out)
    return out.name


def gpu_row(gpu: int | None, seconds: float, series: str = "lab"):
    point = measurement("h100", "float16", [64] * 3, [seconds] * 3, 0.0)
    point.gpu, point.series = gpu, series
    return row(point, 989.4, "datasheet")


def test_the_median_gpu_row_is_the_figure_and_the_others_move_beside_it():
    rows = median_gpus([gpu_row(i, s) for i, s in enumerate([1.0, 2.0, 1.1, 4.0])])
    figure = [r for r in rows if r.series == "lab"]
    # Rates ascending: GPU 3, 1, 2, 0; of four, the lower middle one: a row measured, GPU 1.
    assert [r.gpu for r in figure] == [1]
    assert sorted(r.gpu for r in rows if r.series == other_gpu("lab")) == [0, 2, 3]
    three = median_gpus([gpu_row(i, s) for i, s in enumerate([1.0, 3.0, 2.0])])
    assert [r.gpu for r in three if r.series == "lab"] == [2]


def test_points_apart_are_judged_apart_and_one_gpu_is_left_as_it_is():
    alone = [gpu_row(None, 1.0), gpu_row(None, 1.0, "sustained")]
    assert [r.series for r in median_gpus(alone)] == ["lab", "sustained"]
    node = median_gpus([gpu_row(0, 1.0), gpu_row(1, 2.0), gpu_row(0, 3.0, "sustained")])
    # Of two, the lower middle one is the slower: a figure both GPUs reach.
    assert [r.series for r in node] == [other_gpu("lab"), "lab", "sustained"]


def test_the_sustained_figure_is_the_same_gpus_as_the_burst_it_is_set_beside():
    bursts = [gpu_row(i, s) for i, s in enumerate([1.0, 2.0, 1.1, 4.0])]  # GPU 1 the median
    sustained = [gpu_row(i, s, "sustained") for i, s in enumerate([1.2, 2.1, 3.0, 4.5])]
    rows = median_gpus(bursts + sustained)
    assert [r.gpu for r in rows if r.series == "lab"] == [1]
    # GPU 2 is the sustained rows' own median; the drop set beside GPU 1's burst is GPU 1's.
    assert [r.gpu for r in rows if r.series == "sustained"] == [1]


def test_the_spread_names_the_slowest_gpu_against_the_fastest():
    rows = median_gpus([gpu_row(i, s) for i, s in enumerate([1.0, 2.0, 1.1, 4.0])])
    table = pd.DataFrame([vars(r) for r in rows])
    figure = SimpleNamespace(**table[table.series == "lab"].iloc[0].to_dict())  # as the report
    spread = node_spread(table, figure)
    assert spread.gpus == 4 and spread.median[0] == 1
    assert spread.slowest[0] == 3 and spread.fastest[0] == 0
    assert spread.spread == pytest.approx(0.75)  # a quarter of the fastest's rate
    said = node_sentence(table, figure)
    assert "The median of its 4 GPUs, measured at once (GPU 1); the slowest, GPU 3" in said
    assert "the slowest, GPU 3, ran" in said and "75.0% below the fastest (GPU 0," in said
    one = pd.DataFrame([vars(gpu_row(None, 1.0))])
    alone = SimpleNamespace(**one.iloc[0].to_dict())
    assert node_spread(one, alone) is None and node_sentence(one, alone) == ""


@pytest.mark.slow
def test_a_four_gpu_node_is_measured_at_once_and_reported_with_its_slowest(tmp_path):
    pod = clone(make_project(tmp_path, podhost=False), tmp_path / "pod", pull=False)
    config = pod / "conf/config.yaml"
    cfg = yaml.safe_load(config.read_text())
    cfg["bench"]["sustained_seconds"] = 0.2  # each GPU's long window too, shortened
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    compose(pod)
    played = {"PYTHONPATH": str(STAND_IN), "PLAYED_MACHINE": "four_gpus", "ROOFLINE_HARDWARE": None}
    out = dvc(pod, "repro", env=played)
    assert "h100: 4 GPUs of it here, measured at once" in out
    record = results(pod, "h100")
    assert record["status"] == "measured" and record["schema"] == 5
    points = {(r["dtype"], r["series"]) for r in record["rows"]}
    assert points == {("float16", "lab"), ("float32", "lab"), ("float16", "sustained")}
    for point in points:  # one row per GPU, each with its own telemetry
        rows = [r for r in record["rows"] if (r["dtype"], r["series"]) == point]
        assert sorted(r["gpu"] for r in rows) == [0, 1, 2, 3]
        assert all(r["status"] == "measured" and r["other_processes"] == "" for r in rows)
        hot = next(r for r in rows if r["gpu"] == 3)
        assert hot["sm_clock_mhz"] == 1200 and hot["clock_reason"] == "hw_thermal_slowdown"
        assert all(r["sm_clock_mhz"] == 1755 for r in rows if r["gpu"] != 3)
        # The time the clock was held, by cause, over each window (the hot GPU's by heat, the
        # others' by power); GPM over a window of a second or more only. The played windows
        # are meant to be shorter, but a sustained one ran 1.4 s where 0.2 s was asked (run
        # alone, untraced: its calls are sized from the lab window's, whose played dispatch was
        # quicker): each row is held to the rule at its own wall time (GPM's clock starts a
        # little apart from the row's: from 0.9 to 1.1 s either is the rule kept).
        for r in rows:
            by_heat = r["gpu"] == 3
            held, free = ("thermal_held_s", "power_held_s")[:: 1 if by_heat else -1]
            assert r[held] > 0 and r[free] == 0, r
            unread = "GPM: not read over a window under 1 s"
            if r["window_s"] < 0.9:
                assert r["gpm_tensor_active_pct"] is None and r["counter_errors"] == unread, r
            elif r["window_s"] > 1.1:
                assert r["gpm_tensor_active_pct"] is not None and r["counter_errors"] == "", r
            else:
                assert (r["gpm_tensor_active_pct"] is None) == (r["counter_errors"] == unread), r

    with (pod / "experiments/x4-roofline/results.csv").open() as table:
        h100 = [r for r in csv.DictReader(table) if r["device"] == "h100"]
    figure = [r for r in h100 if r["dtype"] == "float16" and r["series"] == "lab"]
    others = [r for r in h100 if r["dtype"] == "float16" and r["series"] == other_gpu("lab")]
    assert len(figure) == 1 and len(others) == 3
    assert "3" in {r["gpu"] for r in others}  # the slowed GPU is never the median
    report = (pod / "experiments/x4-roofline/REPORT.md").read_text()
    assert "The median of its 4 GPUs, measured at once (GPU" in report
    assert "the slowest, GPU 3, ran" in report


def test_a_gpu_of_the_node_that_fails_ends_the_stage_at_once_naming_its_error(monkeypatch):
    from roofline.device.timing import BenchSettings
    from roofline.measuring.benchmark import measure_node
    from tests.conftest import device, measuring

    # Each GPU's process plays the machine from its environment, as `dvc repro`'s do.
    machine = {"like": "four_gpus", "gpus": [dict(H100_SXM, uuid=f"gpu-{i}") for i in range(4)]}
    machine["gpus"][2]["broken"] = "uncorrectable ECC error encountered"
    monkeypatch.setenv("PLAYED_MACHINE", json_file(machine))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(STAND_IN), str(ROOT)]))
    monkeypatch.syspath_prepend(str(STAND_IN))  # a spawned process starts from this sys.path
    dev = measuring(device(kind="cuda", dtypes=["float16"], shapes=[[32, 32, 32]]))
    gpus = [{"index": i, "uuid": f"gpu-{i}", "memory_bytes": 80 << 30} for i in range(4)]
    bench = BenchSettings(seed=0, warmup=1, repeats=2, check_rows=4, min_seconds=0.0)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="CUDA error: uncorrectable ECC error encountered"):
        measure_node("h100", dev, bench, gpus, print)
    assert time.monotonic() - started < READY_TIMEOUT_S / 2  # the others did not wait it out
