"""The lab's lesson, measured: "gaps are normal and tell you which knob to turn". Each knob is
a pair of ways to run one matmul, a baseline and a variant, both checked against float64 first
and timed in the same run, interleaved round by round (so drift hits both alike); its gain is
variant / baseline TFLOP/s. A knob a device cannot turn is skipped with the reason.

Both: random inputs -> constant ones (the data's own power; a GPU's clock and power each side).
CPU: the textbook loop -> BLAS; 1 thread -> every core; one thread at the knobs' shape -> at
one whose operands fit the core's L2 (the micro-kernel apart from packing and memory); torch's
BLAS -> numpy's; float32 -> bfloat16; oneDNN capped below its best instructions -> uncapped.
GPU: float32 -> tf32 -> float16 -> float8; float8's accumulation exact -> fast; cuBLASLt's
heuristic -> TunableOp's search; eager calls -> one CUDA graph (a short call); operands
rotated -> resident in L2 (why a benchmark must rotate them)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypedDict, cast

import torch

from roofline.configuration.params import RENTED_KINDS
from roofline.core import arithmetic as ar
from roofline.core.dtypes import float8_for
from roofline.core.errors import RooflineError
from roofline.core.measurement import (
    DATA_POWER_KNOB,
    MICRO_KERNEL_KNOB,
    THREADS_KNOB,
    KnobMeasurement,
)
from roofline.device.description import CpuInfo, Found, GpuInfo
from roofline.device.kinds import Unavailable
from roofline.device.peakflops import naive_matmul
from roofline.device.telemetry import window_telemetry
from roofline.device.timing import BenchSettings, Timer
from roofline.measuring.knob_sides import (
    Knob,
    Settings,
    Side,
    in_process,
    matmul,
    threads,
)
from roofline.measuring.matmul import (
    Prepared,
    WrongResult,
    float32_math,
    unsupported_reason,
)
from roofline.measuring.measure import CALL_ERRORS, Target, native_cpu_dtypes, raised


def cpu_knobs(target: Target, found: CpuInfo, config: Any, s: Settings) -> list[Knob]:
    shape, small = list(config.shape), list(config.naive_shape)
    cores, timer = found["logical_cores"], target.kind.timer()
    native = native_cpu_dtypes(set(found["isa"]))

    def side(label: str, dtype: str, size: list[int], **options: Any) -> Side:
        around = options.pop("around", contextlib.nullcontext)
        return in_process(label, matmul(target, dtype, size, s, **options), timer, s, around)

    def naive() -> tuple[Side, Side]:
        loop = naive_matmul()
        if loop is None:
            raise Unavailable("no C compiler (cc, gcc or clang) here to compile the textbook loop")
        return (
            side("textbook loop (C, -O2)", "float32", small, backend=loop),
            side("torch.matmul (BLAS)", "float32", small),
        )

    def all_cores() -> tuple[Side, Side]:
        if cores < 2:
            raise Unavailable("this machine has one core")
        return (
            side("1 thread", "float32", shape, around=lambda: threads(1)),
            side(f"{cores} threads", "float32", shape, around=lambda: threads(cores)),
        )

    l2 = next((c["size_bytes"] for c in found.get("caches", []) if c["level"] == "L2"), None)
    square = ar.square_in(l2) if l2 else 0  # one thread has the whole L2, whatever shares it
    in_l2 = [square] * 3 if square else None

    def micro_kernel() -> tuple[Side, Side]:
        if in_l2 is None:
            known = "the probe read no cache sizes" if l2 is None else f"{l2:,} bytes: too small"
            raise Unavailable(f"no square fits in this CPU's L2 ({known})")
        at = "x".join(map(str, in_l2))
        if ar.matmul_flops(*shape) <= ar.matmul_flops(*in_l2):
            raise Unavailable(f"the knobs' shape is no larger than {at}, the square in L2")
        one = functools.partial(threads, 1)
        return (
            side(f"1 thread at {'x'.join(map(str, shape))}", "float32", shape, around=one),
            side(f"1 thread at {at}", "float32", in_l2, around=one),
        )

    def data() -> tuple[Side, Side]:
        return side("random inputs", "float32", shape), side(
            "constant inputs (ones)", "float32", shape, constant=True
        )

    def library() -> tuple[Side, Side]:
        return side("torch", "float32", shape), side("numpy", "float32", shape, backend="numpy")

    def bfloat16() -> tuple[Side, Side]:
        if "bfloat16" not in native:
            raise Unavailable(unsupported_reason("bfloat16", "cpu", native))
        return side("float32", "float32", shape), side("bfloat16", "bfloat16", shape)

    def isa_cap() -> tuple[Side, Side]:
        flags = set(found["isa"])
        if "amx_bf16" in flags:
            below, best = "AVX512_CORE_BF16", "AMX"
        elif "avx512_bf16" in flags:
            below, best = "AVX512_CORE", "AVX512-BF16"
        else:  # a lower cap drops bfloat16 into a slow loop, not onto other instructions
            raise Unavailable("no bfloat16 instructions here for oneDNN's cap to take away")
        return (
            capped_side(f"capped at {below}", below, shape, s),
            capped_side(f"uncapped ({best})", None, shape, s),
        )

    return [
        Knob("naive -> BLAS", "textbook loop", "BLAS", "float32", small, True, naive),
        Knob(THREADS_KNOB, "1 thread", "every core", "float32", shape, True, all_cores),
        Knob(
            MICRO_KERNEL_KNOB,
            "the shape",
            "a square in L2",
            "float32",
            shape,
            None,
            micro_kernel,
            in_l2,
        ),
        Knob(DATA_POWER_KNOB, "random", "constant", "float32", shape, None, data),
        Knob("BLAS library", "torch", "numpy", "float32", shape, True, library),
        Knob("float32 -> bfloat16", "float32", "bfloat16", "bfloat16", shape, False, bfloat16),
        Knob("oneDNN instruction set", "capped", "uncapped", "bfloat16", shape, True, isa_cap),
    ]


@dataclass
class GpuKnobs:
    """The GPU's knobs, each a method giving its two sides, on this GPU with these settings."""

    target: Target
    found: GpuInfo
    s: Settings
    tuning: Path  # TunableOp's results file
    shape: list[int]  # the lab's shape
    small: list[int]  # a call short enough that launching it costs
    l2: list[int]  # a memory-bound shape whose operands fit in L2

    @functools.cached_property
    def timer(self) -> Timer:  # one for every side, as the stage's other timings
        return self.target.kind.timer()

    @property
    def fp8(self) -> str:
        return float8_for(self.found.get("architecture"))  # fnuz on MI300 (gfx94x), else OCP's

    def side(self, label: str, dtype: str, size: list[int], **options: Any) -> Side:
        around = options.pop("around", lambda: float32_math(dtype))
        monitor = options.pop("monitor", None)
        with around():  # checked as it is timed: under the same switch
            prepared = matmul(self.target, dtype, size, self.s, **options)
        return in_process(label, prepared, self.timer, self.s, around, monitor=monitor)

    def data(self) -> tuple[Side, Side]:
        """The lab's kernel on random inputs and on constant ones, each side's clock and power
        read over its rounds: what the data's own power does to a power-limited GPU."""
        self.needs("float16", self.shape)
        watched = {"monitor": self.target.monitor}
        return (
            self.side("random inputs", "float16", self.shape, **watched),
            self.side("constant inputs (ones)", "float16", self.shape, constant=True, **watched),
        )

    def timed(self, label: str, prepared: Prepared, per_call: int = 1) -> Side:
        return in_process(label, prepared, self.timer, self.s, per_call=per_call)

    def needs(self, dtype: str, size: list[int]) -> None:
        architecture = self.found.get("architecture")  # an AMD GPU's (ROCm); None on NVIDIA
        gpu = "rocm" if architecture else "cuda"  # the kind of GPU its description is
        capability = self.found.get("compute_capability")
        reason = unsupported_reason(dtype, gpu, None, capability, size, architecture)
        if reason:
            raise Unavailable(reason)

    def ladder(self, low: str, high: str) -> Callable[[], tuple[Side, Side]]:
        def sides() -> tuple[Side, Side]:
            self.needs(low, self.shape)
            self.needs(high, self.shape)
            return self.side(low, low, self.shape), self.side(high, high, self.shape)

        return sides

    def fast_accumulation(self) -> tuple[Side, Side]:
        self.needs(self.fp8, self.shape)
        exact = self.side("exact", self.fp8, self.shape)
        return exact, self.side("fast", self.fp8, self.shape, fast_accum=True)

    def tunable_op(self) -> tuple[Side, Side]:
        kind = self.target.kind
        offered, which = kind.tunable_offers()
        if offered == 1:
            # Both sides would be the same kernel, and a ~1.0x would read as a knob that does
            # nothing; torch before 2.15 offered cuBLAS's own call only on CUDA.
            raise Unavailable(
                f"TunableOp offers 1 solution on this build ({which}): nothing to tune"
            )
        heuristic = self.side(
            f"{kind.blas}'s heuristic",
            "float16",
            self.shape,
            around=lambda: kind.tunable(False, self.tuning),
        )
        picked = len(kind.tuned_solutions())
        tuned = self.side(
            "TunableOp's search",
            "float16",
            self.shape,
            around=lambda: kind.tunable(True, self.tuning),
        )
        # What its search of this shape picked (float64's product check is tuned too).
        won = [name for op, name in kind.tuned_solutions()[picked:] if "_Half_" in op]
        won = ", ".join(won) or "what it had found before"
        tuned.label = f"TunableOp's search of {which}, which picked {won}"
        return heuristic, tuned

    def graph(self) -> tuple[Side, Side]:
        eager = matmul(self.target, "float16", self.small, self.s)
        replay = Prepared(self.target.kind.graph(eager.call, eager.sets), eager.check_error, 1)
        return self.timed("eager", eager), self.timed("CUDA graph", replay, per_call=eager.sets)

    def residency(self) -> tuple[Side, Side]:
        # A memory-bound shape whose operands fit in L2: rotated over sets that do not, its
        # operands come from memory; one set stays in L2. Both sides replayed from CUDA graphs
        # of the same number of calls, so launch cost is in neither.
        cache = self.target.cache_bytes
        needs_l2 = ar.matmul_bytes(*self.l2, "float16")
        if not cache or 2 * needs_l2 > cache:
            raise Unavailable(
                f"{self.l2} in float16 ({needs_l2 / 2**20:.1f} MiB) does not fit twice in this "
                f"GPU's L2 ({(cache or 0) / 2**20:.0f} MiB)"
            )
        rotated = matmul(self.target, "float16", self.l2, self.s)
        resident = matmul(self.target, "float16", self.l2, self.s, sets=1)
        calls, graph = rotated.sets, self.target.kind.graph
        return (
            self.timed(
                f"rotated over {calls} sets",
                Prepared(graph(rotated.call, calls), rotated.check_error, 1),
                per_call=calls,
            ),
            self.timed(
                "resident in L2",
                Prepared(graph(resident.call, calls), resident.check_error, 1),
                per_call=calls,
            ),
        )

    def knobs(self) -> list[Knob]:
        shape, fp8, blas = self.shape, self.fp8, self.target.kind.blas
        return [
            Knob(
                "float32 -> tf32",
                "float32",
                "tf32",
                "tf32",
                shape,
                True,
                self.ladder("float32", "tf32"),
            ),
            Knob(
                "tf32 -> float16",
                "tf32",
                "float16",
                "float16",
                shape,
                True,
                self.ladder("tf32", "float16"),
            ),
            Knob(
                "float16 -> float8", "float16", fp8, fp8, shape, False, self.ladder("float16", fp8)
            ),
            Knob(
                "float8 fast accumulation",
                "exact",
                "fast",
                fp8,
                shape,
                False,
                self.fast_accumulation,
            ),
            # The GPU's own BLAS: cuBLASLt, or hipBLASLt on ROCm.
            Knob(
                f"{blas} -> TunableOp",
                "heuristic",
                "TunableOp",
                "float16",
                shape,
                False,
                self.tunable_op,
            ),
            Knob(DATA_POWER_KNOB, "random", "constant", "float16", shape, None, self.data),
            Knob(
                "eager -> CUDA graph",
                "eager",
                "CUDA graph",
                "float16",
                self.small,
                None,
                self.graph,
            ),
            Knob(
                "rotated -> L2-resident",
                "rotated",
                "resident",
                "float16",
                self.l2,
                None,
                self.residency,
            ),
        ]


