"""The lab's knobs: each a gain measured in one run, both sides interleaved and checked. The
CPU's are measured here at tiny sizes; the GPU's logic runs with stand-ins."""

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from roofline.core.measurement import KnobMeasurement
from roofline.device import kinds
from roofline.device.hardware import cpu_info
from roofline.device.timing import BenchSettings
from roofline.interpretation.aggregate import knob_metrics, knobs_table
from roofline.interpretation.rows import knob_row, knob_title
from roofline.measuring import knobs as kn
from roofline.measuring.measure import Target, target_for
from roofline.rendering.appendix import knob_lines
from roofline.rendering.gap_paragraph import unturned_sentence

ROOT = Path(__file__).resolve().parents[1]

SETTINGS = kn.Settings(
    BenchSettings(seed=0, warmup=1, check_rows=8, min_seconds=0.02, warmup_seconds=0.0),
    rounds=2,
    threads=2,
)
TINY = OmegaConf.create({"shape": [96, 96, 96], "naive_shape": [32, 32, 32]})


def test_the_cpu_knobs_are_measured_on_both_sides_and_checked():
    found = dict(cpu_info(), isa=["avx2", "fma"])  # no bfloat16 here: those two are skipped
    target = target_for("cpu", found, print)
    knobs = kn.cpu_knobs(target, found, TINY, SETTINGS)
    rows = {k.name: kn.measure_knob("cpu", k, SETTINGS) for k in knobs}
    assert list(rows) == [
        "naive -> BLAS",
        "1 thread -> every core",
        "operands in L2",
        "random -> constant inputs",
        "BLAS library",
        "float32 -> bfloat16",
        "oneDNN instruction set",
    ]
    library = rows["BLAS library"]
    assert (library.baseline, library.variant) == ("torch", "numpy")
    assert len(library.baseline_samples_s) >= SETTINGS.rounds and library.variant_check_error < 1e-4
    assert rows["float32 -> bfloat16"].status == "skipped"
    assert "no native bfloat16" in rows["float32 -> bfloat16"].reason
    assert rows["oneDNN instruction set"].reason.startswith("no bfloat16 instructions here")
    if found["logical_cores"] > 1:
        assert rows["1 thread -> every core"].status == "measured"
    naive = rows["naive -> BLAS"]
    assert naive.status == "measured" or "no C compiler" in naive.reason
    # The data's own power: constant inputs checked exactly (every element of C is K); a CPU's
    # sides read no telemetry.
    data = rows["random -> constant inputs"]
    assert (data.baseline, data.variant) == ("random inputs", "constant inputs (ones)")
    assert data.status == "measured" and data.variant_check_error == 0.0
    assert data.baseline_sm_clock_mhz is None and data.variant_power_w is None


def test_the_square_in_l2_holds_its_three_operands_in_half_of_one_l2():
    from roofline.core.arithmetic import square_in

    # 1 MiB: 3 x 4 x n^2 <= 512 KiB, n <= 209, down to a multiple of 32.
    assert square_in(1 << 20) == 192
    assert 3 * 4 * 192**2 <= (1 << 20) // 2 < 3 * 4 * 224**2
    assert square_in(2 << 20) == 288  # n <= 295
    assert square_in(16 << 20) == 832  # a cluster's L2 (Apple's), one thread alone on it
    assert square_in(16 << 10) == 0  # n <= 26: not even 32
    found = dict(cpu_info(), isa=["avx2", "fma"])
    target = target_for("cpu", found, print)
    for caches, why in (
        ([], "no square fits in this CPU's L2 (the probe read no cache sizes)"),
        (
            [{"level": "L2", "size_bytes": 16 << 10, "shared_by": 1}],
            "no square fits in this CPU's L2 (16,384 bytes: too small)",
        ),
    ):
        knobs = kn.cpu_knobs(target, dict(found, caches=caches), TINY, SETTINGS)
        (knob,) = [k for k in knobs if k.name == kn.MICRO_KERNEL_KNOB]
        point = kn.measure_knob("cpu", knob, SETTINGS)
        assert (point.status, point.reason, point.variant_shape) == ("skipped", why, None)


