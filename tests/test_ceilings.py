"""Measured ceilings, the roofline's prediction, quantisation and the gap breakdown, with
answers worked by hand."""

import dataclasses
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from roofline.interpretation.breakdown import breakdown
from roofline.interpretation.ceilings import (
    Ceiling,
    measured_ceilings,
    per_call_overheads,
    predicted_seconds,
    predictions,
    wave_quantisation,
    why,
)
from roofline.interpretation.manifest import CpuSteps, Fma, FmaClock, SideFigure
from roofline.interpretation.steps import Step, StepId, gap_shares
from tests.conftest import empty_row, measured_row
from tests.fakes.cuda.played_cuda import SM90_KERNELS


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
        "the clock under load",
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
    assert "85.2% of the step above (the clock under load)" in steps[2].note  # 760 / 892.1
    # 12288^2: 96 x 48 = 4608 tiles, 35 waves (4620 slots); 8192^2: 2048 tiles, 16 waves (2112).
    assert steps[3].tflops == pytest.approx(760 * (2048 / 2112) / (4608 / 4620))
    assert (
        steps[4].note
        == "what remains: achieved is 94.7% of the step above (tile and wave quantisation)"
    )


def cpu_head(achieved: float = 0.25) -> SimpleNamespace:
    return SimpleNamespace(
        m=8192, n=8192, k=8192, dtype="float32", peak_tflops=0.5, peak_source="computed",
        sm_clock_mhz=float("nan"), sm_clock_max_mhz=float("nan"), achieved_tflops=achieved,
    )  # fmt: skip


def cpu_sides(every=0.28, one=0.15, in_l2=0.18, spreads=(0.01, 0.01, 0.01), threads=2):
    figures = [
        SideFigure(rate, spread) for rate, spread in zip((every, one, in_l2), spreads, strict=True)
    ]
    return CpuSteps("numpy", threads, [4096, 4096, 4096], [192, 192, 192], *figures)


ITSELF = Ceiling(0.25, (8192, 8192, 8192), "lab", "numpy")
FMA = Fma(400.0, "AVX-512 (512-bit)")  # 0.2 TFLOP/s a core on two
UNDER_FMA = FmaClock(3.8, "AVX-512 (512-bit)", spread=0.005)


def test_a_cpus_steps_are_measured_factors_that_multiply_to_the_achieved_figure():
    cpu = (FMA, UNDER_FMA, 4.0, cpu_sides())
    steps = breakdown(cpu_head(), ITSELF, "cpu", None, cpu=cpu)
    assert [s.id for s in steps] == [
        StepId.PEAK,
        StepId.CLOCK,
        StepId.FMA,
        StepId.THREADS,
        StepId.MICRO_KERNEL,
        StepId.PACKING,
        StepId.ACHIEVED,
    ]
    # By hand: 0.5 x 3.8/4 = 0.475; the FMA ceiling 0.4 (84.2% of it); x 0.28/(2 x 0.15) =
    # 0.3733; x 0.18/0.2 = 0.336; x 0.15/0.18 = 0.28, every thread's own rate; then 0.25.
    factors = [0.95, 0.4 / 0.475, 0.28 / 0.3, 0.9, 0.15 / 0.18, 0.25 / 0.28]
    assert [s.factor for s in steps[1:]] == pytest.approx(factors)
    assert [s.tflops for s in steps[1:6]] == pytest.approx([0.475, 0.4, 0.3733, 0.336, 0.28], 1e-3)
    assert math.prod(s.factor for s in steps[1:]) == pytest.approx(0.25 / 0.5)
    assert steps[1].note == (
        "under AVX-512 (512-bit) FMAs every core ran at 3.80 GHz, 95.0% of the 4.00 GHz plain "
        "code runs at"
    )
    assert steps[3].note == (
        "numpy at 4096x4096x4096: 2 threads ran 1.87x one thread, 93.3% of perfect scaling"
    )
    assert steps[4].note == (
        "numpy on one thread with its operands in L2 (192x192x192): 0.18 TFLOP/s, 90.0% of one "
        "core's share of the FMA ceiling (0.2)"
    )
    assert steps[6].note == (
        "what remains (the lab's 8192x8192x8192 against the breakdown's 4096x4096x4096): "
        "achieved is 89.3% of the step above"
    )
    # Each step's share of the gap: the log of its factor over log(0.25 / 0.5); they add to 1.
    shares = gap_shares(steps)
    assert sum(g.share for g in shares) == pytest.approx(1.0)
    assert shares[0].share == pytest.approx(math.log(0.95) / math.log(0.5))


