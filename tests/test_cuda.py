"""Tests that need an NVIDIA GPU (marked `cuda`, skipped without one). scripts/gpu-check runs
them, then the short GPU suite. They need torch, nvidia-ml-py, PyYAML and pytest only."""

import time
from pathlib import Path

import pytest
import torch

from roofline.dtypes import DTYPES
from roofline.gpu_suite import device_files, match
from roofline.hardware import gpu_info
from roofline.kernels import measure_matmul, unsupported_reason
from roofline.lab import bench_matmul
from roofline.telemetry import Sampler, nvml_handle, summarize
from roofline.timing import CudaEventTimer, timer_for

pytestmark = pytest.mark.cuda
ROOT = Path(__file__).resolve().parents[1]


def gpu() -> dict:
    return gpu_info()[0]


def test_probe_describes_the_gpu():
    found = gpu()
    assert found["name"] and found["sm_count"] > 0 and found["memory_bytes"] > 0
    assert found["l2_bytes"] and found["driver"] and found["max_sm_clock_mhz"] > 0


def test_cuda_events_time_the_gpu_work_not_the_launch():
    assert isinstance(timer_for("cuda"), CudaEventTimer)
    start = time.perf_counter()
    torch.cuda._sleep(10_000)
    launch = time.perf_counter() - start
    torch.cuda.synchronize()
    timed = CudaEventTimer().seconds(lambda: torch.cuda._sleep(200_000_000))  # ~0.1 s of cycles
    assert timed > 20 * launch and timed > 0.01


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "tf32", "float32"])
def test_gpu_matmul_is_checked_then_timed(dtype):
    point = measure_matmul(
        1024,
        1024,
        1024,
        dtype,
        "cuda",
        CudaEventTimer(),
        seed=0,
        warmup=2,
        repeats=5,
        check_rows=16,
        cache_bytes=gpu()["l2_bytes"],
    )
    assert len(point.samples) == 5 and min(point.samples) > 0
    assert point.check_error <= DTYPES[dtype].tolerance
    assert point.buffer_sets > 1  # 1024^3 operands fit in L2: rotated


def test_float32_does_not_use_tf32():
    point = measure_matmul(
        2048,
        2048,
        2048,
        "float32",
        "cuda",
        CudaEventTimer(),
        seed=0,
        warmup=1,
        repeats=2,
        check_rows=16,
        cache_bytes=None,
    )
    assert point.check_error < 1e-5  # TF32 rounding would give ~1e-3


def test_float8_runs_where_supported_and_says_why_not_elsewhere():
    cc = gpu()["compute_capability"]
    reason = unsupported_reason("float8_e4m3fn", "cuda", None, cc)
    if reason:
        assert cc in reason
        return
    point = measure_matmul(
        1024,
        1024,
        1024,
        "float8_e4m3fn",
        "cuda",
        CudaEventTimer(),
        seed=0,
        warmup=1,
        repeats=3,
        check_rows=16,
        cache_bytes=None,
    )
    assert point.check_error <= DTYPES["float8_e4m3fn"].tolerance


def test_nvml_sampler_sees_the_gpu_under_load():
    found = gpu()
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    with Sampler(nvml_handle(found["index"], found.get("uuid")), interval_s=0.01) as watch:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            a @ a
        torch.cuda.synchronize()
    summary = summarize(watch.samples, found["max_sm_clock_mhz"])
    assert summary["samples"] >= 5 and summary["sm_clock_mhz"] > 0 and summary["power_w"] > 0


def test_the_labs_bench_matmul_is_inside_a_band_from_the_dense_peak():
    name, dev = match(gpu(), device_files(ROOT / "conf/device"))
    peak = dev["peak_tflops"].get("float16")
    if not peak:
        pytest.skip(f"{name} has no device file with a float16 peak")
    tflops, gbps = bench_matmul()
    assert 0.3 * peak <= tflops <= peak, f"{tflops:.1f} TFLOP/s against a dense peak of {peak}"
    assert gbps == pytest.approx(tflops * 1e12 / (8192 / 3) / 1e9)  # bytes = FLOPs / intensity
