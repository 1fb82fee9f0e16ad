"""Measured ceilings, the roofline's prediction, quantisation and the gap breakdown, with
answers worked by hand."""

import dataclasses
from types import SimpleNamespace

import pandas as pd
import pytest

from roofline.interpretation.ceilings import (
    Ceiling,
    Step,
    StepId,
    breakdown,
    measured_ceilings,
    per_call_overheads,
    predicted_seconds,
    predictions,
    wave_quantisation,
    why,
)
from roofline.interpretation.manifest import Fma
from tests.conftest import empty_row, measured_row


def table(*rows) -> pd.DataFrame:
    return pd.DataFrame([dataclasses.asdict(r) for r in rows])


def cpu_rows() -> pd.DataFrame:
    x = measured_row(
        "cpu", "float32", [1000, 1000, 1000], [0.02], 0.5, "computed", 0.0
    )  # 0.1 TFLOP/s
    y = measured_row(
        "cpu", "float32", [2000, 2000, 2000], [0.08], 0.5, "computed", 0.0
    )  # 0.2 TFLOP/s
    y.series = "square"
    z = measured_row("cpu", "float32", [1, 4000, 4000], [0.008], 0.5, "computed", 0.0)
    z.series = "skinny"
    pending = empty_row("h100", "float16", [8192] * 3, "pending", "never measured")
    return table(x, y, z, pending)


def test_the_best_measured_point_is_the_ceiling():
    assert measured_ceilings(cpu_rows()) == {
        ("cpu", "float32"): Ceiling(
            tflops=pytest.approx(0.2), shape=(2000, 2000, 2000), series="square", backend="torch"
        )
    }


def test_predicted_time_is_the_slower_of_compute_and_memory():
    assert predicted_seconds(2e12, 1e9, 1.0, 100.0) == 2.0  # 2 s of compute, 10 ms of memory
    assert predicted_seconds(1e9, 1e9, 1.0, 100.0) == 0.01  # 1 ms of compute, 10 ms of memory


def test_prediction_errors_against_the_measured_ceilings():
    pred = predictions(cpu_rows(), {"cpu": 10.0}).set_index("m")
    # 1000^3: 2e9 FLOP at 0.2 TFLOP/s = 10 ms (memory: 12 MB at 10 GB/s = 1.2 ms); measured 20 ms.
    assert pred.loc[1000, "predicted_s"] == pytest.approx(0.01)
    assert pred.loc[1000, "error"] == pytest.approx(1.0) and pred.loc[1000, "bound"] == "compute"
    assert pred.loc[2000, "error"] == pytest.approx(0.0)
    # 1x4000x4000: 64.032 MB at 10 GB/s = 6.4032 ms (compute 0.16 ms); measured 8 ms.
    assert pred.loc[1, "predicted_s"] == pytest.approx(0.0064032)
    assert (
        pred.loc[1, "error"] == pytest.approx(0.0080 / 0.0064032 - 1)
        and pred.loc[1, "bound"] == "memory"
    )
    assert len(pred) == 3  # the pending row has nothing to predict


def test_wave_quantisation_by_hand():
    # 8192 x 8192 in 128 x 256 tiles: 64 x 32 = 2048 tiles; 132 SMs: 16 waves, 2048 / 2112 useful.
    h100 = wave_quantisation(8192, 8192, 132)
    assert (h100.tiles, h100.waves) == (2048, 16)
    assert h100.efficiency == pytest.approx(2048 / 2112)
    assert wave_quantisation(8192, 8192, 108).efficiency == pytest.approx(
        2048 / 2052
    )  # A100: 19 waves
    # 1000 x 1000: 8 x 4 = 32 tiles padded to 1024 x 1024, one wave on 132 SMs.
    small = wave_quantisation(1000, 1000, 132)
    assert small.padding_efficiency == pytest.approx(1e6 / 1024**2)
    assert small.efficiency == pytest.approx(1e6 / 1024**2 * 32 / 132)