def test_a_step_noisier_than_its_effect_carries_no_number_and_names_no_cause():
    # Threading measured 93.3% of perfect scaling, but one side's rounds spread 12%: noisier
    # than its 6.7% effect, so it says so, and the chain still ends at the achieved figure.
    noisy = cpu_sides(spreads=(0.02, 0.12, 0.01))
    steps = breakdown(cpu_head(), ITSELF, "cpu", None, cpu=(FMA, UNDER_FMA, 4.0, noisy))
    threads = steps[3]
    assert threads.id is StepId.THREADS and threads.tflops is None and threads.too_noisy
    assert threads.note.endswith("; too noisy to tell (spread 12.0%, effect 6.7%)")
    assert steps[4].tflops == pytest.approx(0.336)  # the chain goes through it
    assert math.prod(s.factor for s in steps[1:]) == pytest.approx(0.5)
    # The micro-kernel's 10% loss stands beside a 5% spread; at 11% it would not.
    louder = cpu_sides(spreads=(0.02, 0.02, 0.11))
    micro = breakdown(cpu_head(), ITSELF, "cpu", None, cpu=(FMA, UNDER_FMA, 4.0, louder))[4]
    assert micro.too_noisy and micro.tflops is None


def test_a_cpu_without_a_compiler_or_sides_says_what_was_not_measured():
    steps = breakdown(
        cpu_head(),
        ITSELF,
        "cpu",
        None,
        cpu=(Fma(None, "AVX2", "not measured: no C compiler here"), None, None, None),
    )
    assert [(s.id, s.tflops) for s in steps[1:6]] == [
        (StepId.CLOCK, None),
        (StepId.FMA, None),
        (StepId.THREADS, None),
        (StepId.MICRO_KERNEL, None),
        (StepId.PACKING, None),
    ]
    assert steps[2].note == "not measured: no C compiler here"
    assert steps[3].note == "not measured: not measured by this record's run (an older one)"
    # The achieved step keeps the whole gap: nothing measured explains any of it.
    assert [(g.step.id, g.share) for g in gap_shares(steps)] == [(StepId.ACHIEVED, 1.0)]
    # Sides without an FMA ceiling: one thread is held to one core's share of the dense peak.
    steps = breakdown(
        cpu_head(), ITSELF, "cpu", None, cpu=(Fma(None, "AVX2", "no"), None, None, cpu_sides())
    )
    assert "of one core's share of the dense peak (0.25)" in steps[4].note


def test_one_core_shares_nothing_and_a_library_past_the_fma_units_is_said_to_be():
    # Fenced to one core (taskset -c 0); and Accelerate on a Mac, whose matrix units outrun
    # the FMA units the ceiling measures.
    alone = cpu_sides(every=0.15, one=0.15, in_l2=0.3, threads=1)
    fma = Fma(200.0, "128-bit (SSE / NEON)")
    steps = breakdown(cpu_head(0.15), ITSELF, "cpu", None, cpu=(fma, None, None, alone))
    assert steps[3].note == "one thread: nothing to share" and steps[3].factor == 1.0
    assert steps[4].factor == pytest.approx(1.5) and steps[4].note.endswith(
        ": above it, so the library runs on units that ceiling does not measure"
    )
    assert math.prod(s.factor for s in steps[1:] if s.factor) == pytest.approx(0.15 / 0.5)


