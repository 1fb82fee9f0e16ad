"""A CPU's breakdown sides, measured in every run through the headline's library: the shape
they run at, the record they keep, and what the aggregate makes of it. At tiny sizes here."""

import pytest

from roofline.device.hardware import cpu_info
from roofline.device.timing import BenchSettings
from roofline.interpretation.aggregate import cpu_steps, shared_sides
from roofline.measuring import cpu_steps as steps
from roofline.measuring.measure import measure_point, target_for

BENCH = BenchSettings(seed=0, warmup=1, check_rows=8, min_seconds=0.02, warmup_seconds=0.0)


def test_the_sides_shape_fits_the_budget_at_the_headlines_rate_and_is_never_larger():
    # Two cores at 0.25 TFLOP/s: 3 rounds of a warm-up and a timed call, every thread and one
    # (at worst half as fast) at 8192^3 take 79 s; 10 s allow (10/79)^(1/3) of it: 4096.
    assert steps.sides_shape([8192] * 3, 0.25, 2, 10.0) == [4096] * 3
    # An eighth of the FLOPs at half the rate: 19.8 s, so 0.796 of each side, in steps of 64.
    assert steps.sides_shape([8192, 8192, 1024], 0.125, 2, 10.0) == [6464, 6464, 768]
    assert steps.sides_shape([96] * 3, 0.25, 2, 10.0) == [96] * 3  # never scaled up
    assert steps.sides_shape([8192] * 3, 1e-6, 16, 10.0) == [64] * 3  # never below one step


def test_the_sides_are_measured_through_the_fastest_library_interleaved_and_kept_whole():
    found = cpu_info()
    target = target_for("cpu", found, print)
    rows = [
        measure_point("cpu", "float32", [96] * 3, target, BENCH, found, b)
        for b in ("torch", "numpy")
    ]
    head = max(rows, key=steps.rate)
    record = steps.measure_steps(target, found, rows, BENCH)
    assert "reason" not in record, record.get("reason")
    assert record["backend"] == head.backend
    assert record["shape"] == steps.sides_shape([96] * 3, steps.rate(head), found["logical_cores"])
    assert record["threads"] == found["logical_cores"]
    square = record["in_l2"][0]
    assert record["in_l2"] == [square] * 3 and square % 32 == 0 and square > 0
    for side in steps.SIDES:
        rounds = record[f"{side}_s"]
        assert len(rounds) == steps.ROUNDS and all(r and min(r) > 0 for r in rounds), side
        assert len(record["cpu_shares"][side]) == steps.ROUNDS
    figures = cpu_steps(record)
    assert figures.every_thread.tflops > 0 and figures.in_l2_thread.tflops > 0
    assert figures.every_thread.spread >= 0


def test_sides_not_measured_say_why_and_the_aggregate_reads_no_figure():
    found = dict(cpu_info(), caches=[])  # a machine whose L2 the probe could not read
    target = target_for("cpu", found, print)
    rows = [measure_point("cpu", "float32", [64] * 3, target, BENCH, found)]
    record = steps.measure_steps(target, found, rows, BENCH)
    assert record["reason"] == "no square fits in this CPU's L2 (the probe read no L2 size)"
    assert cpu_steps(record).every_thread is None
    none = steps.measure_steps(target, found, [], BENCH)
    assert none["reason"] == "no float32 headline was measured to break down"


@pytest.mark.parametrize(
    ("shares", "said"),
    [
        ({"every_thread": [0.99, 0.98, 1.0], "one_thread": [1.04, 1.05, 1.04]}, ""),
        (
            {"every_thread": [0.99, 0.61, 0.98], "one_thread": [1.0, 0.72, 1.0]},
            "the process had 61% of its threads' CPU in a round of every thread",
        ),
    ],
)
def test_a_round_that_shared_the_cores_makes_the_sides_shared(shares, said):
    assert shared_sides(shares) == said


def test_a_hybrid_laptops_threading_step_says_its_e_cores_are_part_of_it():
    from roofline.interpretation.steps import GapShare, Step, StepId
    from roofline.rendering.causes import loss_sentence
    from tests.manifests import entry

    e_cores = {"name": "E-cores", "cores": 8, "logical_cores": 8, "efficiency": True}
    p_cores = {"name": "P-cores", "cores": 4, "logical_cores": 8, "efficiency": False}
    sides = {"backend": "torch", "threads": 16, "shape": [4096] * 3, "in_l2": [192] * 3}
    threading = GapShare(Step(StepId.THREADS, 0.3, "", factor=0.55), 0.4)
    laptop = entry(kind="cpu", steps=sides, details={"core_types": [p_cores, e_cores]})
    assert loss_sentence(threading, laptop) == (
        "On 16 threads torch reaches 55% of 16x its one-thread rate at 4096x4096x4096: "
        "threading costs 40% of the gap (part of it: its E-cores are slower cores)."
    )
    plain = entry(kind="cpu", steps=sides)
    assert loss_sentence(threading, plain).endswith("threading costs 40% of the gap.")


def test_one_loss_that_is_all_of_the_gap_is_not_said_twice(monkeypatch):
    # "its micro-kernel costs all of the gap; the measured steps explain all of the gap."
    from types import SimpleNamespace

    from roofline.interpretation.gaps import GapAccount
    from roofline.interpretation.steps import GapShare, Step, StepId
    from roofline.rendering import causes
    from tests.manifests import entry

    sides = {"backend": "numpy", "threads": 2, "shape": [4096] * 3, "in_l2": [192] * 3}
    micro = GapShare(Step(StepId.MICRO_KERNEL, 0.2, "", factor=0.48), 1.02)
    clock = GapShare(Step(StepId.CLOCK, 0.4, "the clock", factor=0.9), 0.3)
    cpu = entry(kind="cpu", steps=sides)
    head = SimpleNamespace(peak_tflops=0.5)
    monkeypatch.setattr(causes, "noisy", lambda head: False)

    def said(losses: list, explained: float) -> list[str]:
        account = GapAccount(losses, explained, [], "", losses)
        monkeypatch.setattr(causes, "gap_account", lambda *args: account)
        return causes.cause_sentences("cpu", cpu, None, head, None)[0]

    assert said([micro], 1.0) == [
        "On one core, its operands in L2, numpy reaches 48% of the core's FMA rate: its "
        "micro-kernel costs all of the gap."
    ]
    two = said([micro, clock], 1.0)  # two losses: what they explain together is said
    assert two[-1].endswith("; the measured steps explain all of the gap.")
