"""Golden pages: REPORT.md, REPORT-appendix.md and breakdown.csv rendered from fixed records under a frozen
conf (`params.yaml` here, a copy of the lab's composed one), compared whole by
tests/test_golden.py. Frozen, so that the pages change only when the rendering does: a device
added to conf/, a new price or SKU line, leaves them as they are. Rewrite them after a change
to the rendering you mean, and review the diff of the page:

    uv run python -m tests.golden

The records are fixtures, not results: `cpu.json` is the CPU record one `uv run dvc exp run -S
knobs=lab` wrote on this project's CI machine (2 vCPUs of an AMD EPYC with AVX-512 and
AVX512-BF16, 2026-12-04, 19:08 UTC), `cpu-knobs.json` that run's knobs record, whole; the GPUs' are
played below, at rates near what their datasheets and published figures lead one to expect,
with the kernel names the CUDA stand-in plays (cited there), so that every part of the page
has something to show; the h200 is a node of eight GPUs measured at once. mps and mi300x stay
pending."""

import dataclasses
import json
from pathlib import Path

from roofline.core.measurement import (
    WindowTelemetry,
    knob_from_dict,
    measurement,
    measurement_from_dict,
)
from roofline.device.telemetry import shares_text
from roofline.interpretation.aggregate import aggregate
from roofline.interpretation.gaps import breakdown_table
from roofline.interpretation.lab_config import load_lab_params
from roofline.interpretation.manifest import as_manifest
from roofline.machines.records import knobs_record, pending_record, sweep_record
from roofline.rendering.appendix import appendix
from roofline.rendering.report import render
from tests.fakes.cuda.played_cuda import SM80_KERNELS, SM90_KERNELS

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
# The golden pages' conf: never the live params.yaml, which every conf/ change rewrites.
PARAMS = HERE / "params.yaml"
PAGES = {name: HERE / name for name in ("REPORT.md", "REPORT-appendix.md", "breakdown.csv")}
N = 8192

# Played GPUs: (torch's name, SMs, GiB, l2 MiB, power limit W, max SM MHz, SM MHz under load,
# W under load, clock limits, copy GB/s, {dtype: TFLOP/s}).
GPUS = {
    "a100": (
        "NVIDIA A100-SXM4-80GB",
        108,
        80,
        40,
        400.0,
        1410,
        1234,
        398.0,
        "sw_power_cap",
        1710.0,
        {"float16": 252.0, "bfloat16": 259.0, "tf32": 138.0, "float32": 19.2},
    ),
    "h100": (
        "NVIDIA H100 80GB HBM3",
        132,
        80,
        50,
        700.0,
        1980,
        1755,
        690.0,
        "sw_power_cap",
        2910.0,
        {
            "float16": 702.0,
            "bfloat16": 768.0,
            "float8_e4m3fn": 1260.0,
            "tf32": 402.0,
            "float32": 51.5,
        },
    ),
    "h200": (
        "NVIDIA H200",
        132,
        141,
        60,
        700.0,
        1980,
        1785,
        680.0,
        "sw_power_cap",
        4190.0,
        {
            "float16": 731.0,
            "bfloat16": 779.0,
            "float8_e4m3fn": 1310.0,
            "tf32": 410.0,
            "float32": 52.6,
        },
    ),
}


# The played h200 node's GPUs, each one's rate against the first's: sustained figures spread by up
# to about 10% across a node's eight GPUs (mamf-finder's README).
NODE_PACE = (1.0, 0.995, 0.99, 0.985, 0.98, 0.975, 0.96, 0.92)


