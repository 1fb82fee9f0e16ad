"""The GPU's own counters over a timed window (roofline.device.gpm): NVML GPM's metrics and the
time the clock was held, read through the NVML stand-in at the C library nvidia-ml-py loads;
every metric its value or its refusal by name, never a zero for a figure not read."""

import ctypes
import sys
import time

import pytest

from roofline.device import gpm, telemetry
from roofline.device.hardware import gpu_info
from roofline.device.timing import BenchSettings
from roofline.measuring.measure import gpu_target, measure_point
from tests.fakes.cuda.played_cuda import H100_SXM

GPM_FIELDS = list(gpm.METRICS)
PLAYED = dict(zip(GPM_FIELDS, [99.6, 98.1, 12.4, 75.8, 75.8, 31.2], strict=True))


def window(played, machine: str = "h100", seconds: float = 0.15, **changes):
    """One sampled window of `seconds` on the played GPU, GPM read over windows that long."""
    played(machine, **changes)
    (gpu,) = gpu_info()
    handle = telemetry.open_gpu(gpu["uuid"])
    with telemetry.Sampler(handle, counters=gpm.Counters) as sampled:
        time.sleep(seconds)
    return telemetry.window_telemetry(sampled, gpu.get("max_sm_clock_mhz")), sampled


@pytest.fixture
def short(monkeypatch):
    """GPM read over the tests' windows of 0.15 s (the lab's are a second or more)."""
    monkeypatch.setattr(gpm, "MIN_WINDOW_S", 0.12)


def test_a_played_h100_window_has_its_gpm_metrics_and_the_time_its_clock_was_held(played, short):
    summary, sampled = window(played)
    assert {name: getattr(summary, name) for name in GPM_FIELDS} == PLAYED
    assert summary.counter_errors == ""
    # Its software power cap held the clock throughout; no thermal reason was set.
    assert summary.power_held_s == pytest.approx(sampled.window_s, abs=0.02)
    assert summary.thermal_held_s == 0.0
    assert not sys.modules["pynvml"]._REAL.CDLL("libnvidia-ml.so.1").gpm_samples  # both freed


def test_a_gpu_without_gpm_says_so_and_keeps_its_violation_times(played, short):
    summary, sampled = window(played, "a100")
    assert all(getattr(summary, name) is None for name in GPM_FIELDS)
    assert summary.counter_errors == "GPM: this GPU has none (NVML GPM is Hopper's and newer)"
    # On random inputs the played A100 is held by its power cap throughout; never by heat.
    assert summary.power_held_s == pytest.approx(sampled.window_s, abs=0.02)
    assert summary.thermal_held_s == 0.0


def test_a_refused_metric_is_named_and_the_others_are_read(played, short):
    summary, _ = window(played, gpus=[dict(H100_SXM, gpm_refused=[7])])
    assert summary.gpm_hmma_active_pct is None
    assert summary.gpm_tensor_active_pct == 75.8 and summary.gpm_sm_busy_pct == 98.1
    assert summary.counter_errors == (
        "gpm_hmma_active_pct: NVML_ERROR_NOT_SUPPORTED (Not Supported)"
    )


def test_an_older_nvidia_ml_py_whose_gpm_structure_is_smaller_still_reads_its_metrics(
    played, short, monkeypatch
):
    played("h100")
    nvml = sys.modules["pynvml"]

    # nvidia-ml-py 12.535's structure: NVML_GPM_METRIC_MAX 98, not this one's 477.
    class Older(ctypes.Structure):
        _fields_ = [
            *nvml.c_nvmlGpmMetricsGet_t._fields_[:4],
            ("metrics", nvml.c_nvmlGpmMetric_t * 98),
        ]

    monkeypatch.setattr(nvml, "c_nvmlGpmMetricsGet_t", Older)
    monkeypatch.setattr(nvml, "NVML_GPM_METRIC_MAX", 98)
    # The structure's version is a plain 1, not its size: the driver reads the six asked.
    summary, _ = window(played)
    assert {name: getattr(summary, name) for name in GPM_FIELDS} == PLAYED
    assert summary.counter_errors == ""