def test_the_micro_kernel_knob_times_one_thread_at_the_shape_and_in_l2_each_at_its_own_flops():
    l2 = {"level": "L2", "size_bytes": 32 << 10, "shared_by": 1}  # a square of 32 in it
    found = dict(cpu_info(), isa=["avx2", "fma"], caches=[l2])
    target = target_for("cpu", found, print)
    (knob,) = [
        k for k in kn.cpu_knobs(target, found, TINY, SETTINGS) if k.name == kn.MICRO_KERNEL_KNOB
    ]
    point = kn.measure_knob("cpu", knob, SETTINGS)
    assert point.status == "measured", point.reason
    assert (point.baseline, point.variant) == ("1 thread at 96x96x96", "1 thread at 32x32x32")
    assert [point.m, point.n, point.k] == [96, 96, 96] and point.variant_shape == [32, 32, 32]
    assert point.variant_check_error < 1e-4 and len(point.variant_samples_s) >= SETTINGS.rounds
    # Each side's rate from its own FLOPs: here, 1 ms at 96^3 and 0.1 ms at 32^3.
    timed = dataclasses.replace(point, baseline_samples_s=[1e-3], variant_samples_s=[1e-4])
    line = knob_row(timed)
    assert line.baseline_tflops == pytest.approx(2 * 96**3 / 1e-3 / 1e12)
    assert line.variant_tflops == pytest.approx(2 * 32**3 / 1e-4 / 1e12)
    assert line.gain == pytest.approx((32**3 / 1e-4) / (96**3 / 1e-3))
    assert line.variant_mnk == "32x32x32"
    # This machine's own L2 holds a larger square than the tiny shape: nothing to split there.
    big = dict(found, caches=[dict(l2, size_bytes=1 << 20)])
    (knob,) = [
        k for k in kn.cpu_knobs(target, big, TINY, SETTINGS) if k.name == kn.MICRO_KERNEL_KNOB
    ]
    skipped = kn.measure_knob("cpu", knob, SETTINGS)
    assert skipped.status == "skipped"
    assert skipped.reason == "the knobs' shape is no larger than 192x192x192, the square in L2"


def test_a_knob_records_variant_shape_is_checked_when_read():
    from roofline.core.errors import SchemaError
    from roofline.core.measurement import knob_from_dict

    point = KnobMeasurement("cpu", "k", "a", "b", "float32", 8, 8, 8, "skipped", "why")
    assert knob_from_dict(dataclasses.asdict(point), "knobs.json").variant_shape is None
    for wrong in ([8, 8], [8, 0, 8], [8.0, 8, 8]):
        with pytest.raises(SchemaError, match="field variant_shape"):
            knob_from_dict(dataclasses.asdict(point) | {"variant_shape": wrong}, "knobs.json")


@pytest.mark.skipif(
    not {"avx512_bf16", "amx_bf16"} & set(cpu_info()["isa"]), reason="no bfloat16 on this CPU"
)
def test_the_isa_cap_is_measured_in_processes_of_its_own(monkeypatch):
    import subprocess

    started, run = [], subprocess.run

    def spy(args, **kw):
        started.append(args[args.index("-m") + 1])
        return run(args, **kw)

    monkeypatch.setattr(kn.subprocess, "run", spy)
    side = kn.capped_side("capped", "AVX512_CORE", [64, 64, 64], SETTINGS)
    assert side.check_error < 2e-2
    samples = side.measure(0.01, True)
    assert samples and all(s > 0 for s in samples)
    # What those processes run is code the knobs stage's key hashes: editing it re-measures.
    from roofline.core.code import code_deps

    deps = code_deps("stages.knobs", ROOT)
    assert started and all(f"{m.replace('.', '/')}.py" in deps for m in started), started


def fake_side(label, log, seconds_per_call):
    def measure(seconds, first):
        log.append((label, first))
        return [seconds_per_call]

    return kn.Side(label, 0.0, measure)


def test_both_sides_are_interleaved_round_by_round():
    log = []
    knob = kn.Knob(
        "k",
        "a",
        "b",
        "float32",
        [8, 8, 8],
        True,
        lambda: (fake_side("a", log, 2.0), fake_side("b", log, 0.5)),
    )
    point = kn.measure_knob("cpu", knob, dataclasses.replace(SETTINGS, rounds=3))
    assert log == [("a", True), ("b", True), ("a", False), ("b", False), ("a", False), ("b", False)]
    assert knob_row(point).gain == pytest.approx(4.0)  # 2 s against 0.5 s a call