def gpu_knobs(target: Target, found: GpuInfo, config: Any, s: Settings, tuning: Path) -> list[Knob]:
    shapes = (list(config.shape), list(config.small_shape), list(config.l2_shape))
    return GpuKnobs(target, found, s, tuning, *shapes).knobs()


def measure_knob(name: str, knob: Knob, s: Settings) -> KnobMeasurement:
    """Both sides of a knob, interleaved round by round; skipped or failed with the reason."""
    m, n, k = knob.shape
    point = KnobMeasurement(
        name, knob.name, knob.baseline, knob.variant, knob.dtype, m, n, k, "measured"
    )
    point.lab_turns, point.variant_shape = knob.lab_turns, knob.variant_shape
    try:
        baseline, variant = knob.sides()
        point.baseline, point.variant = baseline.label, variant.label
        point.baseline_check_error = baseline.check_error
        point.variant_check_error = variant.check_error
        seconds = s.bench.min_seconds / s.rounds
        for round_ in range(s.rounds):
            point.baseline_samples_s += baseline.measure(seconds, round_ == 0)
            point.variant_samples_s += variant.measure(seconds, round_ == 0)
        point.baseline_sm_clock_mhz, point.baseline_power_w = side_telemetry(baseline)
        point.variant_sm_clock_mhz, point.variant_power_w = side_telemetry(variant)
    except Unavailable as why:
        point.status, point.reason = "skipped", str(why)
    except WrongResult as err:
        point.status, point.reason = "failed", f"wrong result, not timed: {err}"
    except (torch.OutOfMemoryError, RooflineError):
        raise  # the stage's to report, with what it kept
    except CALL_ERRORS as err:  # one knob's library refusing ends that knob, not the ladder
        point.status, point.reason = "failed", f"the call raised: {raised(err)}"
    if point.status != "measured":  # a knob not measured carries no samples
        point.baseline_samples_s, point.variant_samples_s = [], []
    return point


