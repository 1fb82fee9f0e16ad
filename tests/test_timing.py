"""The one timing abstraction, with a stand-in device: calls queued back to back between their
own events, one synchronise at the end; warm-up by count and by time; the telemetry window
around the timed calls only; the window filled, or said to be cut short, and how much of the
host it had."""

import contextlib

import pytest

from roofline.device import kinds
from roofline.device.timing import (
    MAX_CALLS,
    BenchSettings,
    EventTimer,
    HostReading,
    HostTimer,
    host_window,
    read_host,
    sample,
)
from tests.conftest import counted


class FakeDevice:
    """torch.cuda / torch.mps as the timer uses them, on a clock that work advances."""

    def __init__(self):
        self.log, self.now = [], 0.0

    def synchronize(self):
        self.log.append("synchronize")

    def Event(self, enable_timing):
        device = self

        class Event:
            def record(self):
                device.log.append("record")
                self.at = device.now

            def elapsed_time(self, end):
                return (end.at - self.at) * 1e3  # milliseconds, as torch's

        return Event()


def test_events_are_queued_back_to_back_and_synchronised_once():
    device = FakeDevice()

    def work(i):
        device.log.append(f"work {i}")
        device.now += 0.1 * (i + 1)

    timer = EventTimer(device, "fake events")
    assert timer.times(work, 3, 2) == [pytest.approx(0.4), pytest.approx(0.5)]
    assert device.log == [
        "synchronize",
        "record",
        "work 3",
        "record",
        "record",
        "work 4",
        "record",
        "synchronize",
    ]


class CountingTimer:
    """A Timer whose n-th call takes n seconds, so the bookkeeping can be checked."""

    name = "counting"

    def __init__(self):
        self.calls = []

    def times(self, work, first, count):
        out = []
        for i in range(first, first + count):
            work(i)
            self.calls.append(i)
            out.append(float(len(self.calls)))
        return out


def test_warm_up_then_every_timed_call_is_kept():
    seen = []
    samples = sample(seen.append, CountingTimer(), counted(warmup=2, repeats=3)).samples
    assert seen == [0, 1, 2, 3, 4]  # warm-up calls first, then the timed ones; indices rotate
    assert samples == [3.0, 4.0, 5.0]  # warm-up times are dropped


def test_a_sustained_window_is_filled_from_the_fastest_warm_up_call():
    # Warm-ups take 1 s and 2 s; a 10 s window at 1 s per call needs 10 calls.
    assert (
        len(sample(lambda i: None, CountingTimer(), counted(2, 3, min_seconds=10.0)).samples) == 10
    )
    assert (
        len(sample(lambda i: None, CountingTimer(), counted(2, 30, min_seconds=10.0)).samples) == 30
    )


def test_warm_up_goes_on_until_its_seconds_have_run():
    timer = CountingTimer()
    sample(lambda i: None, timer, counted(warmup=1, repeats=1, warmup_seconds=5.0))
    # Calls of 1 s, then 4 more at the 1 s estimate (2 + 3 + 4 + 5 s): 15 s >= 5 s; then 1 timed.
    assert len(timer.calls) == 6


def test_the_telemetry_window_holds_the_timed_calls_only():
    timer, seen_inside = CountingTimer(), []

    @contextlib.contextmanager
    def window():
        start = len(timer.calls)
        yield "watch"
        seen_inside.extend(timer.calls[start:])

    watch = sample(lambda i: None, timer, counted(warmup=2, repeats=3), window=window).watch
    assert watch == "watch" and seen_inside == [2, 3, 4]


def test_each_kind_gets_its_timer(played):
    assert isinstance(kinds.make("cpu").timer(), HostTimer)
    assert kinds.make("mps").timer().name == "mps events, calls back to back"
    played("h100")
    assert kinds.make("cuda", {"index": 0}).timer().name == "cuda events, calls back to back"
    assert all(s > 0 for s in HostTimer().times(lambda i: sum(range(1000)), 0, 2))


def test_a_window_by_time_is_honoured_without_a_warm_up():
    timer = CountingTimer()
    samples = sample(lambda i: None, timer, counted(warmup=0, repeats=2, min_seconds=10.0)).samples
    assert sum(samples) >= 10.0  # its one untimed call gave the pace; the window is filled


class FixedTimer:
    """A Timer whose first call takes `cold` seconds and every other `warm` seconds."""

    name = "fixed"

    def __init__(self, cold: float, warm: float):
        self.cold, self.warm, self.calls = cold, warm, 0

    def times(self, work, first, count):
        out = [self.cold if self.calls + i == 0 else self.warm for i in range(count)]
        self.calls += count
        return out


