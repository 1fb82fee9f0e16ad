"""The one timing abstraction, with a stand-in device: calls queued back to back between their
own events, one synchronise at the end; warm-up by count and by time; the telemetry window
around the timed calls only."""

import contextlib

import pytest

from roofline import kinds
from roofline.timing import EventTimer, HostTimer, sample


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
    samples, _ = sample(seen.append, CountingTimer(), warmup=2, repeats=3)
    assert seen == [0, 1, 2, 3, 4]  # warm-up calls first, then the timed ones; indices rotate
    assert samples == [3.0, 4.0, 5.0]  # warm-up times are dropped


def test_a_sustained_window_is_filled_from_the_fastest_warm_up_call():
    # Warm-ups take 1 s and 2 s; a 10 s window at 1 s per call needs 10 calls.
    assert len(sample(lambda i: None, CountingTimer(), 2, 3, min_seconds=10.0)[0]) == 10
    assert len(sample(lambda i: None, CountingTimer(), 2, 30, min_seconds=10.0)[0]) == 30


def test_warm_up_goes_on_until_its_seconds_have_run():
    timer = CountingTimer()
    sample(lambda i: None, timer, warmup=1, repeats=1, warmup_seconds=5.0)
    # Calls of 1 s, then 4 more at the 1 s estimate (2 + 3 + 4 + 5 s): 15 s >= 5 s; then 1 timed.
    assert len(timer.calls) == 6


def test_the_telemetry_window_holds_the_timed_calls_only():
    timer, seen_inside = CountingTimer(), []

    @contextlib.contextmanager
    def window():
        start = len(timer.calls)
        yield "watch"
        seen_inside.extend(timer.calls[start:])

    _, watch = sample(lambda i: None, timer, warmup=2, repeats=3, window=window)
    assert watch == "watch" and seen_inside == [2, 3, 4]


def test_each_kind_gets_its_timer(played):
    assert isinstance(kinds.make("cpu").timer(), HostTimer)
    assert kinds.make("mps").timer().name == "mps events, calls back to back"
    played("h100")
    assert kinds.make("cuda", {"index": 0}).timer().name == "cuda events, calls back to back"
    assert all(s > 0 for s in HostTimer().times(lambda i: sum(range(1000)), 0, 2))


def test_a_window_by_time_is_honoured_without_a_warm_up():
    timer = CountingTimer()
    samples, _ = sample(lambda i: None, timer, warmup=0, repeats=2, min_seconds=10.0)
    assert len(samples) >= 10 / 1  # its one untimed call took 1 s: ten more fill the window