# The played Hopper GPUs' GPM metrics over every window (the CUDA stand-in's): busy throughout,
# the tensor pipes issuing in 75.8% of the SMs' cycles, about what 702 TFLOP/s at 1755 MHz
# leaves of 989.4 at 1830 with a kernel that issues at 97-98% of its active cycles.
HOPPER = ("h100", "h200")
HOPPER_GPM = {
    "gpm_graphics_busy_pct": 99.6,
    "gpm_sm_busy_pct": 98.1,
    "gpm_sm_occupancy_pct": 12.4,
    "gpm_tensor_active_pct": 75.8,
    "gpm_hmma_active_pct": 75.8,
    "gpm_dram_busy_pct": 31.2,
}


# The played breakdown sides (roofline.measuring.gpu_steps) of the a100 and h100, by side:
# (TFLOP/s, SM MHz, W). The a100's from thonking.ai's A100 at 8192^3 float16: 258 TFLOP/s on
# random inputs, 295 on zeros, held by its 400 W limit (random scaled to the played 252, the
# clock to the rate); the h100's constant side at its 1980 MHz maximum, its rate with the clock.
# Each side's three rounds spread by 1%; a graph's replay is within that of the eager calls.
STEP_SIDES = {
    "a100": {"random": (252.0, 1234, 398.0), "constant": (288.0, 1410, 341.0), "graph": (253.0,)},
    "h100": {"random": (702.0, 1755, 690.0), "constant": (790.0, 1980, 560.0), "graph": (703.0,)},
}


def step_sides(name: str) -> dict:
    """The played GPU's breakdown sides, as its record keeps them."""
    sides = STEP_SIDES[name]
    call = {side: 2 * N**3 / (read[0] * 1e12) for side, read in sides.items()}
    return {
        "backend": "torch",
        "dtype": "float16",
        "shape": [N, N, N],
        "gpu": 0,
        "sides_s": {side: [[t * f] * 5 for f in (1.005, 1.0, 0.995)] for side, t in call.items()},
        "sm_clock_mhz": {s: [float(r[1])] * 3 for s, r in sides.items() if len(r) > 1},
        "power_w": {s: [r[2]] * 3 for s, r in sides.items() if len(r) > 1},
        "unmeasured": {},
    }