def test_why_names_cache_overhead_quantisation_or_memory():
    def row(m, n, k, median, error, bound="compute"):
        return SimpleNamespace(
            m=m, n=n, k=k, dtype="float16", median_s=median, error=error, bound=bound
        )

    assert "fit in the 50 MiB cache" in why(row(512, 512, 512, 1e-4, -0.5), 50 * 2**20, 1e-5, 132)
    # 15 µs of a 20 µs call is the fixed cost the fastest call shows.
    assert why(row(64, 64, 64, 2e-5, 3.0), 50 * 2**20, 1.5e-5, 132).startswith(
        "fixed per-call cost (launch, dispatch, threading): the fastest float16 call measured "
        "spends 15 µs beyond its roofline time, 75% of this 20 µs call"
    )
    # 8192^2 wastes 3% of slots, under the 10% that counts as quantisation.
    assert why(row(8192, 8192, 8192, 1e-3, 0.05), None, 1e-5, 132).startswith(
        "compute-bound below the best shape"
    )
    assert "32 tiles" in why(row(1000, 1000, 4096, 1e-3, 0.8), None, 1e-5, 132)
    assert why(row(1, 8192, 8192, 1e-3, 0.3, "memory"), None, 1e-5, None).startswith(
        "memory-bound, yet slower"
    )
    # The ceiling's own shape, through a slower library: the library is the cause.
    numpy_best = Ceiling(tflops=1.0, shape=(8192,) * 3, series="lab", backend="numpy")
    torch_point = SimpleNamespace(**vars(row(8192, 8192, 8192, 1e-3, 0.1)), backend="torch")
    assert why(torch_point, None, 0.0, None, numpy_best) == (
        "the ceiling's own shape through another library: torch is slower here than numpy, "
        "which defines the ceiling"
    )


def h100_head(**changes) -> SimpleNamespace:
    """An H100's float16 8192^3 headline row, as the breakdown reads it."""
    return SimpleNamespace(
        **{
            "m": 8192,
            "n": 8192,
            "k": 8192,
            "dtype": "float16",
            "peak_tflops": 989.4,
            "peak_source": "datasheet (dense)",
            "sm_clock_mhz": 1650.0,
            "sm_clock_max_mhz": 1980.0,
            "achieved_tflops": 700.0,
            **changes,
        }
    )


def test_gpu_breakdown_from_peak_to_achieved():
    head = h100_head()
    ceiling = Ceiling(760.0, (12288, 12288, 6144), "best-shape", "torch")
    # The clock step scales from the clock the datasheet peak assumes (1830 MHz on an H100
    # SXM5), not from NVML's maximum (1980): 989.4 x 1650 / 1830 = 892.1.
    steps = breakdown(head, ceiling, "cuda", 132, peak_clock_mhz=1830)
    assert [s.label for s in steps] == [
        "dense peak",
        "at the SM clock under load",
        "measured compute ceiling",
        "tile and wave quantisation",
        "achieved",
    ]
    assert [s.id for s in steps] == [
        StepId.PEAK,
        StepId.CLOCK,
        StepId.CEILING,
        StepId.QUANTISATION,
        StepId.ACHIEVED,
    ]
    assert steps[1].tflops == pytest.approx(989.4 * 1650 / 1830)
    assert "(90.2%)" in steps[1].note and "1830 MHz the datasheet peak assumes" in steps[1].note
    assert "85.2% of the step above (at the SM clock under load)" in steps[2].note  # 760 / 892.1
    # 12288^2: 96 x 48 = 4608 tiles, 35 waves (4620 slots); 8192^2: 2048 tiles, 16 waves (2112).
    assert steps[3].tflops == pytest.approx(760 * (2048 / 2112) / (4608 / 4620))
    assert (
        steps[4].note
        == "what remains: achieved is 94.7% of the step above (tile and wave quantisation)"
    )