def test_a_knob_that_cannot_be_turned_is_skipped_with_its_reason():
    def unavailable():
        raise kn.Unavailable("no such thing here")

    def wrong():
        raise kn.WrongResult("max relative error 1 > 0.0001")

    skipped = kn.measure_knob(
        "cpu", kn.Knob("k", "a", "b", "float32", [8] * 3, None, unavailable), SETTINGS
    )
    assert (skipped.status, skipped.reason) == ("skipped", "no such thing here")
    failed = kn.measure_knob(
        "cpu", kn.Knob("k", "a", "b", "float32", [8] * 3, None, wrong), SETTINGS
    )
    assert failed.status == "failed" and failed.reason.startswith("wrong result, not timed")
    assert not failed.baseline_samples_s and knob_row(failed).gain is None


def test_the_gpu_knobs_and_what_an_a100_cannot_turn():
    cuda = OmegaConf.create({"shape": [8192] * 3, "small_shape": [256] * 3, "l2_shape": [1024] * 3})
    a100 = {"compute_capability": "8.0"}
    gpu = kinds.Kind()  # no GPU call is made: float8 is refused first
    gpu.blas = kinds.Cuda.blas  # what a CUDA GPU's GEMMs go through, as its knob names it
    knobs = kn.gpu_knobs(Target(gpu, 40 << 20, 80 << 30, None), a100, cuda, SETTINGS, None)
    assert [k.name for k in knobs] == [
        "float32 -> tf32",
        "tf32 -> float16",
        "float16 -> float8",
        "float8 fast accumulation",
        "cuBLASLt -> TunableOp",
        "random -> constant inputs",
        "eager -> CUDA graph",
        "rotated -> L2-resident",
    ]
    assert [k.lab_turns for k in knobs] == [True, True, False, False, False, None, None, None]
    for knob in knobs[2:4]:  # float8 needs compute capability 8.9: refused before any GPU call
        point = kn.measure_knob("a100", knob, SETTINGS)
        assert point.status == "skipped" and "needs compute capability >= 8.9" in point.reason


def measured_knob(name, knob, base_s, var_s, lab_turns, m=2048):
    return KnobMeasurement(
        name,
        knob,
        "base",
        "var",
        "float32",
        m,
        m,
        m,
        "measured",
        lab_turns=lab_turns,
        baseline_samples_s=list(base_s),
        variant_samples_s=list(var_s),
    )


def test_gains_ladder_metrics_and_the_largest_unturned_knob():
    points = [
        measured_knob("cpu", "1 thread -> every core", [2.0, 2.2], [1.1, 1.0], True),
        measured_knob("cpu", "float32 -> bfloat16", [1.0, 1.0], [0.5, 0.5], False),
        KnobMeasurement("cpu", "naive -> BLAS", "a", "b", "float32", 8, 8, 8, "skipped", "no cc"),
    ]
    table = knobs_table({"cpu": {"rows": points}})
    csv = table.to_csv(index=False)
    table = pd.read_csv(pd.io.common.StringIO(csv), keep_default_na=False, na_values=[""])
    assert list(table.gain.round(4)[:2]) == [pytest.approx(2.1 / 1.05), 2.0]
    assert knob_metrics(table) == {
        "cpu": {"1 thread -> every core": pytest.approx(2.0), "float32 -> bfloat16": 2.0}
    }
    lines = knob_lines(table)
    assert lines[2].startswith("- 1 thread -> every core: base -> var: **2×**")
    assert "spreads 10% and 10%); the lab kernel turns it" in lines[2]
    assert lines[3].endswith("left unturned by the lab kernel")
    assert lines[-1] == "- naive -> BLAS: skipped: no cc"
    assert unturned_sentence(table) == (
        "The largest knob this kernel leaves unturned, measured: float32 -> bfloat16: "
        "base -> var, 2× at 2048×2048×2048."
    )
    assert knob_title("float32 -> bfloat16", "float32", "bfloat16") == "float32 -> bfloat16"


