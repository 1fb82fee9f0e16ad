"""Tests that need a GPU torch.cuda reaches: NVIDIA's, or AMD's through ROCm's torch (marked
`cuda`, skipped without one). scripts/gpu-check runs
them on a real GPU, and CI runs them on the CUDA stand-in (tests/fakes/cuda) with the `speed`
ones left out: those hold a measured rate to the datasheet, which only a real GPU can show.
They need torch, nvidia-ml-py, PyYAML and pytest only."""

import sys
import time
from pathlib import Path

import pytest
import torch

from roofline.core.dtypes import DTYPES, float8_for
from roofline.device import kinds
from roofline.device.hardware import gpu_info
from roofline.device.telemetry import Sampler, open_gpu, window_telemetry
from roofline.gpu_suite import device_files, match
from roofline.lab import bench_matmul
from roofline.measuring.matmul import GRAPH_BELOW_S, measure_matmul, unsupported_reason
from tests.conftest import counted

pytestmark = pytest.mark.cuda
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu() -> dict:
    return gpu_info()[0]


@pytest.fixture(scope="module")
def cuda(gpu) -> kinds.Cuda:
    """The first GPU, warmed: the first launch pays for the context, cuBLAS handles and clocks
    ramping: pay it once before anything is asserted."""
    kind = kinds.gpu(gpu)  # kinds.Rocm on an AMD GPU: the same API
    a = torch.randn(1024, 1024, device=kind.tensors())
    for _ in range(20):
        a @ a
    kind.synchronize()
    return kind


def timed(cuda, dtype: str, size: int, cache_bytes: int | None = None, **kw) -> object:
    settings = counted(**({"warmup": 2, "repeats": 5} | kw))
    return measure_matmul(size, size, size, dtype, cuda, settings, cache_bytes=cache_bytes)


def test_probe_describes_the_gpu(gpu):
    assert gpu["name"] and gpu["sm_count"] > 0 and gpu["memory_bytes"] > 0
    assert gpu["l2_bytes"] and gpu["driver"] and gpu["max_sm_clock_mhz"] > 0


def test_cuda_events_time_the_gpu_work_not_the_launch(cuda):
    launches = []
    for _ in range(5):  # a launch's cost is its least: a busy host can pause any one of them
        start = time.perf_counter()
        torch.cuda._sleep(10_000)
        launches.append(time.perf_counter() - start)
    launch = min(launches)
    cuda.synchronize()
    (seconds,) = cuda.timer().times(lambda i: torch.cuda._sleep(200_000_000), 0, 1)
    assert seconds > 20 * launch and seconds > 0.01  # ~0.1 s of cycles, not the launch


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "tf32", "float32"])
def test_gpu_matmul_is_checked_then_timed(cuda, gpu, dtype):
    point = timed(cuda, dtype, 128, cache_bytes=gpu["l2_bytes"])
    assert len(point.samples) >= 5 and min(point.samples) > 0
    assert point.check_error <= DTYPES[dtype].tolerance
    assert point.buffer_sets > 1  # 128^3 operands fit in L2: rotated


def test_float32_does_not_use_tf32(cuda):
    assert timed(cuda, "float32", 2048).check_error < 1e-5  # TF32 rounding would give ~1e-3


def test_float8_runs_where_supported_and_says_why_not_elsewhere(cuda, gpu):
    cc, arch = gpu["compute_capability"], gpu.get("architecture")
    fp8 = float8_for(arch)  # float8_e4m3fnuz on AMD's MI300 (gfx94x)
    reason = unsupported_reason(fp8, cuda.name, None, cc, None, arch)
    if reason:
        assert (arch or cc) in reason
        return
    assert timed(cuda, fp8, 512).check_error <= DTYPES[fp8].tolerance