def side_telemetry(side: Side) -> tuple[float | None, float | None]:
    """A side's mean SM clock and power over its rounds' windows; None where none was read."""
    summaries = [window_telemetry(w, None) for w in side.windows]
    clocks = [t.sm_clock_mhz for t in summaries if t.sm_clock_mhz is not None]
    powers = [t.power_w for t in summaries if t.power_w is not None]
    return (
        sum(clocks) / len(clocks) if clocks else None,
        sum(powers) / len(powers) if powers else None,
    )


def knobs_for(target: Target, found: Found, config: Any, s: Settings, tuning: Path) -> list[Knob]:
    """The knobs of the device `target` is (`found`: its part of the description, that kind's)."""
    if target.kind.name == "cpu":
        return cpu_knobs(target, cast(CpuInfo, found), config.cpu, s)
    if target.kind.name in RENTED_KINDS:  # ROCm keeps torch.cuda's API: the same knobs
        return gpu_knobs(target, cast(GpuInfo, found), config.cuda, s, tuning)
    return []


def measure_knobs(
    name: str,
    target: Target,
    found: Found,
    config: Any,
    s: Settings,
    log: Callable[[str], None] = print,
) -> tuple[list[dict[str, Any]], str | None]:
    """Every knob of this device, as rows (asdict() of each KnobMeasurement, as a record keeps
    them); and TunableOp's results file, kept as text."""
    with tempfile.TemporaryDirectory() as tmp:
        tuning = Path(tmp, "tunableop_results.csv")
        rows = []
        for knob in knobs_for(target, found, config, s, tuning):
            rows.append(measure_knob(name, knob, s))
            log(describe(rows[-1]))
        kept = tuning.read_text(encoding="utf-8") if tuning.exists() else None
    return [asdict(row) for row in rows], kept


