"""Sweep shapes, and a sweep measured within its budget, on the CPU at tiny sizes."""

from roofline.configuration.measuring_config import bench_settings
from roofline.measuring.sweep import measure_sweep, sweep_shapes
from tests.conftest import FINGERPRINT, LAPTOP, config, device


def cfg(**over):
    base = config({})
    base.merge_with(
        {
            "sweep": {
                "name": "t",
                "budget_s": {"cpu": 60.0, "cuda": 60.0},
                "min_seconds": 0.0,
                "square": {"cpu": [64, 16], "cuda": [4096]},
                "skinny_m": [1, 4],
                "skinny_nk": {"cpu": 32, "cuda": 8192},
                "best_shape": {"cpu": [[48, 40, 32]], "cuda": []},
            }
            | over,
            "bench": {"repeats": 2, "warmup": 1},
        }
    )
    return base


def test_sweep_shapes_span_the_ridge_cheapest_first():
    # FLOPs: 16^3 = 4096, 1x32x32 = 1024, 4x32x32 = 4096, 48x40x32 = 61440, 64^3 = 262144 (x2 each).
    assert sweep_shapes(cfg().sweep, "cpu") == [
        ("skinny", [1, 32, 32]),
        ("square", [16, 16, 16]),
        ("skinny", [4, 32, 32]),
        ("best-shape", [48, 40, 32]),
        ("square", [64, 64, 64]),
    ]
    assert sweep_shapes(cfg().sweep, "cuda") == [
        ("skinny", [1, 8192, 8192]),
        ("skinny", [4, 8192, 8192]),
        ("square", [4096, 4096, 4096]),
    ]
    assert sweep_shapes(config({}).sweep, "cpu") == []  # sweep=none


CPU = dict(kind="cpu", sku="laptop", clock_ghz=3.0, dtypes=["float32"], shapes=[[8, 8, 8]])


def swept(c) -> dict:
    """The laptop's CPU swept under config `c`, quietly."""
    return measure_sweep(
        "cpu",
        device(**CPU),
        bench_settings(c),
        c.sweep,
        LAPTOP["cpu"],
        FINGERPRINT,
        log=lambda _: None,
    )


def test_a_sweep_measures_every_point_and_labels_its_series():
    c = cfg()
    record = swept(c)
    assert record["status"] == "measured" and record["sweep"] == "t"
    assert [(r["series"], r["m"], r["status"]) for r in record["rows"]] == [
        ("skinny", 1, "measured"),
        ("square", 16, "measured"),
        ("skinny", 4, "measured"),
        ("best-shape", 48, "measured"),
        ("square", 64, "measured"),
    ]


def test_points_past_the_budget_are_skipped_not_measured():
    c = cfg(budget_s={"cpu": 0.0, "cuda": 0.0})
    record = swept(c)
    assert {r["status"] for r in record["rows"]} == {"skipped"}
    assert record["rows"][0]["reason"] == "the sweep's 0 s budget ran out"
    assert all(not r["samples_s"] for r in record["rows"])
