"""The lab's entry point on the CPU: the same harness as the pipeline (its GPU twin is in
test_cuda.py)."""

import pytest
import torch

from roofline.lab import bench_matmul


def test_bench_matmul_on_the_cpu_returns_its_rates():
    tflops, gbps = bench_matmul(256, 256, 256, torch.float32, "cpu", warmup=1, iters=3)
    assert tflops > 0
    # GB/s is the same median time applied to the ideal-cache bytes: 3 x 256^2 x 4.
    assert gbps == pytest.approx(tflops * 1e12 / (2 * 256**3) * (3 * 256 * 256 * 4) / 1e9)


def test_bench_matmul_refuses_an_unknown_dtype():
    with pytest.raises(ValueError, match=r"dtype torch\.int8; allowed"):
        bench_matmul(8, 8, 8, torch.int8, "cpu")