def test_a_gpus_own_counters_split_the_kernel_below_its_clock_in_place_of_the_models():
    gpm = {
        "gpm_graphics_busy_pct": 99.0,
        "gpm_sm_busy_pct": 90.0,
        "gpm_tensor_active_pct": 80.0,
        "counter_errors": "",
    }
    head = h100_head(**gpm)
    ceiling = Ceiling(760.0, (12288, 12288, 6144), "best-shape", "torch")
    steps = breakdown(head, ceiling, "cuda", 132, peak_clock_mhz=1830)
    assert [s.id for s in steps] == [
        StepId.PEAK,
        StepId.CLOCK,
        StepId.GPU_BUSY,
        StepId.SMS_BUSY,
        StepId.TENSOR_ACTIVE,
        StepId.ACHIEVED,
    ]
    # By hand: 989.4 x 1650/1830 = 892.1 at the clock; x 0.99, 0.90, 0.80 of it; 700 of the last.
    clock = 989.4 * 1650 / 1830
    assert [s.tflops for s in steps[2:5]] == pytest.approx([clock * 0.99, clock * 0.9, clock * 0.8])
    assert steps[3].note == (
        "the SMs had work in 90.0% of their cycles: 90.9% of the step above (the GPU busy)"
    )
    assert steps[4].note == (
        "the tensor pipes issued in 80.0% of the SMs' cycles: 88.9% of the step above (SMs "
        "given work)"
    )
    assert steps[5].note == (
        f"the kernel's issue efficiency: achieved is {700 / (clock * 0.8):.1%} of the step "
        "above (tensor pipes active)"
    )
    # A counter the driver refused says so and carries no number; the next is a share of the
    # last step measured above it.
    refused = "gpm_tensor_active_pct: NVML_ERROR_NOT_SUPPORTED (Not Supported)"
    head = h100_head(**gpm | {"gpm_tensor_active_pct": float("nan"), "counter_errors": refused})
    steps = breakdown(head, ceiling, "cuda", 132, peak_clock_mhz=1830)
    assert steps[4].tflops is None and steps[4].note == f"not measured: {refused}"
    assert steps[5].note == "what remains: achieved is 87.2% of the step above (SMs given work)"


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
    fp32 = h100_head(dtype="float32", peak_tflops=66.9, sm_clock_mhz=1782.0, achieved_tflops=50.0)
    clock = breakdown(fp32, itself, "cuda", 132, peak_clock_mhz=1830)[1]
    assert clock.tflops == pytest.approx(66.9 * 0.9)
    assert "against the 1980 MHz the datasheet peak assumes (90.0%)" in clock.note


def test_the_clock_step_names_what_held_the_clock_and_the_power_against_its_limit():
    itself = Ceiling(700.0, (8192, 8192, 8192), "lab", "torch")
    head = h100_head(
        sm_clock_mhz=1755.0,
        clock_reason="sw_power_cap",
        clock_reason_share=0.9,
        power_w=690.0,
        power_limit_w=700.0,
    )
    clock = breakdown(head, itself, "cuda", 132, peak_clock_mhz=1980)[1]
    assert clock.note == (
        "1755 MHz in the timed window against the 1980 MHz the datasheet peak assumes (88.6%); "
        "the clock was held by its software power cap in 90% of the samples, at 690 W of its "
        "700 W limit (99%)"
    )
    # Read, and nothing but idleness set; a power limit not recorded; power not read (MIG).
    calm = h100_head(clock_reason="none", power_w=300.0)
    note = breakdown(calm, itself, "cuda", 132, peak_clock_mhz=1830)[1].note
    assert note.endswith(
        "no clock-event reason but idleness was set in any sample, at 300 W (its power limit "
        "not recorded)"
    )
    note = breakdown(
        h100_head(clock_reason="hw_thermal_slowdown", clock_reason_share=0.25),
        itself,
        "cuda",
        132,
        peak_clock_mhz=1830,
    )[1].note
    assert note.endswith(
        "held by a hardware thermal slowdown in 25% of the samples; its power was not read"
    )