@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_warm_up_seconds_are_honoured_whatever_the_warm_up_count(warmup):
    timer = FixedTimer(0.01, 0.01)
    sample(lambda i: None, timer, counted(warmup=warmup, repeats=1, warmup_seconds=0.5))
    assert timer.calls >= 50 + 1  # 0.5 s of 10 ms warm-up calls, then the timed one


def test_a_window_estimated_from_a_cold_first_call_is_filled_at_its_own_pace():
    # warmup=1: the one warm-up call is cold (1 s), the rest take 1 ms. The count from the
    # warm-up asks for 1 call; the window tops itself up to the 0.5 s asked.
    timed = sample(lambda i: None, FixedTimer(1.0, 0.001), counted(1, 1, min_seconds=0.5))
    assert sum(timed.samples) >= 0.5 and timed.window.cut == ""


def test_a_window_cut_by_the_call_cap_is_recorded_and_said():
    timed = sample(lambda i: None, FixedTimer(4e-6, 4e-6), counted(1, 1, min_seconds=0.5))
    assert len(timed.samples) == MAX_CALLS
    assert timed.window.cut == "0.04 s of the 0.5 s asked: cut by the 10,000-call cap"


def test_how_much_of_the_host_a_window_had_is_read_from_the_os(tmp_path):
    start = HostReading(0.0, 0.0, 3, 1, 10.0, 5.0, 2)
    end = HostReading(1.0, 1.0, 4, 1, 10.1, 5.0, 2)
    window = host_window(start, end, threads=2)
    assert window.cpu_share == pytest.approx(0.5)  # 1 s of CPU over 1 s x 2 threads
    assert window.other_runnable == 2  # the fewer of the two ends: one left before the end
    assert window.steal == pytest.approx(0.05) and window.idle == 0.0
    assert host_window(start, end, threads=None).cpu_share is None  # a GPU's: not asked
    # No /proc (macOS, Windows), or gVisor's, all zeros: nothing is guessed.
    for proc in (tmp_path / "none", tmp_path / "gvisor"):
        if proc.name == "gvisor":
            proc.mkdir()
            (proc / "stat").write_text(
                "cpu  0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0\nprocs_running 0\n"
            )
        reading = read_host(proc)
        assert (reading.runnable, reading.steal_s, reading.idle_s, reading.cores) == (None,) * 4
        window = host_window(reading, read_host(proc), threads=2)
        assert window.other_runnable is window.steal is window.idle is None


def test_our_runnable_threads_are_not_guessed_where_proc_has_no_task_list(tmp_path):
    from roofline.device.timing import _own_runnable

    assert _own_runnable(tmp_path) is None  # no /proc/self/task (or a thread gone mid-read)
    assert isinstance(_own_runnable(read_host.__defaults__[0]), int)  # this machine's /proc


def test_the_sustained_window_is_a_gpus_by_default_and_a_cpus_only_when_asked():
    default = BenchSettings()
    assert default.sustained_for("cuda") == 60.0 and default.sustained_for("mps") == 60.0
    assert default.sustained_for("cpu") == 0.0  # a laptop's run stays as short as it was
    shorter = BenchSettings(sustained_seconds=5.0)  # -S bench.sustained_seconds=5
    assert shorter.sustained_for("cuda") == 5.0 and shorter.sustained_for("cpu") == 0.0
    assert BenchSettings(sustained_seconds=5.0, sustained_cpu=True).sustained_for("cpu") == 5.0
    assert BenchSettings(sustained_seconds=0.0, sustained_cpu=True).sustained_for("cpu") == 0.0


def test_a_long_window_of_short_calls_keeps_each_samples_mean_call():
    from roofline.measuring.matmul import batched, measure_matmul

    timer = CountingTimer()
    kind = kinds.Kind()
    kind.timer = lambda: timer
    point = measure_matmul(
        *(16, 16, 16, "float32", kind),
        counted(1, 3, check_rows=4),
        cache_bytes=None,
        calls_per_sample=4,
    )
    # Four calls a sample: samples 2, 3 and 4 (1 is the warm-up) of 4 calls each, per call.
    assert timer.calls == [0, 1, 2, 3] and point.samples == [0.5, 0.75, 1.0]
    assert point.timing == "counting, 4 calls a sample"
    seen = []
    batched(seen.append, 4)(2)  # the third sample's calls rotate on through the operand sets
    assert seen == [8, 9, 10, 11]