def describe(point: KnobMeasurement) -> str:
    if point.status != "measured":
        return f"{point.device} knob {point.knob}: {point.status}: {point.reason}"
    flops = ar.matmul_flops(point.m, point.n, point.k)
    base = ar.tflops(flops, ar.summarize(point.baseline_samples_s)["median_s"])
    var_flops = ar.matmul_flops(*point.variant_shape) if point.variant_shape else flops
    var = ar.tflops(var_flops, ar.summarize(point.variant_samples_s)["median_s"])
    return (
        f"{point.device} knob {point.knob}: {point.baseline} -> {point.variant}: {var / base:.3g}x"
    )


class CappedAnswer(TypedDict):
    """What a capped process prints (roofline.measuring.capped), as JSON."""

    check_error: float | None  # the product's, against float64; None where it was wrong
    samples: list[float]  # per call; none for a window of 0 s (checked only)
    error: str | None  # why the product was wrong (WrongResult), or None


def capped_side(label: str, isa: str | None, shape: list[int], s: Settings) -> Side:
    """bfloat16 through oneDNN in a process of its own, its instruction set capped at `isa`
    (None: uncapped): oneDNN reads ONEDNN_MAX_CPU_ISA once, when torch loads. The process
    checks the product first; each round is a process timing it."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
    }
    if isa:
        env["ONEDNN_MAX_CPU_ISA"] = isa

    def run(window: BenchSettings) -> CappedAnswer:
        options = json.dumps([shape, s.threads, asdict(window)])
        args = [sys.executable, "-m", "roofline.measuring.capped", options]
        done = subprocess.run(args, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise Unavailable(f"oneDNN capped at {isa} did not run: {done.stderr.strip()[-300:]}")
        return json.loads(done.stdout)

    def measure(seconds: float, first: bool) -> list[float]:
        # Each round a fresh process: the bench's warm-up count every round, none by time.
        return run(replace(s.bench, repeats=1, min_seconds=seconds, warmup_seconds=0.0))["samples"]

    checked = run(replace(s.bench, min_seconds=0.0))  # a window of 0 s: checked, not timed
    if checked["error"]:
        raise WrongResult(checked["error"])
    return Side(label, cast(float, checked["check_error"]), measure)  # checked: a number