def test_cpu_breakdown_goes_through_the_measured_fma_ceiling():
    head = SimpleNamespace(
        m=8192,
        n=8192,
        k=8192,
        dtype="float32",
        peak_tflops=0.5,
        peak_source="computed",
        sm_clock_mhz=float("nan"),
        sm_clock_max_mhz=float("nan"),
        achieved_tflops=0.32,
    )
    best = Ceiling(0.34, (4096, 4096, 2048), "best-shape", "torch")
    fma = Fma(400.0, "AVX-512 (512-bit)", recorded={"per_core_gflops": [200.0, 200.0]})
    steps = breakdown(head, best, "cpu", None, fma)
    assert [s.label for s in steps] == [
        "dense peak",
        "measured FMA ceiling",
        "threading across the cores",  # not measured without the knobs: no number
        "measured compute ceiling",
        "achieved",
    ]
    assert steps[2].tflops is None
    del steps[2]
    assert steps[1] == Step(
        StepId.FMA,
        0.4,
        "every core at once, AVX-512 (512-bit): 80.0% of the step above (dense peak)",
    )
    assert steps[1].label == "measured FMA ceiling"
    assert "85.0% of the step above (measured FMA ceiling)" in steps[2].note  # 0.34 / 0.4
    assert "achieved is 94.1% of the step above (measured compute ceiling)" in steps[3].note
    # Where nothing could compile the FMA kernel, the step says so and carries no number.
    unmeasured = Fma(None, "AVX2", "not measured: no C compiler here")
    steps = breakdown(head, best, "cpu", None, unmeasured)
    assert steps[1].tflops is None and steps[1].note == "not measured: no C compiler here"
    assert "68.0% of the step above (dense peak)" in steps[3].note  # 0.34 / 0.5


def test_with_no_sweep_the_breakdown_says_the_ceiling_is_not_measured_apart():
    head = h100_head()
    itself = Ceiling(700.0, (8192, 8192, 8192), "lab", "torch")
    steps = breakdown(head, itself, "cuda", 132, peak_clock_mhz=1980)
    assert steps[2].tflops is None
    assert steps[2].note.startswith("not measured apart from this kernel")
    assert "sweep=full" in steps[2].note
    # Quantisation then scales the clock step: 824.5 x 2048/2112 = 799.5; 700 / 799.5 = 87.6%.
    assert steps[3].tflops == pytest.approx(989.4 * 1650 / 1980 * 2048 / 2112)
    assert steps[4].note == (
        "what remains: achieved is 87.6% of the step above (tile and wave quantisation)"
    )


def test_the_point_that_defines_a_ceiling_checks_nothing():
    pred = predictions(cpu_rows(), {"cpu": 10.0}).set_index("m")
    assert list(pred.defines_ceiling.items()) == [(1000, False), (2000, True), (1, False)]
    # The fastest call (1x4000x4000: 8 ms against 6.4 ms predicted) is 1.6 ms over its roofline.
    assert per_call_overheads(predictions(cpu_rows(), {"cpu": 10.0})) == {
        "float32": pytest.approx(0.008 - 0.0064032)
    }


def test_the_clock_step_never_rises_above_the_dense_peak_and_float32_scales_from_the_boost():
    head = h100_head(sm_clock_mhz=1980.0)  # boosting past the 1830 MHz the FP16 figure assumes
    itself = Ceiling(700.0, (8192, 8192, 8192), "lab", "torch")
    clock = breakdown(head, itself, "cuda", 132, peak_clock_mhz=1830)[1]
    assert clock.tflops == pytest.approx(989.4)
    assert "above it, so the dense peak stays the ceiling" in clock.note
    # float32 (CUDA cores): 66.9 TFLOP/s = 132 SMs x 256 FLOP x 1980 MHz, NVML's maximum.
    fp32 = h100_head(dtype="float32", peak_tflops=66.9, sm_clock_mhz=1782.0)
    clock = breakdown(fp32, itself, "cuda", 132, peak_clock_mhz=1830)[1]
    assert clock.tflops == pytest.approx(66.9 * 0.9)
    assert "against the 1980 MHz the datasheet peak assumes (90.0%)" in clock.note