def test_a_window_too_short_reads_no_gpm_and_says_why(played):
    summary, _ = window(played, seconds=0.0)
    assert summary.gpm_sm_busy_pct is None and summary.power_held_s is not None
    assert summary.counter_errors == f"GPM: not read over a window under {gpm.MIN_WINDOW_S:g} s"


BOARDS = "power_held_s, thermal_held_s: not read on a MIG slice (its board's)"


def test_a_hopper_mig_slice_reads_its_own_gpu_instances_gpm_and_not_its_boards_held_time(
    played, short
):
    summary, _ = window(played, "mig_h100")
    slice_gpm = [99.1, 97.4, 12.1, 73.9, 73.9, 29.5]  # played_cuda.H100_MIG's, not its board's
    assert [getattr(summary, name) for name in GPM_FIELDS] == slice_gpm
    assert summary.power_held_s is None and summary.thermal_held_s is None
    assert summary.counter_errors == BOARDS
    assert not sys.modules["pynvml"]._REAL.CDLL("libnvidia-ml.so.1").gpm_samples  # both freed


def test_a_mig_slice_under_an_nvidia_ml_py_without_its_gpm_call_says_so(played, short, monkeypatch):
    played("mig_h100")
    monkeypatch.delattr(sys.modules["pynvml"], "nvmlGpmMigSampleGet")
    summary, _ = window(played, "mig_h100")
    assert all(getattr(summary, name) is None for name in GPM_FIELDS)
    assert summary.counter_errors == f"{BOARDS}; GPM: this nvidia-ml-py or driver has no GPM calls"


def test_an_ampere_mig_slice_says_its_gpu_has_no_gpm(played, short):
    summary, _ = window(played, "mig")
    assert all(getattr(summary, name) is None for name in GPM_FIELDS)
    assert summary.power_held_s is None
    assert summary.counter_errors == (
        f"{BOARDS}; GPM: this GPU has none (NVML GPM is Hopper's and newer)"
    )


def test_the_played_driver_answers_a_slices_gpm_only_through_its_board(played):
    played("mig_h100")
    nvml = sys.modules["pynvml"]
    nvml.nvmlInit()
    slice_ = telemetry.open_gpu(gpu_info()[0]["uuid"])
    board = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(slice_)
    instance = nvml.nvmlDeviceGetGpuInstanceId(slice_)
    with pytest.raises(nvml.NVMLError_InvalidArgument):  # a whole GPU is no GPU instance
        nvml.nvmlDeviceGetGpuInstanceId(board)
    sample = nvml.nvmlGpmSampleAlloc()
    with pytest.raises(nvml.NVMLError_NotSupported):  # the slice's own handle
        nvml.nvmlGpmMigSampleGet(slice_, instance, sample)
    with pytest.raises(nvml.NVMLError_NotFound):  # an instance the board has no slice of
        nvml.nvmlGpmMigSampleGet(board, instance + 1, sample)
    with pytest.raises(nvml.NVMLError_NotSupported):  # the sliced board's own: not played
        nvml.nvmlGpmSampleGet(board, sample)
    nvml.nvmlGpmMigSampleGet(board, instance, sample)
    nvml.nvmlGpmSampleFree(sample)


def test_the_played_driver_refuses_samples_closer_than_gpm_refreshes(played):
    played("h100")
    nvml = sys.modules["pynvml"]
    nvml.nvmlInit()
    handle = telemetry.open_gpu(gpu_info()[0]["uuid"])
    first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    nvml.nvmlGpmSampleGet(handle, first)
    nvml.nvmlGpmSampleGet(handle, second)
    asked = nvml.c_nvmlGpmMetricsGet_t()
    asked.version, asked.numMetrics = nvml.NVML_GPM_METRICS_GET_VERSION, 1
    asked.sample1, asked.sample2 = first, second
    asked.metrics[0].metricId = nvml.NVML_GPM_METRIC_SM_UTIL
    with pytest.raises(nvml.NVMLError_InvalidArgument):
        nvml.nvmlGpmMetricsGet(asked)
    for sample in (first, second):
        nvml.nvmlGpmSampleFree(sample)
    with pytest.raises(nvml.NVMLError_InvalidArgument):  # freed: no longer the driver's
        nvml.nvmlGpmSampleFree(first)