@pytest.mark.speed  # a 64^3 call under GRAPH_BELOW_S is a real GPU's speed, not the stand-in's
def test_a_short_call_is_timed_from_a_cuda_graph_when_that_measures_it_better(cuda):
    point = timed(cuda, "float32", 64, repeats=20)
    assert sum(point.samples) / len(point.samples) < GRAPH_BELOW_S * 10
    assert point.timing.startswith("CUDA graph") or "not faster" in point.timing, point.timing


def test_torchs_profiler_names_the_kernel_cublas_ran_for_each_dtype(cuda):
    """What only a GPU answers: cuBLAS's kernel for a large GEMM of each 16-bit dtype, by name,
    and what the name says (its tile is the quantisation step's)."""
    from roofline.interpretation.kernel_names import parse
    from roofline.measuring.matmul import float32_math

    if torch.version.hip and "played_cuda" in sys.modules:
        pytest.skip("the stand-in plays no hipBLASLt kernel name: none public is cited")
    # Large on a GPU, where the size picks cuBLAS's kernel; small on the stand-in, whose GEMM
    # runs on this CPU (float16 at 1024^3 takes it 2 s a call) and whose name is played.
    size = 256 if "played_cuda" in sys.modules else 1024
    for dtype in ("float16", "bfloat16"):
        point = timed(cuda, dtype, size, warmup=1, repeats=2)
        with float32_math(dtype):
            name = cuda.kernel(lambda p=point: p.call(0))
        print(f"{dtype} {size}^3 ran {name} ({parse(name).summary() or 'a name not read'})")
        assert name


def test_nvml_sampler_sees_the_gpu_under_load_with_energy(cuda, gpu):
    a = torch.randn(1024, 1024, device=cuda.tensors())
    sampler = cuda.monitor()() if cuda.name == "rocm" else None  # amdsmi's fields
    sampler = sampler or Sampler(open_gpu(gpu["uuid"]), interval_s=0.01, own_pids=cuda.own_pids)
    with sampler as watch:
        end = time.perf_counter() + 1.2  # past the 1 s under which the counter is not used
        while time.perf_counter() < end:
            a @ a
        cuda.synchronize()
    summary = window_telemetry(watch, gpu["max_sm_clock_mhz"])
    assert len(watch.samples) >= 5 and summary.sm_clock_mhz > 0 and summary.power_w > 0
    assert summary.energy_j is None or summary.energy_j > 0
    assert "gpu_idle" not in summary.throttle_reasons
    assert summary.other_processes == "", "this process was taken for another"


@pytest.mark.speed
def test_the_labs_bench_matmul_is_inside_a_band_from_the_dense_peak(gpu):
    name, dev = match(gpu, device_files(ROOT / "conf/device"))
    peak = dev["peak_tflops"].get("float16")
    if not peak:
        pytest.skip(f"{name} has no device file with a float16 peak")
    tflops, gbps = bench_matmul()
    assert 0.3 * peak <= tflops <= peak, f"{tflops:.1f} TFLOP/s against a dense peak of {peak}"
    assert gbps == pytest.approx(tflops * 1e12 / (8192 / 3) / 1e9)  # bytes = FLOPs / intensity


# What only hardware answers about the stand-in's strict rules (tests/test_standin_torch.py
# holds the stand-in to them); each prints what this GPU said, for gpu-check's log.


def test_tunableop_searches_more_than_default_and_names_its_pick(cuda, tmp_path):
    offered, which = cuda.tunable_offers()
    results = tmp_path / "tunableop_results.csv"
    a, b = (torch.randn(1024, 1024, device=cuda.tensors()).half() for _ in "ab")
    before = len(cuda.tuned_solutions())
    with cuda.tunable(True, results):
        a @ b
        cuda.synchronize()
    picked = [f"{op}: {name}" for op, name in cuda.tuned_solutions()[before:]]
    print(f"TunableOp offers {which} ({offered}); picked {picked}")
    assert offered != 1, which  # ROCm's count (0) is known only once it tunes
    assert any("_Half_" in p for p in picked), picked
    # torch 2.15 appends each result to its file as tuning finds it (no write_file any more).
    assert results.exists() and "GemmTunableOp_Half" in results.read_text(encoding="utf-8")


