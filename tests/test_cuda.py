"""Tests that need an NVIDIA GPU (marked `cuda`, skipped without one). scripts/gpu-check runs
them, then the short GPU suite. They need torch, nvidia-ml-py, PyYAML and pytest only."""

import time
from pathlib import Path

import pytest
import torch

from roofline.dtypes import DTYPES
from roofline.gpu_suite import device_files, match
from roofline.hardware import gpu_info
from roofline.kernels import GRAPH_BELOW_S, measure_matmul, unsupported_reason
from roofline.lab import bench_matmul
from roofline.telemetry import Sampler, nvml_handle, summarize
from roofline.timing import timer_for

pytestmark = pytest.mark.cuda
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def warm_gpu():
    """The first launch pays for the context, cuBLAS handles and clocks ramping: pay it once
    before anything is asserted."""
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()


def gpu() -> dict:
    return gpu_info()[0]


def timed(dtype: str, size: int, **kw) -> object:
    settings = dict(seed=0, warmup=2, repeats=5, check_rows=16, cache_bytes=None) | kw
    return measure_matmul(size, size, size, dtype, "cuda", timer_for("cuda"), **settings)


def test_probe_describes_the_gpu():
    found = gpu()
    assert found["name"] and found["sm_count"] > 0 and found["memory_bytes"] > 0
    assert found["l2_bytes"] and found["driver"] and found["max_sm_clock_mhz"] > 0


def test_cuda_events_time_the_gpu_work_not_the_launch():
    start = time.perf_counter()
    torch.cuda._sleep(10_000)
    launch = time.perf_counter() - start
    torch.cuda.synchronize()
    (seconds,) = timer_for("cuda").times(lambda i: torch.cuda._sleep(200_000_000), 0, 1)
    assert seconds > 20 * launch and seconds > 0.01  # ~0.1 s of cycles, not the launch


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "tf32", "float32"])
def test_gpu_matmul_is_checked_then_timed(dtype):
    point = timed(dtype, 1024, cache_bytes=gpu()["l2_bytes"])
    assert len(point.samples) >= 5 and min(point.samples) > 0
    assert point.check_error <= DTYPES[dtype].tolerance
    assert point.buffer_sets > 1  # 1024^3 operands fit in L2: rotated


def test_float32_does_not_use_tf32():
    assert timed("float32", 2048).check_error < 1e-5  # TF32 rounding would give ~1e-3


def test_float8_runs_where_supported_and_says_why_not_elsewhere():
    cc = gpu()["compute_capability"]
    reason = unsupported_reason("float8_e4m3fn", "cuda", None, cc)
    if reason:
        assert cc in reason
        return
    assert timed("float8_e4m3fn", 1024).check_error <= DTYPES["float8_e4m3fn"].tolerance


def test_a_short_call_is_timed_from_a_cuda_graph_when_that_measures_it_better():
    point = timed("float16", 256, repeats=20)
    assert sum(point.samples) / len(point.samples) < GRAPH_BELOW_S * 10
    assert point.timing.startswith("CUDA graph") or "not faster" in point.timing, point.timing


def test_nvml_sampler_sees_the_gpu_under_load_with_energy():
    found = gpu()
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    with Sampler(nvml_handle(found["index"], found.get("uuid")), interval_s=0.01) as watch:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            a @ a
        torch.cuda.synchronize()
    summary = summarize(watch, found["max_sm_clock_mhz"])
    assert summary["samples"] >= 5 and summary["sm_clock_mhz"] > 0 and summary["power_w"] > 0
    assert summary["energy_j"] is None or summary["energy_j"] > 0
    assert "gpu_idle" not in summary["throttle_reasons"]


def test_the_labs_bench_matmul_is_inside_a_band_from_the_dense_peak():
    name, dev = match(gpu(), device_files(ROOT / "conf/device"))
    peak = dev["peak_tflops"].get("float16")
    if not peak:
        pytest.skip(f"{name} has no device file with a float16 peak")
    tflops, gbps = bench_matmul()
    assert 0.3 * peak <= tflops <= peak, f"{tflops:.1f} TFLOP/s against a dense peak of {peak}"
    assert gbps == pytest.approx(tflops * 1e12 / (8192 / 3) / 1e9)  # bytes = FLOPs / intensity
