"""The lab's entry point on the CPU: the same harness as the pipeline (its GPU twin is in
test_cuda.py)."""

import pytest
import torch

from roofline.arithmetic import cpu_flop_per_cycle, cpu_peak_tflops
from roofline.hardware import cpu_info, measure_cpu_clock_ghz
from roofline.lab import bench_matmul


def test_bench_matmul_on_the_cpu_is_positive_and_below_the_probes_peak():
    tflops, gbps = bench_matmul(256, 256, 256, torch.float32, "cpu", warmup=1, iters=3)
    assert tflops > 0
    assert gbps == pytest.approx(tflops * 1e12 / (2 * 256**3) * (3 * 256 * 256 * 4) / 1e9)
    clock = measure_cpu_clock_ghz(cpu_info()["logical_cores"])
    if clock is None:
        pytest.skip("no C compiler: the probe's clock here would be a guess, not an upper bound")
    info = cpu_info()
    peak = cpu_peak_tflops(
        info["logical_cores"], clock, cpu_flop_per_cycle("float32", set(info["isa"]))[0]
    )
    assert tflops <= peak  # the all-core scalar clock bounds any vector clock: above it is a bug


def test_bench_matmul_refuses_an_unknown_dtype():
    with pytest.raises(ValueError, match=r"dtype torch\.int8; allowed"):
        bench_matmul(8, 8, 8, torch.int8, "cpu")
