"""The GPU code paths that run without a GPU: lab checks, the GPU gap paragraph from recorded
results, the suite's device matching and table, and dtype skip logic."""

import dataclasses
import math
import statistics
from pathlib import Path

import pandas as pd
import pytest

from roofline.device.telemetry import window_telemetry
from roofline.gpu_suite import device_files, match, table
from roofline.interpretation.datasheets import judged
from roofline.interpretation.interpret import lab_checks
from roofline.interpretation.rows import KNOB_COLUMNS
from roofline.rendering.gap_paragraph import gap_paragraph
from tests.conftest import H100_POD, empty_row, measured_row
from tests.manifests import entry as manifest_entry
from tests.test_telemetry import window

ROOT = Path(__file__).resolve().parents[1]
N = 8192


def fp16(tflops: float, peak: float = 989.4):
    seconds = 2 * N**3 / (tflops * 1e12)
    return measured_row("h100", "float16", [N, N, N], [seconds], peak, "datasheet", 0.0)


def test_lab_checks_band_threshold_and_invalid():
    assert lab_checks([700.0, 850.0], 600.0, fp16(760.0)) == [
        "float16 760.0 TFLOP/s is inside the lab's sanity band 700-850 TFLOP/s +-20% (560-1020)",
        "the lab's done threshold, 600 TFLOP/s in float16: met",
    ]
    low = lab_checks([700.0, 850.0], 600.0, fp16(500.0))
    assert (
        "OUTSIDE" in low[0] and "no warm-up, no synchronisation" in low[0] and "NOT met" in low[1]
    )
    assert lab_checks(None, None, fp16(1200.0))[0].startswith(
        "INVALID: 1200.0 TFLOP/s is above the dense peak 989.4"
    )


def test_every_device_file_loads_without_omegaconf_and_matches_its_gpu():
    devices = device_files(ROOT / "conf/device")
    assert {"cpu", "a100", "h100", "h200", "mps"} <= set(devices)
    name, dev = match(H100_POD["gpus"][0], devices)
    assert name == "h100" and dev["peak_tflops"]["float8_e4m3fn"] == 1978.9
    h200 = dict(H100_POD["gpus"][0], name="NVIDIA H200")
    assert match(h200, devices)[0] == "h200"
    a100 = dict(H100_POD["gpus"][0], name="NVIDIA A100-SXM4-80GB")
    assert match(a100, devices)[0] == "a100"


def test_an_unknown_gpu_is_measured_without_peaks(capsys):
    name, dev = match(
        dict(H100_POD["gpus"][0], name="NVIDIA L40S"), device_files(ROOT / "conf/device")
    )
    assert name == "NVIDIA L40S" and dev["peak_tflops"] == {}
    assert "matches no conf/device/*.yaml" in capsys.readouterr().out


def test_suite_table_shows_every_figure_of_a_gpu_run():
    samples = [
        {"t": 0.0, "sm_mhz": 1700, "mem_mhz": 2619, "power_w": 690.0, "temp_c": 60, "reasons": 4}
    ]
    # 2*8192^3 FLOP in 1.4 ms: 785.4 TFLOP/s; 800 calls in a 1.12 s window of 1240 J.
    tele = window_telemetry(window(samples, energy_j=1240.0, window_s=1.12), 1980)
    measured = measured_row(
        "h100", "float16", [N, N, N], [0.0014] * 800, 989.4, "datasheet", 0.0, tele
    )
    measured.timing = "cuda events, calls back to back"
    skipped = empty_row(
        "a100", "float8_e4m3fn", [N, N, N], "skipped", "needs compute capability >= 8.9"
    )
    fp32 = dataclasses.replace(measured, dtype="float32")
    text = table([dataclasses.asdict(r) for r in (measured, skipped, fp32)], 1830)
    assert "1700/1980/1980" in text.splitlines()[3]  # float32's peak assumes the boost clock
    line = text.splitlines()[1]
    for figure in ("785.4", "79.4%", "1700/1830/1980", "1107", "1.41", "60"):
        assert figure in line, figure  # 1240 J / 1.12 s = 1107 W; 1240 / (800 x 1.0995) = 1.41
    assert "cuda events, calls back to back | sw_power_cap | - | -" in line
    assert "float8_e4m3fn skipped: needs compute capability >= 8.9" in text