def test_a_measured_points_window_records_gpm_in_its_row(played, short):
    played("h100")
    (gpu,) = gpu_info()
    bench = BenchSettings(
        seed=0, warmup=1, warmup_seconds=0.0, repeats=3, check_rows=8, min_seconds=0.2
    )
    target = gpu_target(gpu, print)
    point = measure_point("h100", "float16", [128] * 3, target, bench, gpu)
    # The window held 0.2 s of calls, whichever way they were timed: its samples are per call,
    # and where a CUDA graph's replays came out faster, each replay's time over its calls.
    assert point.status == "measured" and point.window_s >= 0.2
    assert {name: getattr(point, name) for name in GPM_FIELDS} == PLAYED
    assert point.counter_errors == "" and point.power_held_s >= 0.2
    # float32 at "highest" precision runs cuBLAS's SIMT kernel: the tensor pipes read idle.
    simt = measure_point("h100", "float32", [128] * 3, target, bench, gpu)
    idle = PLAYED | {"gpm_tensor_active_pct": 0.0, "gpm_hmma_active_pct": 0.0}
    assert {name: getattr(simt, name) for name in GPM_FIELDS} == idle


def test_gpu_check_says_a_float32_window_left_the_tensor_pipes_idle():
    from roofline.gpu_suite import counters_agree

    simt = {"status": "measured", "dtype": "float32", "sm_clock_mhz": 1755.0}
    simt |= {"sm_clock_max_mhz": 1980.0, "gpm_tensor_active_pct": 0.0, "achieved_tflops": 51.0}
    said = counters_agree([simt], {"float32": 66.9}, 1830.0)
    assert said.splitlines()[1] == (
        "  float32       tensor pipes idle (0.0%): it ran on the CUDA cores, so there is no "
        "tensor-core rate to compare with"
    )


def test_gpu_check_compares_the_tensor_pipes_active_share_with_the_measured_rate():
    from roofline.gpu_suite import counters_agree

    read = {"status": "measured", "sm_clock_mhz": 1755.0, "sm_clock_max_mhz": 1980.0}
    rows = [
        read | {"dtype": "float16", "gpm_tensor_active_pct": 75.8, "achieved_tflops": 702.0},
        read | {"dtype": "bfloat16", "gpm_tensor_active_pct": 75.8, "achieved_tflops": 500.0},
        read
        | {"dtype": "tf32", "gpm_tensor_active_pct": None, "achieved_tflops": 400.0}
        | {"counter_errors": "GPM: this GPU has none (NVML GPM is Hopper's and newer)"},
        {"status": "skipped", "dtype": "float8_e4m3fn"},
    ]
    said = counters_agree(rows, {"float16": 989.4, "bfloat16": 989.4, "tf32": 494.7}, 1830.0)
    # By hand: 0.758 x 1755 MHz x 989.4 TFLOP/s / 1830 MHz = 719.2 TFLOP/s.
    assert said.splitlines()[1:] == [
        "  float16       tensor pipes active 75.8% at 1755 MHz: 719.2 TFLOP/s at the "
        "datasheet's rate a clock; measured 702.0 (98%): agree",
        "  bfloat16      tensor pipes active 75.8% at 1755 MHz: 719.2 TFLOP/s at the "
        "datasheet's rate a clock; measured 500.0 (70%): disagree (more than 10% apart)",
        "  tf32          not compared: GPM: this GPU has none (NVML GPM is Hopper's and newer)",
    ]


def test_gpm_refused_in_an_unprivileged_container_says_so_and_keeps_the_held_times(played, short):
    summary, sampled = window(played, "container")
    assert all(getattr(summary, name) is None for name in GPM_FIELDS)
    assert summary.counter_errors == (
        "GPM: NVML_ERROR_NO_PERMISSION (Insufficient Permissions): this process may not read "
        "the GPU's own counters (an unprivileged container is refused them: NVIDIA/DCGM#214)"
    )
    assert summary.power_held_s == pytest.approx(sampled.window_s, abs=0.02)
