"""Whether a run may read its CPU's own performance counters: the answer this machine gives for
real, and each refusal perf_event_open can give, recorded by name, never as a count of zero."""

import errno
import platform

import pytest

from roofline.device import perf_counters as pc


def test_this_machine_answers_whether_its_counters_are_readable_and_why_not():
    found = pc.perf_counters()
    assert isinstance(found["readable"], bool) and found["reason"]
    if platform.system() != "Linux":
        assert found["reason"].startswith("not read:") and found["paranoid"] is None
    elif not found["readable"]:  # this repo's VMs: no PMU, ENOENT
        assert found["reason"].startswith("perf_event_open refused: E")
        assert found["reason"].endswith(f"; perf_event_paranoid {found['paranoid']})")


@pytest.mark.parametrize(
    "code, named",
    [
        (errno.ENOENT, "ENOENT (no PMU, as in a VM;"),
        (errno.EACCES, "EACCES (not allowed to an unprivileged process"),
        (errno.ENOSYS, "ENOSYS (no perf_event_open in this kernel"),
        (errno.EBUSY, "EBUSY (Device or resource busy"),  # any other: the OS's own words
    ],
)
def test_a_refusal_is_recorded_by_its_errno_name(code, named):
    asked = []

    def refused(number):
        asked.append(number)
        return -1, code

    found = pc.perf_counters("Linux", "x86_64", refused)
    assert asked == [298] and found["readable"] is False
    assert found["reason"].startswith(f"perf_event_open refused: {named}")


def test_an_os_without_perf_event_open_or_an_unknown_machine_is_said_so():
    never = pytest.fail
    for system in ("Darwin", "Windows"):
        found = pc.perf_counters(system, "arm64", never)
        assert found == {
            "readable": False,
            "reason": "not read: the lab reads counters through Linux's perf_event_open, "
            f"which {system} does not have",
            "paranoid": None,
        }
    found = pc.perf_counters("Linux", "riscv64", never)
    assert not found["readable"] and "on riscv64 is not known" in found["reason"]


def test_an_opened_counter_is_readable_only_where_it_counted(monkeypatch):
    closed = []
    monkeypatch.setattr(pc.os, "close", closed.append)
    for cycles, readable in ((123456, True), (0, False)):
        monkeypatch.setattr(pc, "_count", lambda fd, cycles=cycles: cycles)
        found = pc.perf_counters("Linux", "aarch64", lambda number: (7, 0))
        assert found["readable"] is readable and str(cycles) in found["reason"]
    assert closed == [7, 7]  # every counter opened is closed
