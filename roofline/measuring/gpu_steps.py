"""A GPU's gap breakdown, measured in every run at the lab's own kernel. Random inputs against
constant ones (ones: bits that never toggle) show what the data's power costs a power-limited
GPU; the same random calls replayed from a CUDA graph show what launching them costs. The three
sides run interleaved round by round, each side's SM clock and power read; every sample is kept.

Needs torch only (nvidia-ml-py or amdsmi for the telemetry), as the GPU suite's image has."""

from __future__ import annotations

import functools

from roofline.core import arithmetic as ar
from roofline.core.dtypes import LAB_DTYPE
from roofline.core.measurement import GpuStepSides, Measurement
from roofline.device.telemetry import window_telemetry
from roofline.device.timing import BenchSettings
from roofline.measuring.knob_sides import Settings, Side, in_process, matmul
from roofline.measuring.matmul import Prepared, WrongResult, float32_math
from roofline.measuring.measure import CALL_ERRORS, Target, headline_point, raised

ROUNDS = 3
GPU_SIDES = ("random", "constant", "graph")
# Operand sets the sides rotate over at most: the lab's 8192^3 float16 needs 1 or 2 to miss L2,
# and a graph replays them all at once (a tiny shape's thousands would be minutes a replay).
MAX_SETS = 16


def side_record(
    head: Measurement | None,
    gpu: int,
    reason: str = "",
    samples: dict[str, list[list[float]]] | None = None,
    clocks: dict[str, list[float]] | None = None,
    powers: dict[str, list[float]] | None = None,
    unmeasured: dict[str, str] | None = None,
) -> GpuStepSides:
    """The sides as the record keeps them; without samples, not measured, and `reason` why."""
    record: GpuStepSides = {
        "backend": head.backend if head else "",
        "dtype": head.dtype if head else "",
        "shape": [head.m, head.n, head.k] if head else [],
        "gpu": gpu,
        "sides_s": samples or {},
        "sm_clock_mhz": clocks or {},
        "power_w": powers or {},
        "unmeasured": unmeasured or {},
    }
    if reason:
        record["reason"] = reason
    return record


def measure_gpu_steps(
    target: Target, rows: list[Measurement], bench: BenchSettings
) -> GpuStepSides:
    """The lab kernel's three sides (random, constant, replayed from a graph), interleaved, each
    round's SM clock and power kept; not measured, with the reason, where there is no headline,
    or a side's product is wrong or refused. A graph that cannot be captured leaves the data's
    pair measured, and says why in `unmeasured`."""
    dtype = LAB_DTYPE[target.kind.name]
    head = headline_point(rows, dtype)
    gpu = getattr(target.kind, "index", 0)  # torch's index of the GPU the sides ran on
    if head is None:
        return side_record(head, gpu, f"no {dtype} headline was measured to break down")
    s = Settings(bench, ROUNDS)
    timer, monitor = target.kind.timer(), target.monitor
    around = functools.partial(float32_math, dtype)
    shape, unmeasured = [head.m, head.n, head.k], {}

    sets = min(MAX_SETS, ar.buffer_sets(ar.matmul_bytes(*shape, dtype), target.cache_bytes or 0))

    def prepared(**options: object) -> Prepared:
        with around():  # checked as it is timed: under the same math mode
            return matmul(target, dtype, shape, s, backend=head.backend, sets=sets, **options)

    def side(label: str, made: Prepared, per_call: int = 1) -> Side:
        return in_process(label, made, timer, s, around, per_call=per_call, monitor=monitor)

    try:
        random = prepared()
        sides = {
            "random": side("random", random),
            "constant": side("constant", prepared(constant=True)),
        }
        try:  # the random side's own calls, captured once and replayed
            replay = target.kind.graph(random.call, random.sets)
            made = Prepared(replay, random.check_error, 1)
            sides["graph"] = side("CUDA graph", made, per_call=random.sets)
        except CALL_ERRORS as err:
            unmeasured["graph"] = f"no CUDA graph: {raised(err)}"
        samples: dict[str, list[list[float]]] = {key: [] for key in sides}
        for round_ in range(ROUNDS):
            for key, timed in sides.items():
                samples[key].append(timed.measure(bench.min_seconds / ROUNDS, round_ == 0))
    except WrongResult as err:
        return side_record(head, gpu, f"wrong result, not timed: {err}")
    except CALL_ERRORS as err:
        return side_record(head, gpu, f"the call raised: {raised(err)}")
    clocks, powers = {}, {}
    for key, timed in sides.items():
        read = [window_telemetry(w, None) for w in timed.windows]
        if all(t.sm_clock_mhz is not None for t in read) and read:
            clocks[key] = [t.sm_clock_mhz for t in read]
        if all(t.power_w is not None for t in read) and read:
            powers[key] = [t.power_w for t in read]
    return side_record(head, gpu, "", samples, clocks, powers, unmeasured)


def describe_gpu_steps(steps: GpuStepSides) -> str:
    """The sides in one line: each side's rate, SM clock and power, the two ratios the breakdown
    reads (random / constant, eager / graph), or why a side was not measured."""
    if steps.get("reason"):
        return f"not measured: {steps['reason']}"
    flops = ar.matmul_flops(*steps["shape"])
    rates, said = {}, []
    for side, rounds in steps["sides_s"].items():
        rates[side] = ar.rounds_tflops(flops, rounds)
        read = [
            f"{sum(v) / len(v):.0f} {unit}"
            for v, unit in (
                (steps["sm_clock_mhz"].get(side), "MHz"),
                (steps["power_w"].get(side), "W"),
            )
            if v
        ]
        said.append(f"{side} {rates[side]:.4g} TFLOP/s" + (f" ({', '.join(read)})" if read else ""))
    said += [f"{side} not measured: {why}" for side, why in steps["unmeasured"].items()]
    ratios = [
        f"{a} / {b} {rates[a] / rates[b]:.3f}x"
        for a, b in (("random", "constant"), ("random", "graph"))
        if a in rates and b in rates
    ]
    shape = "x".join(map(str, steps["shape"]))
    return f"{steps['dtype']} at {shape}: " + "; ".join(said + ratios)
