"""A CPU's memory roof: STREAM's copy and triad on every core at once (roofline.device.stream),
and torch's copy where it cannot be measured. Real programs on this CPU, at small windows; no
speed is asserted."""

import pytest

from roofline.device import stream
from roofline.device.cache_ceilings import CacheSize
from roofline.device.programs import Window

MiB = 1 << 20
SIZES = [CacheSize("L1", 32 << 10, 1), CacheSize("L2", MiB, 1), CacheSize("L3", 32 * MiB, 2)]


def test_each_array_is_four_times_the_largest_cache_a_copy_has_and_at_least_64_mib():
    # L3: 32 MiB shared by 2 copies, 16 MiB each: 4 x 16 = 64 MiB.
    assert stream.array_bytes(SIZES, 2, 64 << 30) == 64 * MiB
    big = [CacheSize("L3", 96 * MiB, 1)]  # a copy with a 96 MiB L3 of its own: 384 MiB
    assert stream.array_bytes(big, 1, 64 << 30) == 384 * MiB
    assert stream.array_bytes([], 4, 64 << 30) == 64 * MiB  # no levels known: DRAM_LEAST


def test_the_arrays_of_every_copy_stay_within_a_quarter_of_the_memory_free():
    # 8 GiB free, 2 copies of 3 arrays: each at most 8 GiB / 4 / 6 = 341 MiB, on a page.
    n = stream.array_bytes([CacheSize("L3", 128 * MiB, 1)], 2, 8 << 30)  # 512 MiB wanted
    assert n == (8 << 30) // 4 // 6 // 4096 * 4096 and n * 3 * 2 <= (8 << 30) // 4
    # Where that leaves no array past the caches, none: never a figure of a cache called DRAM.
    assert stream.array_bytes([CacheSize("L3", 512 * MiB, 1)], 2, 1 << 30) is None
    ceiling, why = stream.measure_stream(2, [CacheSize("L3", 512 * MiB, 1)], 1 << 30)
    assert ceiling is None
    assert why == "three arrays a core past the caches would not fit in 25% of the memory free"


@pytest.mark.posix
def test_stream_runs_a_copy_on_every_core_and_counts_bytes_as_stream_does():
    from roofline.device.programs import compiler

    if compiler() is None:
        pytest.skip("no C compiler here: the next test shows what is recorded then")
    ceiling, why = stream.measure_stream(2, SIZES, 64 << 30, seconds=0.02)
    if ceiling is None:  # a busy machine can share every window: said, never a number
        assert why.startswith("every one of its 5 copy windows shared"), why
        return
    assert why == "" and ceiling["copies"] == 2 and ceiling["array_bytes"] == 64 * MiB
    # Copy: each element read and written, 16 bytes a double, on each copy's arrays.
    assert ceiling["bytes_moved"] == 2 * 64 * MiB * 2
    assert 1 <= len(ceiling["samples_s"]) <= 5
    assert ceiling["min_s"] <= ceiling["median_s"] <= ceiling["max_s"]
    assert ceiling["gbps"] == pytest.approx(
        ceiling["bytes_moved"] / ceiling["min_s"] / 1e9
    )  # the best window
    assert ceiling["how"] == (
        "STREAM's copy (its loop, plain vector stores) on every core at once: 2 copies, each "
        "over arrays of 64 MiB, their windows started together"
    )
    triad = ceiling["triad_gbps"]
    assert (triad is not None and triad > 0) or "shared" in ceiling["triad_reason"]


def windows(*totals: float, shared: bool = False) -> list[Window]:
    share = 0.5 if shared else 1.0
    return [Window([t / 2, t / 2], [share, share]) for t in totals]


def played(monkeypatch, copy: list[Window], triad: list[Window]) -> None:
    """The program built, and its windows as given: the copy's, then the triad's, as one
    process a core prints them."""
    monkeypatch.setattr(stream, "build", lambda *a, **k: "program")
    monkeypatch.setattr(stream, "run_windows", lambda binary, args, copies: copy + triad)


def test_the_figure_is_the_best_of_the_windows_no_copy_shared(monkeypatch):
    copy = windows(40, 10, 42, 41, 44) + windows(90, shared=True)
    played(monkeypatch, copy, windows(30, 33) + windows(1, 1, 1, 1, shared=True))
    ceiling, why = stream.measure_stream(2, SIZES, 64 << 30, windows=6)
    # STREAM's statistic: the best window. The shared 90 is none of them; 10 GB/s, a window a
    # neighbour slowed without taking the CPU, is kept as every sample is, and spreads them.
    assert why == "" and ceiling["gbps"] == pytest.approx(44.0)
    assert len(ceiling["samples_s"]) == 5 and ceiling["spread"] > 0.5
    assert ceiling["median_s"] == pytest.approx(ceiling["bytes_moved"] / 41e9)  # kept beside it
    assert ceiling["triad_gbps"] == pytest.approx(33.0)