def test_a_graph_replay_holds_its_inputs_after_the_caller_lets_them_go(cuda):
    out = torch.empty(512, 512, device=cuda.tensors())

    def product() -> tuple:  # the operands live in the call only
        a, b = (torch.randn(512, 512, device=cuda.tensors()) for _ in "ab")
        return a @ b, lambda i: torch.mm(a, b, out=out)

    expected, call = product()
    replay = cuda.graph(call, 1)
    del call
    junk = [torch.zeros(512, 512, device=cuda.tensors()) for _ in range(8)]  # freed blocks reused
    out.zero_()
    replay(0)
    cuda.synchronize()
    assert torch.allclose(out, expected) and len(junk) == 8


def test_float8_takes_column_major_b_only_and_fast_accumulation_stays_close(cuda, gpu):
    arch = gpu.get("architecture")
    fp8 = float8_for(arch)
    reason = unsupported_reason(fp8, cuda.name, None, gpu["compute_capability"], None, arch)
    if reason:
        pytest.skip(reason)
    f = torch.nn.functional
    a = torch.randn(256, 256, device=cuda.tensors()).to(getattr(torch, fp8))
    b = torch.randn(256, 256, device=cuda.tensors()).to(getattr(torch, fp8))
    one, whole = torch.ones((), device=cuda.tensors()), f.ScalingType.TensorWise

    def scaled(b, fast=False):
        return f.scaled_mm(
            a, b, one, whole, one, whole, output_dtype=torch.bfloat16, use_fast_accum=fast
        )

    with pytest.raises(RuntimeError) as refused:
        scaled(b)  # row-major B
    print(f"row-major B refused: {str(refused.value).splitlines()[0]}")
    exact, fast = scaled(b.t().contiguous().t()), scaled(b.t().contiguous().t(), fast=True)
    gap = ((fast.float() - exact.float()).abs().max() / exact.float().abs().max()).item()
    print(f"fast accumulation against exact: {gap:.2e} max relative difference")
    assert gap < 1e-2


def test_amdsmi_answers_each_field_the_lab_reads(cuda, gpu):
    if cuda.name != "rocm":
        pytest.skip("an NVIDIA GPU: NVML's test asks")
    from roofline.device import amd_telemetry

    handle = amd_telemetry.open_gpu(gpu.get("uuid"), gpu["index"])
    reads = {**amd_telemetry.fields(), "energy (J)": amd_telemetry.energy_j}
    answers = {}
    for name, read in reads.items():
        try:
            answers[name] = read(handle)
        except Exception as err:
            answers[name] = f"{type(err).__name__}: {err}"
    print("amdsmi on this host: " + "; ".join(f"{k} {v}" for k, v in answers.items()))
    assert isinstance(answers["sm_mhz"], int) and answers["sm_mhz"] > 0


def test_nvml_answers_each_field_the_lab_reads(cuda, gpu):
    if cuda.name == "rocm":
        pytest.skip("an AMD GPU: amdsmi's test asks (no NVIDIA driver, so no NVML)")
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{gpu['uuid']}")
    fields = {
        "power limit (mW)": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle),
        "max SM clock": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "SM clock": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "power (mW)": lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
        "energy (mJ)": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle),
        "clock-event reasons": lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
        "temperature": lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        "processes": lambda: len(pynvml.nvmlDeviceGetComputeRunningProcesses(handle)),
    }
    answers = {}
    for name, read in fields.items():
        try:
            answers[name] = read()
        except pynvml.NVMLError as err:
            answers[name] = f"{type(err).__name__}: {err}"
    print("NVML on this host: " + "; ".join(f"{k} {v}" for k, v in answers.items()))
    assert isinstance(answers["SM clock"], int) and answers["SM clock"] > 0
