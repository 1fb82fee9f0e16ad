"""The short GPU suite behind scripts/gpu-check: on each GPU here, every GPU dtype at 8192^3,
the copy ceiling and NVML telemetry, printed as a table and written as JSON.

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
from roofline.measure import describe, gpu_target, measure_memory_ceiling, measure_point

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


def table(rows: list[dict[str, Any]]) -> str:
    head = f"{'dtype':<14}{'TFLOP/s':>10}{'spread':>8}{'MFU':>8}{'SM MHz':>14}{'W':>6}{'C':>5}  throttle"
    lines = [head]
    for r in rows:
        if r["status"] != "measured":
            lines.append(f"{r['dtype']:<14}{r['status']}: {r['reason']}")
            continue
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "-"
        clock = (
            f"{r['sm_clock_mhz']:.0f}/{r['sm_clock_max_mhz'] or 0:.0f}"
            if r["sm_clock_mhz"] is not None
            else "-"
        )
        power = f"{r['power_w']:.0f}" if r["power_w"] is not None else "-"
        temp = f"{r['temperature_max_c']:.0f}" if r["temperature_max_c"] is not None else "-"
        lines.append(
            f"{r['dtype']:<14}{r['achieved_tflops']:>10.1f}{r['spread']:>8.1%}{mfu:>8}"
            f"{clock:>14}{power:>6}{temp:>5}  {r['throttle_reasons'] or '-'}"
        )
    return "\n".join(lines)


def run_gpu(gpu: dict[str, Any], devices: dict, size: int, bench: SimpleNamespace) -> dict:
    name, dev = match(gpu, devices)
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
        f"\n{name}: {gpu['name']} (sm_{gpu['compute_capability']}, {gpu['sm_count']} SMs, "
        f"driver {gpu.get('driver')}, CUDA {gpu.get('cuda')}, cuBLASLt {gpu.get('cublaslt')}, "
        f"power limit {gpu.get('power_limit_w')} W)\n{table(rows)}\n"
        f"copy 1 GiB device-to-device: {copy_tbps:.2f} TB/s (read + write, median, spread "
        f"{copy['spread']:.1%})"
    )
    for line in checks:
        print(f"lab check: {line}")
    return {
        "device": name,
        "gpu": gpu,
        "hardware": identity("cuda", gpu),
        "rows": rows,
        "copy": {**copy, "tbps": copy_tbps},
        "lab_checks": checks,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--size", type=int, default=8192, help="M = N = K (default 8192)")
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
    bench = SimpleNamespace(
        seed=0, warmup=3, repeats=10, check_rows=16, min_seconds=args.min_seconds
    )
    results = [run_gpu(gpu, device_files(), args.size, bench) for gpu in gpus]
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    run(main)
