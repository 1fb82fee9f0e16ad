"""Known answers, worked by hand, for the roofline arithmetic."""

import pytest

from roofline.core import arithmetic as ar
from roofline.interpretation import roofs


def test_flops_and_bytes_of_a_small_matmul():
    # 2x3 @ 3x4: 2*2*4*3 = 48 FLOP; (2*3 + 3*4 + 2*4) = 26 elements.
    assert ar.matmul_flops(2, 4, 3) == 48
    assert ar.matmul_bytes(2, 4, 3, "float16") == 52
    assert ar.matmul_bytes(2, 4, 3, "float32") == 104
    assert ar.matmul_bytes(2, 4, 3, "tf32") == 104
    # float8 reads 1-byte A and B and writes a bfloat16 C: 18 * 1 + 8 * 2.
    assert ar.matmul_bytes(2, 4, 3, "float8_e4m3fn") == 34


def test_intensity_of_the_labs_kernel_is_n_over_3_per_byte_of_element():
    n = 8192
    flops = ar.matmul_flops(n, n, n)
    # 2n^3 / (3 n^2 * 2 bytes) = n/3, not the lab text's "about 4096".
    assert ar.intensity(flops, ar.matmul_bytes(n, n, n, "float16")) == pytest.approx(
        2730.6667, abs=1e-3
    )
    assert ar.intensity(flops, ar.matmul_bytes(n, n, n, "float32")) == pytest.approx(
        1365.3333, abs=1e-3
    )
    # float8: 2n^3 / (2 n^2 * 1 + n^2 * 2) = n/2, with C in bfloat16 (not n*2/3 = 5461).
    assert ar.intensity(flops, ar.matmul_bytes(n, n, n, "float8_e4m3fn")) == 4096


def test_rates_and_mfu():
    assert ar.tflops(2e12, 0.5) == pytest.approx(4.0)
    assert ar.gbps(3e9, 1.5) == pytest.approx(2.0)
    assert roofs.mfu(250.0, 312.0) == pytest.approx(0.801282, abs=1e-6)


@pytest.mark.parametrize(
    ("peak", "bandwidth", "ridge"),
    [(312.0, 2039.0, 153.0), (989.4, 3350.0, 295.3), (989.4, 4800.0, 206.1)],
)
def test_ridge_points_of_the_datasheets(peak, bandwidth, ridge):
    assert roofs.ridge_point(peak, bandwidth) == pytest.approx(ridge, abs=0.1)


def test_roof_is_the_slope_below_the_ridge_and_the_peak_above():
    # 100 GB/s and 1 TFLOP/s: ridge at 10 FLOP/byte.
    assert roofs.roof_tflops(1.0, 1.0, 100.0) == pytest.approx(0.1)
    assert roofs.roof_tflops(10.0, 1.0, 100.0) == pytest.approx(1.0)
    assert roofs.roof_tflops(1000.0, 1.0, 100.0) == 1.0


def test_cpu_peak_and_isa_choice():
    # The lab's i5-8250U: 4 cores x 3.4 GHz x 32 (AVX2, two FMA units) = 435.2 GFLOP/s.
    assert roofs.cpu_peak_tflops(4, 3.4, 32) == pytest.approx(0.4352)
    assert ar.cpu_flop_per_cycle("float32", {"avx2", "fma"})[0] == 32
    assert ar.cpu_flop_per_cycle("float32", {"avx2", "fma", "avx512f"})[0] == 64
    assert ar.cpu_flop_per_cycle("float32", set()) is None  # SSE only, or arm64: none known
    # Zen 4 runs AVX-512 on 256-bit units: half the FLOP per cycle of a 512-bit instruction.
    assert ar.cpu_flop_per_cycle("float32", {"avx512f", "avx2", "fma"}, "zen4") == (
        32,
        "AVX-512 FMA at half rate: zen4's vector units are half as wide",
    )
    assert ar.cpu_flop_per_cycle("float32", {"avx512f"}, "zen5")[0] == 64
    assert ar.cpu_flop_per_cycle("bfloat16", {"amx_bf16", "avx512_bf16"})[0] == 1024
    assert ar.cpu_flop_per_cycle("bfloat16", {"avx512_bf16"})[0] == 128
    assert ar.cpu_flop_per_cycle("bfloat16", {"avx2", "fma"}) is None
    assert ar.cpu_flop_per_cycle("float16", {"avx512_fp16"})[0] == 128
    assert ar.cpu_flop_per_cycle("float16", {"avx512f"}) is None


def test_summarize_keeps_median_min_max_and_spread():
    assert ar.summarize([3.0, 1.0, 2.0]) == {
        "median_s": 2.0,
        "min_s": 1.0,
        "max_s": 3.0,
        "spread": 1.0,
    }
    assert ar.summarize([4.0, 1.0, 2.0, 3.0])["median_s"] == 2.5
    with pytest.raises(ValueError, match="no timing samples"):
        ar.summarize([])


def test_buffer_sets_fill_twice_the_cache():
    assert ar.buffer_sets(operand_bytes=100, cache_bytes=50) == 1
    assert ar.buffer_sets(operand_bytes=100, cache_bytes=100) == 1
    assert ar.buffer_sets(operand_bytes=100, cache_bytes=120) == 3  # 240 / 100, rounded up
    assert ar.buffer_sets(operand_bytes=30, cache_bytes=0) == 1


def test_the_clock_a_measured_ceiling_implies():
    # 0.543 TFLOP/s on 2 cores at 64 FLOP/cycle needs 4.2422 GHz: a 4.00 GHz reading was low.
    assert roofs.implied_clock_ghz(0.543, 2, 64) == pytest.approx(4.2422, abs=1e-4)
    assert roofs.cpu_peak_tflops(2, roofs.implied_clock_ghz(0.543, 2, 64), 64) == pytest.approx(
        0.543
    )
