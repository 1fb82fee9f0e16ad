"""The first real GPU's questions, settled in one run (scripts/first-gpu): what only a GPU can
answer about premises the lab's code rests on, each printed with what the answer means for the
code. Run it first on any GPU you are lent, and put its output in your notes.

1. float32's tensor-pipe activity (NVML GPM): 0% where cuBLAS runs float32 on the CUDA cores.
2. Whether this process may read GPM at all (an unprivileged container may be refused).
3. What the profiler costs later launches: a launch-bound call timed before a kernel is named,
   after it, and after it in a process that tears CUPTI down (TEARDOWN_CUPTI=1).
4. The data's power at the lab's shape: random against constant inputs, clock and power.
5. On an AMD GPU: how long one amdsmi violation-status call takes, and amdsmi's UUIDs beside
   torch's.

It needs torch, numpy, nvidia-ml-py (or amdsmi) and PyYAML, as scripts/gpu-check does.

    python -m roofline.first_gpu [--size N] [--small N] [--seconds S] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from roofline.core import arithmetic as ar
from roofline.core.errors import HardwareError, run
from roofline.device.description import GpuInfo
from roofline.device.hardware import gpu_info
from roofline.device.timing import BenchSettings
from roofline.measuring.gpu_steps import describe_gpu_steps, measure_gpu_steps
from roofline.measuring.measure import gpu_target, measure_point, name_kernels, rate

# A call whose launch costs: the profiler's overhead shows on the host's side of it.
LAUNCH_BOUND = 256


def say(question: str, answer: str, means: str) -> dict[str, str]:
    print(f"\n{question}\n  answer: {answer}\n  means:  {means}", flush=True)
    return {"question": question, "answer": answer, "means": means}


def tensor_activity(target: Any, gpu: GpuInfo, size: int, bench: BenchSettings) -> list[dict]:
    """Questions 1 and 2, from one float32 window of a second or more with GPM read."""
    point = measure_point("first-gpu", "float32", [size] * 3, target, bench, gpu, later=[])
    active, errors = point.gpm_tensor_active_pct, point.counter_errors
    said = []
    if active is not None:
        said.append(
            say(
                f"1. float32 at {size}^3: how active are the tensor pipes?",
                f"{active:.1f}% at {point.sm_clock_mhz or 0:.0f} MHz ({rate(point):.4g} TFLOP/s)",
                "gpu-check's counters line says float32 left them idle"
                if active == 0
                else "float32 reached the tensor pipes: gpu-check compares it with their rate",
            )
        )
    if active is not None:
        answer, means = "yes", "the breakdown splits the kernel's loss by GPM's counters here"
    elif "NO_PERMISSION" in errors:
        answer = f"no, refused: {errors}"
        means = "the breakdown's counter steps stay unmeasured on this pod, and say why"
    elif "has none" in errors or "no GPM calls" in errors:
        answer, means = f"no counters: {errors}", "the breakdown models tiles and waves instead"
    else:
        answer = f"not read: {errors}"
        means = "the window was too short or refused: run again with --seconds 1.2 or more"
    said.append(say("2. May this process read the GPU's own counters (GPM)?", answer, means))
    return said


def launch_rate(target: Any, gpu: GpuInfo, small: int, bench: BenchSettings) -> float:
    """A launch-bound float16 call's median TFLOP/s; its kernel not named (no profiler)."""
    point = measure_point("first-gpu", "float16", [small] * 3, target, bench, gpu, later=[])
    return rate(point)


def naming_cost(target: Any, gpu: GpuInfo, small: int, bench: BenchSettings) -> float:
    """A launch-bound call's rate after one kernel is named (torch's profiler around one more
    call, as the benchmark names it) over its rate before."""
    before = launch_rate(target, gpu, small, bench)
    later: list = []
    measure_point("first-gpu", "float16", [small] * 3, target, bench, gpu, later=later)
    name_kernels(later)
    return launch_rate(target, gpu, small, bench) / before


def profiler_cost(target: Any, gpu: GpuInfo, small: int, bench: BenchSettings) -> dict:
    """Question 3: the same launch-bound call before and after a kernel is named here."""
    after = naming_cost(target, gpu, small, bench)
    torn = torn_down(small, bench)
    return say(
        f"3. Does naming a kernel (torch's profiler) slow later launches ({small}^3 float16)?",
        f"{after:.3f}x the rate before it; with TEARDOWN_CUPTI=1 "
        + (f"{torn:.3f}x" if isinstance(torn, float) else f"not measured ({torn})"),
        "the lab names kernels once every window is timed, so no timed window pays for it"
        if after < 0.98
        else "within 2%: the order of naming and timing costs nothing measurable here",
    )