def test_with_knobs_measured_the_gap_paragraph_cites_the_largest_unturned_one():
    import json

    from roofline.rendering.appendix import appendix
    from roofline.rendering.report import render
    from tests.test_results import aggregated

    points = [measured_knob("cpu", "float32 -> bfloat16", [1.0], [0.25], False)]
    knobs = knobs_table({"cpu": {"rows": points}})
    table, manifest = aggregated(
        pytest.importorskip("pathlib").Path(__import__("tempfile").mkdtemp())
    )
    manifest = json.loads(json.dumps(manifest | {"knobs": "lab"}))
    text = render(table, manifest, knobs)
    assert "Next knob: float32 -> bfloat16: " in text and "measured 4× at 2048×2048×2048." in text
    extra = appendix(table, manifest, knobs)
    assert "The largest knob this kernel leaves unturned, measured: float32 -> bfloat16: " in extra
    assert "4× at 2048×2048×2048" in extra and "## Knobs" in extra


def test_on_a_gpu_the_data_knob_reads_each_sides_clock_and_power(played):
    from roofline.device.hardware import gpu_info
    from roofline.measuring.measure import gpu_target

    played("h100")
    (gpu,) = gpu_info()
    shapes = {"shape": [64] * 3, "small_shape": [64] * 3, "l2_shape": [64] * 3}
    knobs = kn.gpu_knobs(
        gpu_target(gpu, print), gpu, OmegaConf.create(shapes), SETTINGS, Path("unused.csv")
    )
    (data,) = [k for k in knobs if k.name == kn.DATA_POWER_KNOB]
    point = kn.measure_knob("h100", data, SETTINGS)
    assert point.status == "measured" and point.variant_check_error == 0.0
    # The played H100 held by its power cap on random inputs, at its maximum clock on constant
    # ones (the stand-in plays the data's power through NVML: its "quiet_data").
    assert (point.baseline_sm_clock_mhz, point.variant_sm_clock_mhz) == (1755.0, 1980.0)
    assert (point.baseline_power_w, point.variant_power_w) == (690.0, 560.0)
    line = knob_lines(knobs_table({"h100": {"rows": [point]}}))[2]
    assert "; SM clock 1755 → 1980 MHz, power 690 → 560 W); a measurement effect" in line


def test_the_data_knob_says_what_share_of_the_gap_the_random_datas_power_is():
    from types import SimpleNamespace

    from roofline.interpretation.figures import data_power_share
    from roofline.rendering.gap_paragraph import data_power_sentence

    # An A100's published pair: 257 TFLOP/s on random float16, 295 on zeros, of 312: the data
    # closes 38 of the 55 TFLOP/s gap.
    assert data_power_share(257.0, 295.0, 312.0) == pytest.approx(38 / 55)
    assert data_power_share(320.0, 330.0, 312.0) is None  # no gap to share
    point = measured_knob(
        "a100", kn.DATA_POWER_KNOB, [2 * 8192**3 / 257e12], [2 * 8192**3 / 295e12], None, 8192
    )
    point.baseline_sm_clock_mhz, point.variant_sm_clock_mhz = 1275.0, 1410.0
    said = data_power_sentence(
        SimpleNamespace(peak_tflops=312.0), knobs_table({"a100": {"rows": [point]}})
    )
    assert said == (
        "The data's own power: constant inputs ran 1.15× the random ones at 8192×8192×8192 "
        "float32 (257 → 295 TFLOP/s; SM clock 1275 → 1410 MHz): 69% of the gap to the dense "
        "peak is the power random data draws."
    )


@pytest.mark.parametrize(("faster", "named"), [(1.0 + 1e-14, False), (1.005, False), (1.5, True)])
def test_another_dtype_is_the_next_knob_only_where_it_is_at_least_1_01x_faster(faster, named):
    from types import SimpleNamespace

    import pandas as pd

    from roofline.rendering.report import MIN_DTYPE_GAIN, knob_sentence

    def row(dtype: str, tflops: float) -> dict:
        shape = {"m": 64, "n": 64, "k": 64}
        return {"dtype": dtype, "status": "measured", "series": "lab", **shape} | {
            "achieved_tflops": tflops
        }

    head = SimpleNamespace(**row("float16", 2.0))  # as the headline is read: by attribute
    rows = pd.DataFrame([row("float16", 2.0), row("float32", 2.0 * faster)])
    said = knob_sentence(head, rows, knobs_table({}))
    assert MIN_DTYPE_GAIN == 1.01
    assert said.startswith("Next knob: float32, measured 1.50× float16") == named, said
    assert said.startswith("Next knob: not measured yet") != named, said
