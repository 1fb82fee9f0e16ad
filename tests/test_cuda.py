"""Tests that need an NVIDIA GPU (marked `cuda`, skipped without one). scripts/gpu-check runs
them on a real GPU, and CI runs them on the CUDA stand-in (tests/fakes/cuda) with the `speed`
ones left out: those hold a measured rate to the datasheet, which only a real GPU can show.
They need torch, nvidia-ml-py, PyYAML and pytest only."""

import time
from pathlib import Path

import pytest
import torch

from roofline import kinds
from roofline.dtypes import DTYPES
from roofline.gpu_suite import device_files, match
from roofline.hardware import gpu_info
from roofline.kernels import GRAPH_BELOW_S, measure_matmul, unsupported_reason
from roofline.lab import bench_matmul
from roofline.telemetry import Sampler, open_gpu, summarize

pytestmark = pytest.mark.cuda
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu() -> dict:
    return gpu_info()[0]


@pytest.fixture(scope="module")
def cuda(gpu) -> kinds.Cuda:
    """The first GPU, warmed: the first launch pays for the context, cuBLAS handles and clocks
    ramping: pay it once before anything is asserted."""
    kind = kinds.Cuda(gpu["index"], gpu.get("uuid"))
    a = torch.randn(1024, 1024, device=kind.tensors())
    for _ in range(20):
        a @ a
    kind.synchronize()
    return kind


def timed(cuda, dtype: str, size: int, **kw) -> object:
    settings = dict(seed=0, warmup=2, repeats=5, check_rows=16, cache_bytes=None) | kw
    return measure_matmul(size, size, size, dtype, cuda, **settings)


def test_probe_describes_the_gpu(gpu):
    assert gpu["name"] and gpu["sm_count"] > 0 and gpu["memory_bytes"] > 0
    assert gpu["l2_bytes"] and gpu["driver"] and gpu["max_sm_clock_mhz"] > 0


def test_cuda_events_time_the_gpu_work_not_the_launch(cuda):
    start = time.perf_counter()
    torch.cuda._sleep(10_000)
    launch = time.perf_counter() - start
    cuda.synchronize()
    (seconds,) = cuda.timer().times(lambda i: torch.cuda._sleep(200_000_000), 0, 1)
    assert seconds > 20 * launch and seconds > 0.01  # ~0.1 s of cycles, not the launch


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "tf32", "float32"])
def test_gpu_matmul_is_checked_then_timed(cuda, gpu, dtype):
    point = timed(cuda, dtype, 128, cache_bytes=gpu["l2_bytes"])
    assert len(point.samples) >= 5 and min(point.samples) > 0
    assert point.check_error <= DTYPES[dtype].tolerance
    assert point.buffer_sets > 1  # 128^3 operands fit in L2: rotated


def test_float32_does_not_use_tf32(cuda):
    assert timed(cuda, "float32", 2048).check_error < 1e-5  # TF32 rounding would give ~1e-3


def test_float8_runs_where_supported_and_says_why_not_elsewhere(cuda, gpu):
    cc = gpu["compute_capability"]
    reason = unsupported_reason("float8_e4m3fn", "cuda", None, cc)
    if reason:
        assert cc in reason
        return
    assert timed(cuda, "float8_e4m3fn", 512).check_error <= DTYPES["float8_e4m3fn"].tolerance


@pytest.mark.speed  # a 64^3 call under GRAPH_BELOW_S is a real GPU's speed, not the stand-in's
def test_a_short_call_is_timed_from_a_cuda_graph_when_that_measures_it_better(cuda):
    point = timed(cuda, "float32", 64, repeats=20)
    assert sum(point.samples) / len(point.samples) < GRAPH_BELOW_S * 10
    assert point.timing.startswith("CUDA graph") or "not faster" in point.timing, point.timing


def test_nvml_sampler_sees_the_gpu_under_load_with_energy(cuda, gpu):
    a = torch.randn(1024, 1024, device=cuda.tensors())
    with Sampler(open_gpu(gpu["uuid"]), interval_s=0.01, own_pids=cuda.own_pids) as watch:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            a @ a
        cuda.synchronize()
    summary = summarize(watch, gpu["max_sm_clock_mhz"])
    assert summary["samples"] >= 5 and summary["sm_clock_mhz"] > 0 and summary["power_w"] > 0
    assert summary["energy_j"] is None or summary["energy_j"] > 0
    assert "gpu_idle" not in summary["throttle_reasons"]
    assert summary["other_processes"] == [], "this process was taken for another"


@pytest.mark.speed
def test_the_labs_bench_matmul_is_inside_a_band_from_the_dense_peak(gpu):
    name, dev = match(gpu, device_files(ROOT / "conf/device"))
    peak = dev["peak_tflops"].get("float16")
    if not peak:
        pytest.skip(f"{name} has no device file with a float16 peak")
    tflops, gbps = bench_matmul()
    assert 0.3 * peak <= tflops <= peak, f"{tflops:.1f} TFLOP/s against a dense peak of {peak}"
    assert gbps == pytest.approx(tflops * 1e12 / (8192 / 3) / 1e9)  # bytes = FLOPs / intensity
