"""The short GPU suite behind scripts/gpu-check: on each GPU here, every GPU dtype at 8192^3,
the copy ceiling and NVML telemetry, printed as a table, then the lab's GPU knobs as a ladder
of gains; written as JSON.

It needs torch, nvidia-ml-py and PyYAML only (no dvc, hydra or omegaconf), so it runs under a
GPU image's own Python, and it measures with the same functions as the pipeline's benchmark.

    python -m roofline.gpu_suite [--out FILE] [--size N] [--min-seconds S]
"""

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from roofline.dtypes import NAMES
from roofline.errors import HardwareError, run
from roofline.hardware import find_device, gpu_info, identity
from roofline.interpret import interpret, lab_checks
from roofline.knobs import Settings, measure_knobs
from roofline.measure import describe, gpu_target, measure_memory_ceiling, measure_point
from roofline.schema import KnobMeasurement, knob_row

SUITE_DTYPES = NAMES  # every dtype of the registry runs on a GPU


def device_files(conf: Path = Path("conf/device")) -> dict[str, dict[str, Any]]:
    """conf/device/<name>.yaml as plain dicts."""
    return {path.stem: yaml.safe_load(path.read_text()) for path in sorted(conf.glob("*.yaml"))}


def match(gpu: dict[str, Any], devices: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    for name, dev in devices.items():
        if dev.get("kind") == "cuda" and find_device(dev, {"cpu": {}, "gpus": [gpu]}):
            return name, dev
    print(
        f"note: {gpu['name']!r} matches no conf/device/*.yaml: MFU is left blank "
        "(README: adding a device)"
    )
    return gpu["name"], {"kind": "cuda", "peak_tflops": {}, "recognise": {}}


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
        clocks = "/".join(
            cell(v, ".0f") for v in (r["sm_clock_mhz"], peak_clock_mhz, r["sm_clock_max_mhz"])
        )
        lines.append(
            f"{r['dtype']:<14}{r['achieved_tflops']:>9.1f}{r['spread']:>8.1%}"
            f"{cell(r['mfu'], '.1%'):>7}  {clocks:<22}{cell(r['power_w'], '.0f'):>5}"
            f"{cell(r['joules_per_tflop'], '.2f'):>8}{cell(r['temperature_max_c'], '.0f'):>4}  "
            f"{r['timing']} | {r['throttle_reasons'] or '-'} | {r['other_processes'] or '-'} | "
            f"{r['telemetry_errors'] or '-'}"
        )
    return "\n".join(lines)


def run_gpu(gpu: dict[str, Any], devices: dict, size: int, bench: SimpleNamespace) -> dict:
    name, dev = match(gpu, devices)
    print(
        f"\n{gpu['name']}: recognised as {name} ({dev.get('sku', 'no device file')}); "
        f"sm_{gpu['compute_capability']}, {gpu['sm_count']} SMs, driver {gpu.get('driver')}, "
        f"CUDA {gpu.get('cuda')}, cuBLASLt {gpu.get('cublaslt')}, power limit "
        f"{gpu.get('power_limit_w')} W",
        flush=True,
    )
    target = gpu_target(gpu, print)
    points = []
    for dtype in SUITE_DTYPES:
        points.append(measure_point(name, dtype, [size] * 3, target, bench, gpu))
        print(describe(points[-1], dev["peak_tflops"].get(dtype)), flush=True)
    rows = interpret(points, dev, {}, dev.get("sku", gpu["name"]))
    copy = measure_memory_ceiling(target, bench, 1 << 30)
    copy_tbps = copy["gbps"] / 1e3
    fp16 = next((r for r in rows if r.dtype == "float16" and r.status == "measured"), None)
    checks = (
        lab_checks(
            dev.get("lab_band_tflops", {}).get("float16"),
            dev.get("lab_done_tflops", {}).get("float16"),
            fp16,
        )
        if fp16
        else []
    )
    rows = [asdict(r) for r in rows]
    print(
        f"\n{table(rows, dev.get('peak_clock_mhz'))}\n"
        f"copy 1 GiB device-to-device: {copy_tbps:.2f} TB/s (read + write, median, spread "
        f"{copy['spread']:.1%})"
    )
    for line in checks:
        print(f"lab check: {line}")
    knobs = run_knobs(name, target, gpu, bench) if bench.knobs else []
    return {
        "device": name,
        "gpu": gpu,
        "hardware": identity("cuda", gpu),
        "rows": rows,
        "copy": {**copy, "tbps": copy_tbps},
        "lab_checks": checks,
        "knobs": knobs,
    }


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


def run_knobs(name: str, target: Any, gpu: dict[str, Any], bench: SimpleNamespace) -> list[dict]:
    """The lab's GPU knobs (conf/knobs/lab.yaml), each a gain measured in one run."""
    config = yaml.safe_load(Path("conf/knobs/lab.yaml").read_text())
    settings = Settings(
        seed=bench.seed,
        warmup=bench.warmup,
        check_rows=bench.check_rows,
        rounds=config["rounds"],
        min_seconds=config["min_seconds"],
    )
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
    args = parser.parse_args(argv)
    gpus = gpu_info()
    if not gpus:
        raise HardwareError("no NVIDIA GPU visible (NVML and torch.cuda): nothing to check")
    chosen = [g for g in gpus if args.gpu is None or g["index"] in args.gpu]
    if not chosen:
        known = ", ".join(str(g["index"]) for g in gpus)
        raise HardwareError(f"--gpu {args.gpu}: no such GPU; this machine has {known}")
    bench = SimpleNamespace(
        seed=0,
        warmup=3,
        warmup_seconds=1.0,
        repeats=10,
        check_rows=16,
        min_seconds=args.min_seconds,
    )
    results = []
    for gpu in chosen:  # each GPU's results written as soon as it is measured
        results.append(run_gpu(gpu, device_files(), args.size, bench))
        if args.out:
            args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    run(main)