def test_the_clock_step_says_where_reasons_were_not_read_or_their_shares_not_recorded():
    itself = Ceiling(700.0, (8192, 8192, 8192), "lab", "torch")
    refused = h100_head(
        clock_reason=float("nan"),  # an empty cell of results.csv
        telemetry_errors="reasons: NVMLError_NotSupported: Not Supported",
        power_w=690.0,
        power_limit_w=700.0,
    )
    note = breakdown(refused, itself, "cuda", 132, peak_clock_mhz=1830)[1].note
    assert "its clock-event reasons were not read (NVML refused them), at 690 W" in note
    # A row from before schema 4: the reasons it saw, without their shares or the limit.
    older = h100_head(throttle_reasons="sw_power_cap+sync_boost", power_w=690.0)
    note = breakdown(older, itself, "cuda", 132, peak_clock_mhz=1830)[1].note
    assert (
        "clock-event reasons seen: its software power cap, sync boost (held to the clock of "
        "another GPU in its group) (in what share of the samples, not recorded), at 690 W"
    ) in note


def test_the_sustained_window_defines_no_ceiling_and_checks_no_prediction():
    # The same point timed again over a long window, a little faster by chance.
    burst = measured_row("cpu", "float32", [1000] * 3, [0.02], 0.5, "computed", 0.0)
    sustained = measured_row("cpu", "float32", [1000] * 3, [0.019], 0.5, "computed", 0.0)
    rows = table(burst, dataclasses.replace(sustained, series="sustained"))
    assert measured_ceilings(rows)[("cpu", "float32")].series == "lab"
    assert list(predictions(rows, {"cpu": 10.0}).series) == ["lab"]


# --- the tile of the kernel that ran ---------------------------------------------------------

# Real cuBLAS names (cited in tests/fakes/cuda/played_cuda.py): a 128x128 Hopper float16 kernel,
# and a 256x128 bfloat16 one (128x256 over C's M x N: cuBLAS is column-major).
SM90_F16, SM90_BF16 = SM90_KERNELS["float16"], SM90_KERNELS["bfloat16"]


def test_quantisation_uses_the_tile_of_the_kernel_that_ran_and_says_assumed_only_without_one():
    itself = Ceiling(700.0, (8192, 8192, 8192), "lab", "torch")
    # 8192^2 in 128x128 tiles: 64 x 64 = 4096 tiles, 32 waves on 132 SMs (4224 slots).
    named = breakdown(h100_head(kernel=SM90_F16), itself, "cuda", 132, peak_clock_mhz=1980)[3]
    assert named.note == (
        "4096 tiles of 128x128 (the tile of the kernel that ran) on 132 SMs: 32 waves, "
        "97.0% of slots useful"
    )
    assert named.tflops == pytest.approx(989.4 * 1650 / 1980 * 4096 / 4224)
    # No name (a record from before kernels were recorded; results.csv's empty cell): assumed.
    for head in (h100_head(), h100_head(kernel=float("nan")), h100_head(kernel="")):
        assumed = breakdown(head, itself, "cuda", 132, peak_clock_mhz=1980)[3]
        assert assumed.note.startswith("2048 tiles of 128x256 (assumed) on 132 SMs")
    # A name that gives no tile is no better than none.
    vague = h100_head(kernel="void at::native::vectorized_elementwise_kernel<4>")
    assert "(assumed)" in breakdown(vague, itself, "cuda", 132, peak_clock_mhz=1980)[3].note


def test_the_ceilings_shape_is_quantised_at_the_tile_of_its_own_kernel():
    head = h100_head(kernel=SM90_F16)
    best = Ceiling(760.0, (12288, 12288, 6144), "best-shape", "torch", SM90_BF16)
    step = breakdown(head, best, "cuda", 132, peak_clock_mhz=1830)[3]
    # 12288^2 in 128x256 tiles: 96 x 48 = 4608 tiles, 35 waves (4620 slots): 99.7%.
    assert step.note.endswith("(the ceiling's shape: 99.7%, its kernel's tile 128x256)")
    assert step.tflops == pytest.approx(760 * (4096 / 4224) / (4608 / 4620))
    # Its kernel not recorded: the headline's tile stands for it.
    unnamed = dataclasses.replace(best, kernel="")
    note = breakdown(head, unnamed, "cuda", 132, peak_clock_mhz=1830)[3].note
    assert note.endswith("(the ceiling's shape: 99.7%)")  # 96 x 96 = 9216 of 128^2, 70 waves


