"""The GPU code paths that run without a GPU: lab checks, the GPU gap paragraph from recorded
results, the suite's device matching and table, and dtype skip logic."""

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from roofline.device.telemetry import summarize
from roofline.gpu_suite import device_files, match, table
from roofline.interpretation.datasheets import judged
from roofline.interpretation.interpret import lab_checks
from roofline.rendering.report import gap_paragraph
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
    # 2*8192^3 FLOP in 1.4 ms: 785.4 TFLOP/s; 4 calls in a window of 6.2 J.
    tele = summarize(window(samples, energy_j=6.2, window_s=0.0056), 1980)
    measured = measured_row(
        "h100", "float16", [N, N, N], [0.0014] * 4, 989.4, "datasheet", 0.0, tele
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
        assert figure in line, figure  # 6.2 J / 5.6 ms = 1107 W; 6.2 / (4 x 1.0995) = 1.41 J/TFLOP
    assert "cuda events, calls back to back | sw_power_cap | - | -" in line
    assert "float8_e4m3fn skipped: needs compute capability >= 8.9" in text


def test_gpu_gap_paragraph_cites_clocks_fp8_and_the_lab_checks():
    samples = [
        {"t": 0.0, "sm_mhz": 1620, "mem_mhz": 2619, "power_w": 700.0, "temp_c": 70, "reasons": 0x4},
        {"t": 1.0, "sm_mhz": 1680, "mem_mhz": 2619, "power_w": 700.0, "temp_c": 71, "reasons": 0x4},
    ]
    tele = summarize(window(samples), 1980)
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
    from roofline.measuring.kernels import unsupported_reason

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
    assert done.returncode == 1 and "error: no NVIDIA GPU visible" in done.stderr, done.stderr


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
    from roofline.core.schema import KnobMeasurement
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