def test_a_stream_whose_every_window_was_shared_gives_no_figure(monkeypatch):
    played(monkeypatch, windows(40, 41, shared=True), windows(30, 31))
    ceiling, why = stream.measure_stream(2, SIZES, 64 << 30, windows=2)
    assert ceiling is None
    assert why == "every one of its 2 copy windows shared the CPUs with another process"


def test_a_triad_whose_every_window_was_shared_is_kept_out_and_said(monkeypatch):
    played(monkeypatch, windows(40, 41), windows(30, 31, shared=True))
    ceiling, _ = stream.measure_stream(2, SIZES, 64 << 30, windows=2)
    assert ceiling["gbps"] > 0 and ceiling["triad_gbps"] is None
    assert ceiling["triad_reason"] == "every window shared the CPUs with another process"


def test_a_stream_faster_than_its_cores_can_move_is_refused(monkeypatch):
    played(monkeypatch, windows(40, 5000), windows(30, 31))
    ceiling, why = stream.measure_stream(2, SIZES, 64 << 30, clock_ghz=3.0, windows=2)
    assert ceiling is None
    assert why == "its copy read 5000 GB/s, above what 2 cores can move (384)"


def test_no_compiler_or_a_failing_program_says_why(monkeypatch):
    from roofline.device.programs import ProgramFailed

    monkeypatch.setattr(stream, "build", lambda *a, **k: None)
    monkeypatch.setattr(stream, "not_built", lambda: "no C compiler (cc, gcc or clang) here")
    assert stream.measure_stream(2, SIZES, 64 << 30) == (
        None,
        "no C compiler (cc, gcc or clang) here",
    )
    monkeypatch.setattr(stream, "build", lambda *a, **k: "program")

    def fails(*args, **kwargs):
        raise ProgramFailed("it exited with code 1")

    monkeypatch.setattr(stream, "run_windows", fails)
    assert stream.measure_stream(2, SIZES, 64 << 30) == (None, "it exited with code 1")
    # A program that stopped printing part-way: no figure from half its windows.
    monkeypatch.setattr(stream, "run_windows", lambda *a: windows(40, 41, 42))
    assert stream.measure_stream(2, SIZES, 64 << 30, windows=2) == (
        None,
        "it printed 3 of the 4 windows asked",
    )


def test_a_cpu_without_stream_keeps_torchs_copy_and_says_why(monkeypatch):
    from roofline.configuration.measuring_config import bench_settings
    from roofline.device import kinds
    from roofline.measuring import benchmark
    from roofline.measuring.measure import Target
    from tests.conftest import config

    monkeypatch.setattr(benchmark, "measure_stream", lambda *a, **k: (None, "no C compiler here"))
    bench = bench_settings(config({}, repeats=2, warmup=0, copy_mib=1, min_seconds=0.0))
    target = Target(kinds.Kind(), None, 1 << 30, {"float32"}, threads=2)
    copy = benchmark.cpu_memory_ceiling(target, bench, 2, SIZES, None)
    assert copy["bytes_moved"] == 2 * MiB and len(copy["samples_s"]) == 2 and copy["gbps"] > 0
    assert copy["how"] == (
        "torch's dst.copy_(src) of 1 MiB on 2 threads (STREAM's copy not measured: no C "
        "compiler here)"
    )
    assert "copies" not in copy and "triad_gbps" not in copy


def test_the_appendix_says_what_measured_the_memory_slope_where_the_record_says():
    from roofline.rendering.gap_paragraph import memory_sentences
    from tests.manifests import RUN, entry

    how = (
        "STREAM's copy (its loop, plain vector stores) on every core at once: 2 copies, each "
        "over arrays of 64 MiB"
    )
    copy = RUN["memory_copy"] | {"gbps": 41.2, "how": how, "triad_gbps": 39.87}
    assert memory_sentences(entry(kind="cpu", memory_copy=copy)) == [
        f"The memory slope, 41.2 GB/s, is {how}; STREAM's triad 39.87 GB/s."
    ]
    # A record older than STREAM's (or a GPU's, whose copy is torch's) says nothing more.
    assert memory_sentences(entry(kind="cpu")) == []