def test_gpu_gap_paragraph_cites_clocks_fp8_and_the_lab_checks():
    samples = [
        {"t": 0.0, "sm_mhz": 1620, "mem_mhz": 2619, "power_w": 700.0, "temp_c": 70, "reasons": 0x4},
        {"t": 1.0, "sm_mhz": 1680, "mem_mhz": 2619, "power_w": 700.0, "temp_c": 71, "reasons": 0x4},
    ]
    tele = window_telemetry(window(samples), 1980)
    rows = pd.DataFrame(
        [
            dataclasses.asdict(
                measured_row(
                    "h100", "float16", [N, N, N], [0.00145], 989.4, "datasheet (dense)", 1e-4, tele
                )
            ),
            dataclasses.asdict(
                measured_row(
                    "h100",
                    "float8_e4m3fn",
                    [N, N, N],
                    [0.00085],
                    1978.9,
                    "datasheet (dense)",
                    1e-3,
                    tele,
                )
            ),
        ]
    )
    entry = {
        "kind": "cuda",
        "versions": {"torch": "2.11.0", "cuda": "13.0"},
        "details": {"cublaslt": 130100, "driver": "580"},
        "memory_copy": {"gbps": 3000.0},
        "datasheet": {"peak_clock_mhz": 1830},
        "lab_checks": lab_checks([700.0, 850.0], 600.0, fp16(758.3)),
    }
    text = gap_paragraph("h100", manifest_entry(**entry), rows)
    assert "**float16 8192×8192×8192** ran at **758.3 TFLOP/s**" in text  # 2*8192^3 / 1.45 ms
    assert "cuBLASLt 130100" in text
    assert (
        "SM clock averaged 1650 MHz, 90% of the 1830 MHz the datasheet peak assumes "
        "(NVML's maximum: 1980 MHz)" in text
    )
    assert "clock limits reported: sw_power_cap" in text
    assert "float8_e4m3fn reached 1294 TFLOP/s, 1.71× float16" in text
    assert "with exact accumulation" in text
    assert (
        "largest measured optimisation left on the table is the float8_e4m3fn path (1.71× the float16 kernel)"
        in text
    )
    assert "inside the lab's sanity band 700-850" in text and "600 TFLOP/s in float16: met" in text
    # 8192^3 FP16 at 3 TB/s: 402.7 MB moves in 0.134 ms, 9.3% of 1.45 ms
    assert "compute-bound" in text and "9.3% of the measured time" in text


@pytest.mark.parametrize("dtype", ["tf32", "float8_e4m3fn"])
def test_gpu_only_formats_are_skipped_on_a_cpu_with_a_reason(dtype):
    from roofline.measuring.matmul import unsupported_reason

    assert "CPUs have no native" in unsupported_reason(dtype, "cpu")


