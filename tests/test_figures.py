"""The figures the pages quote (roofline.interpretation.figures), on numbers worked by hand."""

from types import SimpleNamespace

import pytest

from roofline.interpretation import figures


def test_moving_the_operands_once_takes_their_bytes_over_the_copy_bandwidth():
    # float32 1024^3: 3 x 4 MiB = 12,582,912 bytes at 10 GB/s = 1.258 ms, half of 2.516 ms.
    head = SimpleNamespace(m=1024, n=1024, k=1024, dtype="float32", median_s=2.5165824e-3)
    move = figures.move_time(head, 10.0)
    assert move.seconds == pytest.approx(1.2582912e-3) and move.share == pytest.approx(0.5)


def test_the_side_of_the_ridge_is_the_intensity_against_peak_over_bandwidth():
    # 100 TFLOP/s over 1000 GB/s: ridge 100 FLOP/byte.
    side = figures.against_ridge(250.0, 100.0, 1000.0)
    assert side == pytest.approx((100.0, 2.5, "compute"))
    assert figures.against_ridge(50.0, 100.0, 1000.0).bound == "memory"


def test_the_fma_ceiling_is_read_against_the_computed_peak_only_where_it_says_something():
    quiet = figures.fma_shares(0.18, 200.0, 0.25, noisy=False)
    assert quiet.ceiling_tflops == pytest.approx(0.2) and quiet.kernel_share == pytest.approx(0.9)
    assert quiet.of_computed == pytest.approx(0.8) and quiet.reading == "low"
    assert figures.fma_shares(0.18, 200.0, 0.25, noisy=True).reading == ""  # shared: both low
    assert figures.fma_shares(0.18, 200.0, 0.18, noisy=False).reading == "above"  # 111%
    assert figures.fma_shares(0.18, 200.0, 0.2, noisy=False).reading == ""  # 100%
    assert figures.fma_shares(0.18, 200.0, None, noisy=False).of_computed is None


def test_a_sustained_window_against_its_burst():
    burst = SimpleNamespace(achieved_tflops=800.0, window_s=2.0)
    held = SimpleNamespace(achieved_tflops=720.0, window_s=30.0, median_s=1e-3, repeats=1)
    assert figures.sustained_change(held, burst) == pytest.approx((-0.1, False))
    short = SimpleNamespace(achieved_tflops=880.0, window_s=float("nan"), median_s=0.5, repeats=4)
    assert figures.window_seconds(short) == 2.0  # median x calls where no window was recorded
    assert figures.sustained_change(short, burst) == pytest.approx((0.1, True))


def test_ratios_and_prices():
    assert figures.ratio(3.0, 2.0) == 1.5
    assert figures.per_dollar_hour(600.0, 2.5) == 240.0