def gpu_record(name: str) -> dict:
    gpu, sms, gib, l2, limit, max_mhz, mhz, watts, limits, copy_gbps, rates = GPUS[name]
    hardware = {
        "name": gpu,
        "compute_capability": "9.0" if sms == 132 else "8.0",
        "sm_count": sms,
        "memory_gib": gib,
    }
    found = hardware | {
        "index": 0,
        "memory_bytes": gib << 30,
        "l2_bytes": l2 << 20,
        "uuid": f"GPU-played-{name}",
        "cuda": "13.2",
        "cublaslt": 130401,
        "driver": "580.65.06",
        "power_limit_w": limit,
        "max_sm_clock_mhz": max_mhz,
    }
    # h100's kernels are named; a100's float16 and h200's are not (the step says "assumed").
    kernels = {"h100": SM90_KERNELS, "a100": SM80_KERNELS}.get(name, {})

    def row(dtype: str, tflops: float, mhz: float, share: float | None, series: str) -> dict:
        seconds = 2 * N**3 / (tflops * 1e12)
        samples = [seconds * f for f in (0.99, 1.0, 1.0, 1.01, 1.02)]
        telemetry = WindowTelemetry(
            sm_clock_mhz=mhz,
            sm_clock_max_mhz=max_mhz,
            power_w=watts,
            energy_j=watts * sum(samples),
            power_source="energy counter",
            temperature_max_c=64,
            throttle_reasons=limits,
            power_limit_w=limit,
        )
        if name in HOPPER:  # NVML GPM over the window, and the time the power cap held it
            for field, value in HOPPER_GPM.items():
                setattr(telemetry, field, value)
            held = 2.0 if series == "lab" else 60.0
            telemetry.power_held_s, telemetry.thermal_held_s = held * (share or 1.0), 0.0
        else:  # Ampere: no GPM, as the lab records it there
            telemetry.counter_errors = "GPM: this GPU has none (NVML GPM is Hopper's and newer)"
            telemetry.power_held_s, telemetry.thermal_held_s = 0.0, 0.0
        if share is not None:  # the reasons' shares, where the played board records them
            telemetry.clock_reason = limits or "none"
            telemetry.clock_reason_share = share if limits else None
            telemetry.clock_reason_shares = shares_text({limits: share} if limits else {})
        point = measurement(
            name,
            dtype,
            [N, N, N],
            samples,
            1e-3,
            telemetry,
            timing="cuda events, calls back to back",
            kernel=kernels.get(dtype, ""),
        )
        point.series = series
        point.window_s = 60.0 if series == "sustained" else 2.0  # each window's length, as asked
        return dataclasses.asdict(point)

    # h200's record is from before the reasons' shares were recorded.
    share = None if name == "h200" else 0.9
    rows = [row(dtype, tflops, mhz, share, "lab") for dtype, tflops in rates.items()]
    if name == "h200":  # a node of eight, measured at once: each GPU's rows, the last hottest
        rows = [
            dict(r, gpu=i, samples_s=[t / pace for t in r["samples_s"]])
            for i, pace in enumerate(NODE_PACE)
            for r in rows
        ]
    if name == "h100":  # a minute sustained after the burst: the power cap holds the clock lower
        rows.append(row("float16", 0.97 * rates["float16"], 0.95 * mhz, 1.0, "sustained"))
    copied = 2 << 30
    steps = {"gpu_steps": step_sides(name)} if name in STEP_SIDES else {}
    return steps | {
        "device": name,
        "status": "measured",
        "hardware": hardware,
        "found": found,
        "run": {
            "started_at": "2026-12-01T12:00:00+00:00",
            "wall_s": 600.0,
            "git_revision": "golden",
            "threads": 1,
            "environment": {},
            "versions": {"torch": "2.15.0+cu132", "cuda": "13.2", "python": "3.11.7"},
        },
        "memory": {
            "bytes_moved": copied,
            "median_s": copied / (copy_gbps * 1e9),
            "min_s": copied / (copy_gbps * 1e9),
            "max_s": copied / (copy_gbps * 1e9),
            "spread": 0.0,
            "gbps": copy_gbps,
            "samples_s": [copied / (copy_gbps * 1e9)],
        },
        "rows": rows,
    }


def parsed(name: str, record: dict) -> dict:
    rows = [measurement_from_dict(r, f"{name}, row {i}") for i, r in enumerate(record["rows"])]
    return record | {"rows": rows}


def pages() -> dict[str, str]:
    """The two pages and the breakdown table, as the report stage writes them from these
    records."""
    cfg = load_lab_params(PARAMS)
    records = {}
    for name in cfg.devices:
        if name == "cpu":
            records[name] = json.loads((HERE / "cpu.json").read_text(encoding="utf-8"))
        elif name in GPUS:
            records[name] = gpu_record(name)
        else:
            records[name] = pending_record(name, cfg.devices[name])
    records = {name: parsed(name, record) for name, record in records.items()}
    sweeps = {name: sweep_record(name, "none", "measured") for name in records}
    knobs = {name: knobs_record(name, "none", "measured") for name in records}
    cpu_knobs = json.loads((HERE / "cpu-knobs.json").read_text(encoding="utf-8"))
    knobs["cpu"] = cpu_knobs | {
        "rows": [knob_from_dict(r, f"cpu knobs, row {i}") for i, r in enumerate(cpu_knobs["rows"])]
    }
    table, knob_rows, manifest, _ = aggregate(cfg, records, sweeps, knobs)
    manifest = json.loads(json.dumps(manifest))  # as the report stage reads it
    return {
        "REPORT.md": render(table, manifest, knob_rows),
        "REPORT-appendix.md": appendix(table, manifest, knob_rows),
        "breakdown.csv": breakdown_table(table, as_manifest(manifest), knob_rows).to_csv(
            index=False
        ),
    }
