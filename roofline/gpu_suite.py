"""The short GPU suite behind scripts/gpu-check: on each GPU here (NVIDIA's, or AMD's through
ROCm's torch), every GPU dtype at 8192^3 (one float8: the one its architecture takes), the copy
ceiling and NVML (or amdsmi) telemetry, printed as a table; the harness's float16 figure beside
triton's do_bench and a bare loop between two events (the timing checking itself); then the
lab's GPU knobs as a ladder of gains; written as JSON. Each dtype's row names the kernel that
ran (cuBLAS's, from torch's profiler), which only a real GPU can say.

It needs torch, numpy, nvidia-ml-py and PyYAML only (no dvc, hydra or omegaconf), so it runs under a
GPU image's own Python, and it measures with the same functions as the pipeline's benchmark.

    python -m roofline.gpu_suite [--out FILE] [--size N] [--min-seconds S] [--no-knobs]
                                 [--knob-seconds S]
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal, Required, TypedDict, cast

import yaml

from roofline.configuration.params import RENTED_KINDS
from roofline.core import arithmetic as ar
from roofline.core.dtypes import DTYPES, NAMES, float8_for
from roofline.core.errors import HardwareError, run
from roofline.core.measurement import KnobMeasurement
from roofline.device.description import GpuInfo
from roofline.device.hardware import gpu_info
from roofline.device.timing import BenchSettings
from roofline.interpretation import kernel_names
from roofline.interpretation.datasheets import judged
from roofline.interpretation.interpret import (
    assumed_clock_mhz,
    interpret,
    lab_checks,
    tensor_tflops,
)
from roofline.interpretation.rows import knob_row, row
from roofline.machines.identity import find_gpu, identity
from roofline.measuring.gpu_steps import describe_gpu_steps, measure_gpu_steps
from roofline.measuring.knobs import Settings, measure_knobs
from roofline.measuring.matmul import prepare_matmul
from roofline.measuring.measure import (
    CALL_ERRORS,
    Target,
    describe,
    gpu_target,
    measure_memory_ceiling,
    measure_point,
    name_kernels,
    raised,
)

if TYPE_CHECKING:
    from roofline.configuration.params import DeviceParams
    from roofline.interpretation.interpret import JudgedDevice

SUITE_DTYPES = NAMES  # every dtype of the registry runs on a GPU...


def suite_dtypes(gpu: GpuInfo) -> list[str]:
    """...of one float8 each: the one this GPU's architecture takes (fnuz on AMD's gfx94x)."""
    fp8 = float8_for(gpu.get("architecture"))
    return [name for name in SUITE_DTYPES if not DTYPES[name].scaled or name == fp8]


def device_files(conf: Path = Path("conf/device")) -> dict[str, DeviceParams]:
    """conf/device/<name>.yaml as plain dicts: each a device's entry in params.yaml, as written
    (unchecked here: its schema is omegaconf's, roofline.interpretation.lab_config)."""
    return {
        path.stem: yaml.safe_load(path.read_text(encoding="utf-8"))
        for path in sorted(conf.glob("*.yaml"))
    }


def match(gpu: GpuInfo, devices: dict[str, DeviceParams]) -> tuple[str, JudgedDevice]:
    """(the device that recognises this GPU, judged against the datasheet of its name)."""
    for name, dev in devices.items():
        if dev.get("kind") in RENTED_KINDS and find_gpu(dev, [gpu]):
            sheet = judged(name, dev, gpu["name"])
            if sheet["missing"]:
                print(f"note: {sheet['missing']}")
            return name, sheet
    print(
        f"note: {gpu['name']!r} matches no conf/device/*.yaml: MFU is left blank "
        "(docs/configuration.md: adding a device)"
    )
    kind = "rocm" if gpu.get("architecture") else "cuda"
    unknown = cast("DeviceParams", {"kind": kind, "recognise": {}})  # no conf: no datasheet
    return gpu["name"], judged(gpu["name"], unknown, gpu["name"])


def cell(value: Any, fmt: str) -> str:
    return "-" if value is None or value == "" else format(value, fmt)


def table(rows: list[dict[str, Any]], peak_clock_mhz: float | None = None) -> str:
    """Every figure a GPU run produces, a line per dtype: rate, MFU, how it was timed, clocks
    (the window's mean / the datasheet peak's / NVML's maximum), power and energy from the
    window, temperature, clock limits, other processes and failed reads."""
    head = (
        f"{'dtype':<14}{'TFLOP/s':>9}{'spread':>8}{'MFU':>7}  {'SM MHz mean/sheet/max':<22}"
        f"{'W':>5}{'J/TFLOP':>8}{'C':>4}  timing | clock limits | other processes | NVML errors"
    )
    lines = [head]
    for r in rows:
        if r["status"] != "measured":
            lines.append(f"{r['dtype']:<14}{r['status']}: {r['reason']}")
            continue
        sheet = assumed_clock_mhz(r["dtype"], peak_clock_mhz, r["sm_clock_max_mhz"])
        clocks = "/".join(cell(v, ".0f") for v in (r["sm_clock_mhz"], sheet, r["sm_clock_max_mhz"]))
        lines.append(
            f"{r['dtype']:<14}{r['achieved_tflops']:>9.1f}{r['spread']:>8.1%}"
            f"{cell(r['mfu'], '.1%'):>7}  {clocks:<22}{cell(r['power_w'], '.0f'):>5}"
            f"{cell(r['joules_per_tflop'], '.2f'):>8}{cell(r['temperature_max_c'], '.0f'):>4}  "
            f"{r['timing']} | {r['throttle_reasons'] or '-'} | {r['other_processes'] or '-'} | "
            f"{r['telemetry_errors'] or '-'}"
        )
    return "\n".join(lines)


def run_gpu(
    gpu: GpuInfo,
    devices: dict[str, DeviceParams],
    size: int,
    bench: BenchSettings,
    knobs: bool,
    knob_seconds: float | None = None,
) -> dict:
    name, dev = match(gpu, devices)
    mig = f", a MIG slice of {gpu['mig_parent']}" if gpu.get("mig_parent") else ""
    stack = (
        f"{gpu['architecture']}, {gpu['sm_count']} CUs, driver {gpu.get('driver')}, "
        f"ROCm (HIP {gpu.get('hip')}), hipBLASLt"
        if gpu.get("architecture")  # an AMD GPU through ROCm's torch
        else f"sm_{gpu['compute_capability']}, {gpu['sm_count']} SMs, driver "
        f"{gpu.get('driver')}, CUDA {gpu.get('cuda')}, cuBLASLt {gpu.get('cublaslt')}"
    )
    print(
        f"\n{gpu['name']}: recognised as {name} ({dev['sku']}){mig}; {stack}, power limit "
        f"{gpu.get('power_limit_w')} W",
        flush=True,
    )
    for library, key in (("NVML", "nvml_error"), ("amdsmi", "smi_error")):
        if gpu.get(key):
            print(f"{library}: {gpu[key]}")
    target = gpu_target(gpu, print)
    points, later = [], []  # `later`: the kernels to name once every window is timed
    for dtype in suite_dtypes(gpu):
        point = measure_point(name, dtype, [size] * 3, target, bench, gpu, log=print, later=later)
        points.append(point)
        mfu = row(point, dev["peak_tflops"].get(dtype)).mfu
        print(describe(point) + (f", MFU {mfu:.1%}" if mfu else ""), flush=True)
    copy = measure_memory_ceiling(target, bench, bench.copy_mib << 20)
    copy_tbps = copy["gbps"] / 1e3
    head = next((p for p in points if p.dtype == "float16" and p.status == "measured"), None)
    median_s = ar.summarize(head.samples_s)["median_s"] if head else None
    timing = timing_check(target, size, bench, median_s)
    # The breakdown's sides, as every pipeline run measures them: the data's power, launches.
    steps = measure_gpu_steps(target, points, bench)
    print(f"breakdown sides: {describe_gpu_steps(steps)}", flush=True)
    knob_rows = run_knobs(name, target, gpu, bench, size, knob_seconds) if knobs else []
    name_kernels(later)  # the profiler stays subscribed after: no window is timed past here
    rows = interpret(points, dev, {})
    fp16 = next((r for r in rows if r.dtype == "float16" and r.status == "measured"), None)
    checks = (
        lab_checks(
            dev["lab_band_tflops"].get("float16"),
            dev["lab_done_tflops"].get("float16"),
            fp16,
        )
        if fp16
        else []
    )
    rows = [asdict(r) for r in rows]
    print(
        f"\n{table(rows, dev['peak_clock_mhz'])}\n"
        "float8 rows use exact accumulation (use_fast_accum=False); the knobs measure fast.\n"
        f"copy {bench.copy_mib} MiB device-to-device: {copy_tbps:.2f} TB/s (read + write, median, "
        "spread "
        f"{copy['spread']:.1%})"
    )
    print(kernels_ran(rows), flush=True)
    print(counters_agree(rows, dev["peak_tflops"], dev["peak_clock_mhz"]), flush=True)
    for line in checks:
        print(f"lab check: {line}")
    return {
        "device": name,
        "gpu": gpu,
        "hardware": identity("rocm" if gpu.get("architecture") else "cuda", gpu),
        "rows": rows,
        "copy": {**copy, "tbps": copy_tbps},
        "lab_checks": checks,
        "timing_check": timing,
        "gpu_steps": steps,
        "knobs": knob_rows,
    }


# The tensor-active figure and the measured rate agree within this: GPM counts what the
# measured rate says, or one of the two misreads the window.
AGREE = 0.10


def counters_agree(rows: list[dict[str, Any]], peaks: dict, peak_clock_mhz: float | None) -> str:
    """Per measured dtype, what the GPU's own counters (NVML GPM) say against the measured
    rate: the tensor pipes' active share x the window's clock x the datasheet's rate a clock,
    beside the achieved TFLOP/s, and whether they agree; or why the counters were not read."""
    lines = ["the GPU's own counters over each window (NVML GPM):"]
    for r in rows:
        if r["status"] != "measured":
            continue
        active, clock = r.get("gpm_tensor_active_pct"), r["sm_clock_mhz"]
        sheet = assumed_clock_mhz(r["dtype"], peak_clock_mhz, r["sm_clock_max_mhz"])
        if active is None or clock is None or not sheet or r["dtype"] not in peaks:
            why = r.get("counter_errors") or "no tensor-active figure, clock or datasheet peak"
            lines.append(f"  {r['dtype']:<14}not compared: {why}")
            continue
        if active == 0:  # float32 at "highest" precision: cuBLAS's SIMT kernel, no tensor core
            lines.append(
                f"  {r['dtype']:<14}tensor pipes idle (0.0%): it ran on the CUDA cores, so there "
                "is no tensor-core rate to compare with"
            )
            continue
        expected = tensor_tflops(active, clock, peaks[r["dtype"]], sheet)
        share = r["achieved_tflops"] / expected
        verdict = "agree" if abs(share - 1) <= AGREE else f"disagree (more than {AGREE:.0%} apart)"
        lines.append(
            f"  {r['dtype']:<14}tensor pipes active {active:.1f}% at {clock:.0f} MHz: "
            f"{expected:.1f} TFLOP/s at the datasheet's rate a clock; measured "
            f"{r['achieved_tflops']:.1f} ({share:.0%}): {verdict}"
        )
    return "\n".join(lines)


def kernels_ran(rows: list[dict[str, Any]]) -> str:
    """The kernel each measured dtype ran, from torch's profiler, and what its name says."""
    lines = ["kernel that ran, per dtype (torch's profiler; '-': not learnt, said above):"]
    for r in rows:
        if r["status"] != "measured":
            continue
        said = kernel_names.parse(r["kernel"]).summary() if r["kernel"] else ""
        lines.append(f"  {r['dtype']:<14}{r['kernel'] or '-'}" + (f"  ({said})" if said else ""))
    return "\n".join(lines)


def do_bench_seconds(call: Any) -> float | str:
    """The median seconds of `call` through triton's do_bench (L2 flushed between calls), or
    why it could not run here."""
    try:
        from triton.testing import do_bench
    except ImportError as err:
        return f"absent (triton is not importable: {err})"
    try:
        return do_bench(call, warmup=100, rep=1000, return_mode="median") / 1e3
    except Exception as err:  # no triton driver for this GPU (or no GPU: the stand-in)
        return f"absent (do_bench could not run here: {raised(err)})"


class TimingCheck(TypedDict, total=False):
    """The harness's float16 median beside two other timings of the same call (timing_check);
    what could not run is left out, or said in its place."""

    harness_s: Required[float | None]  # the benchmark's median; None: float16 not measured
    do_bench_s: float | str  # triton's do_bench median, or why it could not run here
    do_bench_ratio: float  # harness_s / do_bench_s
    bare_loop_s: float  # calls back to back between one pair of events, per call
    bare_loop_ratio: float  # harness_s / bare_loop_s
    bare_loop_peak_bytes: int  # the most memory torch's allocator held in the bare loop
    error: str  # the call that raised, in one line


# The timings timing_check compares, each with its ratio to the harness's.
Timed = Literal["harness_s", "do_bench_s", "bare_loop_s"]
Ratio = Literal["do_bench_ratio", "bare_loop_ratio"]


def timing_check(
    target: Target, size: int, bench: BenchSettings, harness_s: float | None
) -> TimingCheck:
    """The harness's float16 median beside do_bench's and a bare loop's (calls back to back
    between one pair of events), measured in the same run: three ways that agree within 2%
    are the evidence that the timing is right."""
    out: TimingCheck = {"harness_s": harness_s}
    timer = target.kind.timer()
    if harness_s is None:
        print("timing check: float16 was not measured, nothing to compare")
        return out
    try:
        ready = prepare_matmul(
            size,
            size,
            size,
            "float16",
            target.device,
            bench,
            cache_bytes=target.cache_bytes,
        )
        turn = itertools.count()
        out["do_bench_s"] = do_bench_seconds(lambda: ready.call(next(turn)))
        calls = max(1, round(bench.min_seconds / harness_s))

        def loop(_: int) -> None:
            for i in range(calls):
                ready.call(i)  # each output dropped as the next is made, as in the benchmark

        timer.times(loop, 0, 1)  # warm
        target.kind.peak_memory(reset=True)
        out["bare_loop_s"] = timer.times(loop, 0, 1)[0] / calls
        out["bare_loop_peak_bytes"] = target.kind.peak_memory()
    except CALL_ERRORS as err:
        out["error"] = raised(err)
    flops = ar.matmul_flops(size, size, size)
    lines = [f"timing check, float16 {size}^3 ({timer.name}):"]
    compared: list[tuple[Timed, Ratio | None, str]] = [
        ("harness_s", None, "harness (the benchmark's figure)"),
        ("do_bench_s", "do_bench_ratio", "triton do_bench"),
        ("bare_loop_s", "bare_loop_ratio", "bare loop, 2 events"),
    ]
    for key, ratio, what in compared:
        value = out.get(key)
        if isinstance(value, float):
            rate = f"  {what:<34}{ar.tflops(flops, value):>9.4g} TFLOP/s"
            if ratio is not None:
                out[ratio] = harness_s / value
                rate += f"  harness/this {harness_s / value:.3f}"
            lines.append(rate)
        elif value is not None:
            lines.append(f"  {what:<34}{value}")
    if "bare_loop_peak_bytes" in out:
        lines.append(f"  bare loop's peak memory: {out['bare_loop_peak_bytes'] / 2**20:.0f} MiB")
    if "error" in out:
        lines.append(f"  failed: {out['error']}")
    print("\n".join(lines), flush=True)
    return out


def ladder(rows: list[dict[str, Any]]) -> str:
    """The knobs, the largest measured gain first, then those that could not be turned."""
    kept = [knob_row(KnobMeasurement(**r)) for r in rows]
    measured = sorted((r for r in kept if r.status == "measured"), key=lambda r: -r.gain)
    lines = [
        f"{r.knob:<26}{r.gain:>8.3g}x  {r.baseline} -> {r.variant} "
        f"({r.baseline_tflops:.4g} -> {r.variant_tflops:.4g} TFLOP/s, spreads "
        f"{r.baseline_spread:.0%}/{r.variant_spread:.0%})"
        for r in measured
    ]
    return "\n".join(
        lines + [f"{r.knob:<26}{r.status}: {r.reason}" for r in kept if r.status != "measured"]
    )


def run_knobs(
    name: str,
    target: Any,
    gpu: GpuInfo,
    bench: BenchSettings,
    size: int,
    seconds: float | None = None,
) -> list[dict]:
    """The lab's GPU knobs (conf/knobs/lab.yaml, the dtype ladder at the suite's size and the
    launch-bound shape no larger), each a gain measured in one run; `seconds` per side, else the
    lab's."""
    config = yaml.safe_load(Path("conf/knobs/lab.yaml").read_text(encoding="utf-8"))
    config["cuda"]["shape"] = [size] * 3
    config["cuda"]["small_shape"] = [min(size, n) for n in config["cuda"]["small_shape"]]
    seconds = config["min_seconds"] if seconds is None else seconds
    window = replace(bench, min_seconds=seconds)  # the knobs' own
    settings = Settings(window, config["rounds"])
    print("\nknobs (gain = variant / baseline, both sides interleaved in one run):", flush=True)
    rows, _ = measure_knobs(
        name, target, gpu, SimpleNamespace(cuda=SimpleNamespace(**config["cuda"])), settings
    )
    print(ladder(rows), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--size", type=int, default=8192, help="M = N = K (default 8192)")
    parser.add_argument(
        "--gpu", type=int, action="append", help="a GPU's index (repeatable; default: every one)"
    )
    parser.add_argument(
        "--no-knobs", action="store_true", help="measure the dtypes and the copy only"
    )
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=1.0,
        help="sustained timed window per point (default 1)",
    )
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=1.0,
        help="warm-up by time before each point, clocks settling (default 1)",
    )
    parser.add_argument(
        "--copy-mib",
        type=int,
        default=1024,
        help="the device-to-device copy's buffer, MiB (default 1024)",
    )
    parser.add_argument(
        "--knob-seconds",
        type=float,
        help="sustained time per side of each knob (default: conf/knobs/lab.yaml's)",
    )
    args = parser.parse_args(argv)
    if args.copy_mib < 1:
        parser.error(f"--copy-mib {args.copy_mib}: allowed: a whole number of MiB, 1 or more")
    gpus = gpu_info()
    if not gpus:
        raise HardwareError(
            "no NVIDIA or AMD GPU visible (NVML, amdsmi and torch.cuda): nothing to check"
        )
    chosen = [g for g in gpus if args.gpu is None or g["index"] in args.gpu]
    if not chosen:
        known = ", ".join(str(g["index"]) for g in gpus)
        raise HardwareError(f"--gpu {args.gpu}: no such GPU; this machine has {known}")
    # The settings' own defaults (the suite reads no params.yaml) but for the windows asked.
    bench = BenchSettings(
        min_seconds=args.min_seconds, warmup_seconds=args.warmup_seconds, copy_mib=args.copy_mib
    )
    results = []
    for gpu in chosen:  # each GPU's results written as soon as it is measured
        knobs = not args.no_knobs
        results.append(run_gpu(gpu, device_files(), args.size, bench, knobs, args.knob_seconds))
        if args.out:
            args.out.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    run(main)