def test_the_measured_ceiling_keeps_the_kernel_that_ran_there():
    best = measured_row("h100", "float16", [4096] * 3, [1e-3], 1.0, "datasheet", 989.4)
    best.kernel = SM90_F16
    other = measured_row("h100", "float16", [2048] * 3, [1e-3], 1.0, "datasheet", 989.4)
    ceiling = measured_ceilings(table(best, other))[("h100", "float16")]
    assert (ceiling.shape, ceiling.kernel) == ((4096, 4096, 4096), SM90_F16)


def test_why_names_the_tile_of_the_kernel_that_ran_or_says_it_assumed_one():
    def row(kernel=""):
        return SimpleNamespace(
            m=1000, n=1000, k=4096, dtype="float16", median_s=1e-3, error=0.8, kernel=kernel
        )

    # 1000^2 in 128x128 tiles: 8 x 8 = 64 tiles on 132 SMs, one wave; 1e6 / 1024^2 padded.
    assert why(row(SM90_F16), None, 1e-5, 132) == (
        "tile and wave quantisation: 64 tiles of 128x128 (the tile of the kernel that ran) on "
        "132 SMs make 1 waves, 46% of slots useful"
    )
    assert "32 tiles of 128x256 (assumed) on 132 SMs" in why(row(), None, 1e-5, 132)


def test_every_kind_of_device_has_a_lab_dtype_for_its_headline():
    from roofline.configuration.params import KINDS
    from roofline.core.dtypes import LAB_DTYPE
    from roofline.interpretation.ceilings import headline as ceilings_headline

    assert set(LAB_DTYPE) == set(KINDS)  # a measured Apple GPU has a headline too
    rows = pd.DataFrame(
        {
            "status": ["measured", "measured"],
            "dtype": ["float32", "float16"],
            "m": [64, 64],
            "n": [64, 64],
            "k": [64, 64],
            "achieved_tflops": [0.5, 2.0],
        }
    )
    assert ceilings_headline(rows, "mps").dtype == "float16"


def test_a_cpu_with_no_peak_starts_at_its_fma_ceiling_and_shares_out_no_gap():
    # A Mac: Accelerate's float32 runs on the matrix units, so the CPU has no computed peak, and
    # one thread in L2 outruns one core's share of the NEON FMA ceiling.
    from types import SimpleNamespace as Namespace

    from roofline.rendering.causes import unpeaked_sentence

    head = cpu_head(0.3)
    head.peak_tflops, head.peak_source = float("nan"), "no computed peak: Accelerate"
    mac = cpu_sides(every=0.3, one=0.16, in_l2=0.2)
    neon = Fma(200.0, "128-bit (SSE / NEON)")  # 0.1 TFLOP/s a core on two
    steps = breakdown(head, ITSELF, "cpu", None, cpu=(neon, None, None, mac))
    assert steps[0].tflops is None and gap_shares(steps) == []
    assert steps[2] == Step(
        StepId.FMA,
        0.2,
        "every core at once, 128-bit (SSE / NEON): no dense peak above it to hold it to",
    )
    assert steps[4].factor == pytest.approx(2.0) and "above it, so the library" in steps[4].note
    entry = Namespace(measured=Namespace(steps=mac))
    assert unpeaked_sentence(steps, entry) == (
        "With no dense peak its gap is not shared out; through numpy, 2 threads reach 94% of 2x "
        "one thread's rate at 4096x4096x4096; one thread in L2 reaches 200% of a core's FMA "
        "rate: it runs on units that rate does not measure; one thread at 4096x4096x4096 keeps "
        "80% of its rate in L2."
    )
    # Neither a peak nor an FMA ceiling (no compiler): one thread is held to nothing, and said.
    bare = breakdown(head, ITSELF, "cpu", None, cpu=(None, None, None, mac))
    assert bare[4].tflops is None and bare[4].note.endswith("no peak or FMA ceiling to hold it to")
    assert bare[-1].note == "no step above to compare with"