def test_the_gpu_path_needs_only_torch_nvml_pyyaml_and_pytest():
    """A bare GPU image has none of the others; scripts/gpu-check must still run there."""
    import subprocess
    import sys

    blocked = (
        *("omegaconf", "hydra", "dvc", "pandas", "tqdm", "seaborn", "matplotlib"),
        *("threadpoolctl", "psutil", "cpuinfo"),  # the CPU's facts and BLAS threads only
    )
    code = (
        f"import sys\nfor m in {blocked!r}: sys.modules[m] = None\n"
        "import roofline.gpu_suite, roofline.lab, tests.test_cuda\n"
        "from roofline.core.errors import run\n"
        "run(roofline.gpu_suite.main)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    # It got as far as looking for a GPU, and said so by name.
    assert done.returncode == 1 and "error: no NVIDIA or AMD GPU visible" in done.stderr, (
        done.stderr
    )


# Every name torch reports for the SKUs people rent (shared/notes/real-hardware.md's table), with
# the device that must recognise it, its dense float16 peak and memory bandwidth.
RENTED = [
    ("NVIDIA A100-SXM4-80GB", "a100", 312.0, 2039),
    ("NVIDIA A100-SXM4-40GB", "a100", 312.0, 1555),
    ("NVIDIA A100 80GB PCIe", "a100", 312.0, 1935),
    ("NVIDIA A100-PCIE-40GB", "a100", 312.0, 1555),
    ("NVIDIA H100 80GB HBM3", "h100", 989.4, 3350),
    ("NVIDIA H100 PCIe", "h100", 756.5, 2000),
    ("NVIDIA H100 NVL", "h100", 835.5, 3900),
    ("NVIDIA H200", "h200", 989.4, 4800),
    ("NVIDIA H200 NVL", "h200", 835.5, 4800),
]


@pytest.mark.parametrize(("name", "device", "fp16", "bandwidth"), RENTED)
def test_every_rented_sku_is_one_device_and_one_datasheet_line(name, device, fp16, bandwidth):
    from roofline.machines.identity import find_device

    devices = device_files(ROOT / "conf/device")
    gpu = dict(H100_POD["gpus"][0], name=name)
    matching = [n for n, d in devices.items() if find_device(d, {"cpu": {}, "gpus": [gpu]})]
    assert matching == [device]
    lines = [line for line in devices[device]["skus"].values() if line["name"] == name]
    assert len(lines) == 1, f"{name} has {len(lines)} datasheet lines in {device}"
    dev = judged(device, devices[device], name)
    assert dev["peak_tflops"]["float16"] == fp16 and dev["memory_bandwidth_gbps"] == bandwidth
    assert dev["peak_clock_mhz"] and dev["sm_count"] and dev["source"] and not dev["missing"]
    # The FP16 figure is SMs x FLOP/clock (Ampere 2048, Hopper 4096) x the clock it assumes.
    per_clock = 2048 if device.startswith("a100") else 4096
    assert dev["sm_count"] * per_clock * dev["peak_clock_mhz"] / 1e6 == pytest.approx(
        fp16, rel=0.01
    )


@pytest.mark.parametrize(
    "name", ["NVIDIA GH200 480GB", "NVIDIA H100", "NVIDIA A100-SXM4-80GB MIG 3g.40gb"]
)
def test_a_gh200_and_a_mig_slice_get_no_datasheet(name, capsys):
    from roofline.machines.identity import find_device

    devices = device_files(ROOT / "conf/device")
    gpu = dict(H100_POD["gpus"][0], name=name)
    found = [n for n, d in devices.items() if find_device(d, {"cpu": {}, "gpus": [gpu]})]
    assert found == ([] if "GH200" in name else [name.split()[1][:4].lower()])
    dev = match(gpu, devices)[1]
    assert dev["peak_tflops"] == {} and dev["lab_band_tflops"] == {}
    out = capsys.readouterr().out
    if found:  # recognised, measured, and told which line is missing
        assert f"no datasheet for {name!r} in conf/device/{found[0]}.yaml, so no MFU" in out
        assert ("MIG slice" in out) == ("MIG" in name)


def test_the_suite_prints_the_knobs_as_a_ladder_largest_gain_first():
    from roofline.core.measurement import KnobMeasurement
    from roofline.gpu_suite import ladder

    def knob(name, base, var, status="measured", reason=""):
        return dataclasses.asdict(
            KnobMeasurement(
                "h100",
                name,
                "a",
                "b",
                "float16",
                N,
                N,
                N,
                status,
                reason,
                baseline_samples_s=[base] if base else [],
                variant_samples_s=[var] if var else [],
            )
        )

    text = ladder(
        [
            knob("tf32 -> float16", 0.0044, 0.0014),
            knob("float16 -> float8", 0.0014, 0.0008),
            knob("eager -> CUDA graph", None, None, "skipped", "no CUDA graphs here"),
        ]
    ).splitlines()
    assert text[0].startswith("tf32 -> float16") and "3.14x" in text[0]  # 4.4 ms / 1.4 ms
    assert text[1].startswith("float16 -> float8") and "1.75x" in text[1]
    assert text[2] == f"{'eager -> CUDA graph':<26}skipped: no CUDA graphs here"


# ---- burst and sustained ---------------------------------------------------------------------


def played_device(**bench):
    """The played H100's measuring conf (float16 and float32, two shapes) and bench settings."""
    from roofline.device.timing import BenchSettings
    from tests.conftest import device, measuring

    dev = device(kind="cuda", dtypes=["float16", "float32"], shapes=[[128, 128, 128], [64, 64, 64]])
    quick = dict(seed=0, warmup=1, warmup_seconds=0.0, repeats=3, check_rows=8, min_seconds=0.0)
    return measuring(dev), BenchSettings(**quick | {"copy_mib": 1} | bench)


def test_the_sustained_window_times_the_headline_again_with_its_telemetry(
    played, monkeypatch, tmp_path
):
    from roofline.device.hardware import gpu_info
    from roofline.measuring import measure
    from roofline.measuring.benchmark import measure_device
    from tests.conftest import FINGERPRINT

    state = played("small_l2")  # an H100 whose 1 MiB L2 a tiny shape rotates past in a few sets
    # One sample a window, so that a sample holds several calls however slow the host makes
    # a played call: with 4 of 0.05 s, one host busy with other work timed its calls at over
    # 12.5 ms and took one call a sample (now: several, below 0.1 s a call).
    monkeypatch.setattr(measure, "SUSTAINED_SAMPLES", 1)
    dev, bench = played_device(sustained_seconds=0.1)
    monkeypatch.chdir(tmp_path)  # its node's GPUs are read through a boot cache: not the checkout's
    said = []
    record = measure_device("h100", dev, bench, gpu_info()[0], FINGERPRINT, log=said.append)
    lab = [r for r in record["rows"] if r["series"] == "lab"]
    (sustained,) = [r for r in record["rows"] if r["series"] == "sustained"]
    assert len(lab) == 4 and record["rows"][-1] is sustained  # right after the points
    # The lab dtype at its largest shape, through torch, for at least the seconds asked.
    assert (sustained["dtype"], sustained["m"], sustained["backend"]) == ("float16", 128, "torch")
    assert sustained["status"] == "measured" and sustained["window_s"] >= 0.1
    # As many calls a sample as the burst's median call fills the window with.
    (burst,) = [r for r in lab if (r["dtype"], r["m"]) == ("float16", 128)]
    calls = math.ceil(0.1 / statistics.median(burst["samples_s"]))
    assert sustained["timing"] == f"cuda events, calls back to back, {calls} calls a sample"
    assert calls > 1
    # Each sample is a call's mean over its batch: together they fill the window asked.
    assert sum(sustained["samples_s"]) * calls >= 0.1
    # Its own telemetry: the played board sits at its power cap, 690 W of its 700 W limit.
    assert sustained["sm_clock_mhz"] == 1755 and sustained["power_limit_w"] == 700.0
    assert sustained["clock_reason"] == "sw_power_cap" and sustained["clock_reason_share"] == 1.0
    assert sustained["clock_reason_shares"] == "sw_power_cap=1"
    assert any("a sustained window of 0.1 s" in line for line in said)
    assert any(line.startswith("[sustained] h100 float16 [128, 128, 128]") for line in said)
    # Every row carries the limit and the reason's share, not the sustained one only.
    assert all(r["power_limit_w"] == 700.0 and r["clock_reason"] == "sw_power_cap" for r in lab)
    # The kernels were named once every window was timed (CUPTI stays subscribed after), the
    # sustained window's and the breakdown's sides' included.
    assert state.timed_under_cupti == 0 and state.cupti
    assert sustained["kernel"] == burst["kernel"] != ""
    assert record["gpu_steps"]["sides_s"] and "kernel names" in record["run"]["spent"]


def test_no_sustained_window_without_asking_on_a_cpu_nor_with_none_asked(played):
    from roofline.device import kinds
    from roofline.device.hardware import gpu_info
    from roofline.measuring.measure import Target, gpu_target, measure_sustained

    point = measured_row("cpu", "float32", [64] * 3, [0.001], 1.0, "computed", 0.0)
    _, bench = played_device()  # the default: 60 s on a GPU, none on a CPU
    assert bench.sustained_seconds == 60.0 and not bench.sustained_cpu
    cpu = Target(kinds.Kind(), None, 16 << 30, None, 2)
    assert measure_sustained("cpu", [point], cpu, bench, {}) is None
    played("h100")
    gpu = gpu_info()[0]
    none = dataclasses.replace(bench, sustained_seconds=0.0)
    headline = measured_row("h100", "float16", [64] * 3, [0.001], 1.0, "datasheet", 0.0)
    assert measure_sustained("h100", [headline], gpu_target(gpu, print), none, gpu) is None
    # A headline that was not measured: the sustained window says why it has no figure.
    skipped = empty_row("h100", "float16", [64] * 3, "failed", "wrong result, not timed")
    asked = dataclasses.replace(bench, sustained_seconds=0.05)
    row = measure_sustained("h100", [skipped], gpu_target(gpu, print), asked, gpu)
    assert (row.series, row.status) == ("sustained", "skipped")
    assert row.reason == "its burst was not measured (failed: wrong result, not timed)"


def burst_and_sustained(burst_tflops=702.0, sustained_tflops=690.0):
    """An H100's float16 8192^3 burst (2 s at 1755 MHz) and its 60 s sustained window (1650
    MHz, the power cap held in 95% of the samples), as results.csv rows."""
    settling = [
        {"t": 0.0, "sm_mhz": 1650, "mem_mhz": 2619, "power_w": 695.0, "temp_c": 70, "reasons": r}
        for r in [0x4] * 19 + [0x0]
    ]
    rows = []
    for tflops, seconds, samples in (
        (burst_tflops, 2.0, RECORDED),
        (sustained_tflops, 60.0, settling),
    ):
        tele = window_telemetry(window(samples, energy_j=None, window_s=seconds), 1980, 700.0)
        point = fp16_at(tflops, tele)
        rows.append(dataclasses.replace(point, window_s=seconds))
    rows[1] = dataclasses.replace(rows[1], series="sustained")
    return pd.DataFrame([dataclasses.asdict(r) for r in rows])


RECORDED = [
    {"t": 0.0, "sm_mhz": 1755, "mem_mhz": 2619, "power_w": 690.0, "temp_c": 61, "reasons": 0x4}
]


def fp16_at(tflops, tele):
    seconds = 2 * N**3 / (tflops * 1e12)
    return measured_row(
        "h100", "float16", [N] * 3, [seconds], 989.4, "datasheet (dense)", 0.0, tele
    )


def test_the_report_sets_the_sustained_figure_beside_the_burst_and_says_why_it_dropped():
    from roofline.rendering.report import summary_paragraph
    from roofline.rendering.sentences import sustained_sentence

    rows = burst_and_sustained()
    entry = manifest_entry(
        datasheet={"peak_clock_mhz": 1830, "peak_tflops": {"float16": 989.4}},
        memory_copy={"gbps": 3000.0},
        versions={"torch": "2.11.0", "cuda": "13.0"},
        details={"cublaslt": 130100, "driver": "580"},
    )
    said = (
        "Sustained over 60 s, float16 8192×8192×8192 (torch) ran at 690 TFLOP/s, 1.7% below "
        "the 2 s burst's 702; SM clock 1650 MHz (1755 MHz in the burst); the clock was held by "
        "its software power cap in 95% of the samples, at 695 W of its 700 W limit (99%)."
    )
    assert sustained_sentence(entry, rows) == said
    lab, sustained = rows[rows.series == "lab"], rows[rows.series == "sustained"]
    assert said in gap_paragraph("h100", entry, lab, sustained=sustained)
    assert said not in gap_paragraph("h100", entry, lab)  # none asked: nothing said
    summary = summary_paragraph("h100", entry, rows, pd.DataFrame(columns=KNOB_COLUMNS))[0]
    assert "at **702 TFLOP/s**" in summary and said in summary  # the headline stays the burst
    # Not measured: why, in place of a figure.
    failed = empty_row("h100", "float16", [N] * 3, "skipped", "its burst was not measured (x)")
    failed.series = "sustained"
    text = sustained_sentence(entry, lab, pd.DataFrame([dataclasses.asdict(failed)]))
    assert text == "The sustained window was skipped: its burst was not measured (x)."
    # A "sustained" window no longer than the burst is said to be none, with its seconds.
    short = sustained.assign(window_s=1e-9)
    text = sustained_sentence(entry, lab, short)
    assert text.startswith("Sustained over 1e-09 s, float16") and "0 s" not in text.split(",")[0]
    assert "(⚠ no longer than the 2 s burst: not a sustained window)" in text


def test_a_published_figure_is_set_beside_ours_of_its_kind_and_its_kind_is_said():
    from roofline.rendering.report import summary_paragraph

    rows = burst_and_sustained()
    published = [
        {
            "dtype": "float16",
            "shape": [N] * 3,
            "tflops": 700.0,
            "source": "a soak",
            "window": "sustained",
        },
        {
            "dtype": "float16",
            "shape": [N] * 3,
            "tflops": 720.0,
            "source": "a bench",
            "window": "burst",
        },
    ]
    entry = manifest_entry(
        datasheet={"peak_clock_mhz": 1830, "published": published},
        memory_copy={"gbps": 3000.0},
    )
    summary = summary_paragraph("h100", entry, rows, pd.DataFrame(columns=KNOB_COLUMNS))[0]
    assert (
        "Published for this SKU: 720 TFLOP/s, a burst (a bench); this run's burst is 98% of it."
        in summary
    )
    assert (
        "; published for a sustained window on this SKU: 700 TFLOP/s (a soak), which this is "
        "99% of." in summary
    )
    unstated = [dict(published[1], window="")]
    entry = manifest_entry(datasheet={"published": unstated}, memory_copy={"gbps": 3000.0})
    summary = summary_paragraph("h100", entry, rows, pd.DataFrame(columns=KNOB_COLUMNS))[0]
    assert "720 TFLOP/s, its window not stated (a bench)" in summary
    assert "published for a sustained window" not in summary  # never set beside the wrong kind