def torn_down(small: int, bench: BenchSettings) -> float | str:
    """Question 3's last part, in a process of its own with TEARDOWN_CUPTI=1."""
    code = (
        "import json, sys; from roofline import first_gpu as f; "
        "print(json.dumps(f.torn_down_here(*json.loads(sys.argv[1]))))"
    )
    args = json.dumps([small, bench.min_seconds, bench.warmup_seconds])
    env = dict(os.environ, TEARDOWN_CUPTI="1")
    done = subprocess.run(
        [sys.executable, "-c", code, args], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "it failed"
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def torn_down_here(small: int, seconds: float, warmup: float) -> float:
    """After / before a kernel is named, in this process (its environment's TEARDOWN_CUPTI)."""
    (gpu,) = gpu_info()[:1]
    target = gpu_target(gpu, lambda line: None)
    bench = BenchSettings(min_seconds=seconds, warmup_seconds=warmup)
    return naming_cost(target, gpu, small, bench)


def data_power(target: Any, gpu: GpuInfo, size: int, bench: BenchSettings) -> dict:
    """Question 4: the breakdown's own sides at the lab's shape."""
    head = measure_point("first-gpu", "float16", [size] * 3, target, bench, gpu, later=[])
    steps = measure_gpu_steps(target, [head], bench)
    clocks = steps["sm_clock_mhz"]
    quiet = clocks.get("constant") and clocks.get("random")
    lower = quiet and sum(clocks["random"]) < sum(clocks["constant"])
    return say(
        f"4. The data's power at {size}^3 float16: random against constant inputs",
        describe_gpu_steps(steps),
        "random inputs held the clock lower: the breakdown's data-power step names it"
        if lower
        else "no clock difference read: the data-power step keeps its factor and says so",
    )


def amd_questions(gpu: GpuInfo) -> list[dict]:
    """Question 5, on an AMD GPU only."""
    import torch

    from roofline.device import amd_telemetry

    amdsmi = amd_telemetry.load()
    handle = amd_telemetry.open_gpu(gpu.get("uuid"), gpu["index"])
    started = time.perf_counter()
    amdsmi.amdsmi_get_violation_status(handle)
    took = time.perf_counter() - started
    theirs = [amdsmi.amdsmi_get_gpu_device_uuid(h) for h in amdsmi.amdsmi_get_processor_handles()]
    ours = [str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())]
    return [
        say(
            "5a. How long does one amdsmi violation-status call take?",
            f"{took * 1e3:.0f} ms",
            "the sampler's window ends before that call returns (its energy and counters too)",
        ),
        say(
            "5b. amdsmi's GPU UUIDs beside torch's",
            f"amdsmi {theirs}; torch {ours}",
            "the same: each GPU's telemetry could be matched by UUID too"
            if set(ours) <= set(theirs)
            else "they differ (amdsmi before 7.1): each GPU's telemetry is matched by its PCI "
            "address, which both read alike",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--size", type=int, default=8192, help="the lab's M = N = K (8192)")
    parser.add_argument("--small", type=int, default=LAUNCH_BOUND, help="a launch-bound size")
    parser.add_argument("--seconds", type=float, default=1.2, help="each timed window (1.2)")
    parser.add_argument("--out", type=Path, help="write the answers as JSON here")
    args = parser.parse_args(argv)
    gpus = gpu_info()
    if not gpus:
        raise HardwareError("no NVIDIA or AMD GPU visible (NVML, amdsmi and torch.cuda)")
    gpu = gpus[0]
    print(f"first-gpu: {gpu['name']} (GPU {gpu['index']}), driver {gpu.get('driver')}")
    target = gpu_target(gpu, print)
    bench = BenchSettings(min_seconds=args.seconds, warmup_seconds=min(1.0, args.seconds))
    answers = tensor_activity(target, gpu, args.size, bench)
    answers.append(profiler_cost(target, gpu, args.small, bench))
    answers.append(data_power(target, gpu, args.size, bench))
    if gpu.get("architecture"):
        answers += amd_questions(gpu)
    flops = ar.matmul_flops(*[args.size] * 3)
    print(f"\nfirst-gpu: done ({flops / 1e12:.2f} TFLOP a call at {args.size}^3)")
    if args.out:
        args.out.write_text(json.dumps(answers, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    run(main)
