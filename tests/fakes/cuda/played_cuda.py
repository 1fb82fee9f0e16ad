"""A CUDA stand-in: torch.cuda played on this CPU, so the GPU path runs end to end in CI
through the same seam a real GPU uses (roofline.device.kinds). It is meant to be as strict as a GPU,
never friendlier (tests/test_standin_torch.py holds it to the installed torch):

- tensors stay on the CPU, and every op runs under a dispatch mode that plays the device:
  its memory (the real size torch reports; past it, torch.OutOfMemoryError), cuBLAS's
  warm-up before a capture, host reads refused inside one, float8's layout rules, TunableOp;
- events time the host clock when recorded (CPU work is synchronous, so that is the work's
  time), and answer only between two timing events, both recorded and synchronised;
- a CUDA graph records the ops captured and replays them over its inputs' memory, which it
  does not keep alive (a replay after they were freed fails, as it may on a GPU);
- TunableOp is torch's own Python module over played C++ hooks: it offers "Default" and the
  cuBLASLt candidates torch 2.15 requests, and appends its results to its file;
- torch.profiler is torch's own too, over played C++ hooks (torch.autograd's
  _prepare_profiler, _enable_profiler, _disable_profiler, _supported_activities): with CUDA
  activity on, each GEMM run is a CUDA kernel event named as cuBLAS names it on the played GPU
  (its "kernels", real names from public profiles); a dtype it has no name for shows no kernel,
  as a profiler without CUPTI's kernel activity shows none;
- NVML (pynvml.py beside this file) answers from the machine described below.

Selected from outside the process, as tests/fakes/old_driver is: put this folder first on
PYTHONPATH (its sitecustomize installs the stand-in in every Python process started so) and
name the machine in $PLAYED_MACHINE (default h100). In-process, `install(machine, setattr)`
then `uninstall()` (tests/conftest.py's `played` fixture does both)."""

import contextlib
import json
import os
import sys
import time
import weakref
from pathlib import Path

MIB = 1 << 20

# cuBLAS's kernels for a large GEMM of each dtype, as torch's profiler names them, from public
# profiles of real runs (the played GPU's GEMMs in that dtype run under this name):
# - sm90 float16: NVIDIA/TensorRT-LLM issue 1541
#   (https://github.com/NVIDIA/TensorRT-LLM/issues/1541), and triton-lang/triton pull 3668
#   (https://github.com/triton-lang/triton/pull/3668);
# - sm90 bfloat16: AMD-AGI/TraceLens, its kernel-name parser's test of names "extracted from
#   trace files" ("H100 Wan-AI inference trace");
# - sm80 bfloat16: bytedance/ByteMLPerf byte_micro_perf/README.md (an A800-SXM4-80GB, GA100
#   like the A100, bfloat16 32768x8192x8192).
SM90_KERNELS = {
    "float16": "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
    "execute_segment_k_off_kernel__5x_cublas",
    "bfloat16": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_warpgroupsize2x1x1_"
    "execute_segment_k_off_kernel__5x_cublas",
}
SM80_KERNELS = {"bfloat16": "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn"}

H100_SXM = {
    "name": "NVIDIA H100 80GB HBM3",
    "capability": [9, 0],
    "sm_count": 132,
    # What torch reports on an H100 80GB HBM3 pod: total_memory=81089MB (79.2 GiB), not 80 GB.
    "memory_bytes": 81089 * MIB,
    "l2_bytes": 50 * MIB,
    "uuid": "8f0e2d6a-0000-4000-8000-000000000001",
    "power_limit_w": 700.0,
    "max_sm_mhz": 1980,
    "max_mem_mhz": 2619,
    "sm_mhz": 1755,
    "power_w": 690.0,
    "temp_c": 61,
    "reasons": 0x4,  # sw_power_cap
    "kernels": SM90_KERNELS,
    # NVML GPM's metrics by id, played (no GPU measured them): busy throughout, the tensor pipes
    # issuing about as often as 702 TFLOP/s at 1755 MHz implies of 989.4 at 1830 (74%).
    "gpm": {1: 99.6, 2: 98.1, 3: 12.4, 5: 75.8, 7: 75.8, 10: 31.2},
    # Its live figures while its GEMMs run on constant inputs, whose bits never toggle: less
    # power, so the cap no longer holds the clock (thonking.ai measured an A100 at 8192^3:
    # 295 TFLOP/s on zeros, 258 on random inputs, power-limited). Played, not measured.
    "quiet_data": {"sm_mhz": 1980, "power_w": 560.0, "reasons": 0},
}
H100_PCIE = dict(
    H100_SXM,
    name="NVIDIA H100 PCIe",
    sm_count=114,
    memory_bytes=81008 * MIB,  # torch's total_memory=81008MB on an H100 PCIe
    uuid="8f0e2d6a-0000-4000-8000-000000000002",
    power_limit_w=350.0,
    max_sm_mhz=1755,
    sm_mhz=1620,
    power_w=340.0,
    quiet_data={"sm_mhz": 1755, "power_w": 290.0, "reasons": 0},
)
A100_MIG = {
    "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
    "capability": [8, 0],
    "sm_count": 42,
    "memory_bytes": 40 << 30,  # the 3g.40gb profile's nominal size
    "l2_bytes": 20 * MIB,
    "uuid": "5c1b7e00-0000-4000-8000-00000000000a",
    "mig_parent": {
        "name": "NVIDIA A100-SXM4-80GB",
        "uuid": "5c1b7e00-0000-4000-8000-0000000000ff",
        "power_limit_w": 400.0,
        "max_sm_mhz": 1410,
        "max_mem_mhz": 1593,
    },
    "sm_mhz": 1410,
    "power_w": 250.0,
    "temp_c": 55,
    "reasons": 0,
    "kernels": SM80_KERNELS,
}

# One MIG slice of an H100 SXM (3g.40gb: 60 of its 132 SMs): Hopper's GPM reads the slice's own
# GPU instance through its board's handle (nvmlGpmMigSampleGet). Its metrics played, not measured.
H100_MIG = {
    "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
    "capability": [9, 0],
    "sm_count": 60,
    "memory_bytes": 40 << 30,
    "l2_bytes": 25 * MIB,
    "uuid": "8f0e2d6a-0000-4000-8000-00000000000a",
    "mig_parent": {
        key: H100_SXM[key] for key in ("name", "uuid", "power_limit_w", "max_sm_mhz", "max_mem_mhz")
    },
    **{key: H100_SXM[key] for key in ("sm_mhz", "power_w", "temp_c", "reasons", "kernels")},
    "gpm": {1: 99.1, 2: 97.4, 3: 12.1, 5: 73.9, 7: 73.9, 10: 29.5},
}

# A whole A100 SXM4 80GB (the MIG slice's board): Ampere has no GPM (NVIDIA/DCGM#144).
A100_SXM = {
    "name": "NVIDIA A100-SXM4-80GB",
    "capability": [8, 0],
    "sm_count": 108,
    "memory_bytes": 81920 * MIB,
    "l2_bytes": 40 * MIB,
    "uuid": "5c1b7e00-0000-4000-8000-0000000000ff",
    **{key: A100_MIG["mig_parent"][key] for key in ("power_limit_w", "max_sm_mhz", "max_mem_mhz")},
    # At its 400 W limit on random inputs, its clock held by the cap; on constant ones at its
    # maximum (thonking.ai's A100: 258 TFLOP/s on random inputs, 295 on zeros). Played.
    "sm_mhz": 1234,
    "power_w": 398.0,
    "temp_c": 60,
    "reasons": 0x4,  # sw_power_cap
    "quiet_data": {"sm_mhz": 1410, "power_w": 341.0, "reasons": 0},
    "kernels": SM80_KERNELS,
}

# An AMD Instinct MI300X through ROCm's torch: its architecture as torch's gcnArchName gives it
# ("gfx942:sramecc+:xnack-", from rocminfo on MI300X hosts), 304 CUs and 2100 MHz (AMD's
# datasheet), 192 GB of HBM3 of which torch reports 196288 MiB (a public rocminfo dump of an
# MI300X VF: globalMemoryMiB 196288); 750 W (AMD's MI300X OAM). No kernel names: no public
# hipBLASLt kernel name for these GEMMs is cited here, so the profiler shows none, as the
# stand-in does for a dtype it has no name for. amdsmi's fields (tests/fakes/cuda/amdsmi.py).
MI300X = {
    "name": "AMD Instinct MI300X",
    "market_name": "AMD Instinct MI300X",
    "gcn_arch": "gfx942:sramecc+:xnack-",
    "gfx": 0x942,
    "capability": [9, 4],  # torch's major.minor of gfx942
    "sm_count": 304,
    "cu_count": 304,
    "memory_bytes": 196288 * MIB,
    "l2_bytes": 4 * MIB,  # hipDeviceProp's l2CacheSize: one XCD's 4 MB L2
    "uuid": "1a2b3c4d-0000-4000-8000-000000000300",
    "power_cap_w": 750.0,
    "max_gfx_mhz": 2100,
    "max_mem_mhz": 1300,
    "gfx_mhz": 1300,
    "mem_mhz": 1300,
    "power_w": 740.0,
    "temp_c": 70,
    "sm_mhz": 1300,  # torch.cuda._sleep's clock
    "xcds": 8,  # its compute dies, each with its own clock (amdsmi's current_gfxclks)
    "violations": ("active_ppt_pwr",),  # at its power cap (PVIOL)
    "kernels": {},
}
# ROCm's build whose HIP names every AMD GPU "AMD Radeon Graphics": its gfx942 says what it is.
MI300X_RADEON = dict(MI300X, name="AMD Radeon Graphics")
# torch.version.hip on the played ROCm hosts: a played build, not a real one's string.
PLAYED_HIP = "6.4.0-played"

# Machines to play: a list of physical GPUs (NVML's order) and how the host's NVML behaves.
# TunableOp's played search picks "tunable_winner" (default "Default": cuBLAS's own call won);
# "cupti": false plays a host whose torch profiler cannot trace CUDA kernels.
# A node's GPUs: a GEMM's time on the played device's clock, and a 1 MiB L2, so that a tiny
# test shape rotates over a few operand sets (a graph of 4,096 calls each GPU took 20 s here).
NODE = {"gemm_s": 1e-3, "l2_bytes": 1 * MIB}
MACHINES = {
    # An H100 SXM pod with a recent driver: every NVML field answers.
    "h100": {"driver": "580.65.06", "gpus": [H100_SXM]},
    # A gVisor-like sandbox: NVML lists host PIDs (this process under another number, beside
    # another tenant's) and has no energy counter.
    "gvisor": {
        "driver": "570.124.06",
        "gpus": [H100_SXM],
        "host_pids": True,
        "energy": False,
        "others": [],
    },
    # A PCIe H100, as SkyPilot's plain "H100" can rent on some clouds. Its GEMMs take 10 ms on
    # its played device clock: a window's calls agree however busy the host is (timed on the
    # host's clock, a loaded CI machine spread them past the noisy threshold).
    "h100_pcie": {"driver": "580.65.06", "gpus": [dict(H100_PCIE, gemm_s=1e-2)]},
    # Two GPUs, the second chosen by CUDA_VISIBLE_DEVICES=1: torch's 0 is NVML's 1.
    "two_gpus": {"driver": "580.65.06", "gpus": [H100_SXM, H100_PCIE]},
    # One MIG slice of an A100: its own UUID; power and clocks are its parent's.
    "mig": {"driver": "580.65.06", "gpus": [A100_MIG]},
    # One MIG slice of an H100: GPM answers for its GPU instance, asked through its board.
    "mig_h100": {"driver": "580.65.06", "gpus": [H100_MIG]},
    # A whole A100: every NVML field but GPM answers.
    "a100": {"driver": "580.65.06", "gpus": [A100_SXM]},
    # An H100 with a 1 MiB L2: tiny test shapes rotate over a few operand sets, not 4096.
    "small_l2": {"driver": "580.65.06", "gpus": [dict(H100_SXM, l2_bytes=1 * MIB)]},
    # A node of four H100s measured at once, the last slower: hot, its clock held by a
    # hardware thermal slowdown, its GEMMs taking ten times as long. Slow by construction: each
    # GPU's GEMM takes its `gemm_s` on the played device's clock, which its events read, however
    # busy the host is (a host timing four processes on two cores decides nothing).
    "four_gpus": {
        "driver": "580.65.06",
        "gpus": [
            *(
                dict(H100_SXM, uuid=f"8f0e2d6a-0000-4000-8000-00000000001{i}", **NODE)
                for i in range(3)
            ),
            dict(
                H100_SXM,
                uuid="8f0e2d6a-0000-4000-8000-000000000013",
                sm_mhz=1200,
                temp_c=88,
                reasons=0x40,  # hw_thermal_slowdown
                **(NODE | {"gemm_s": 1e-2}),
            ),
        ],
    },
    # An MI300X host: no NVIDIA driver, so no libnvidia-ml.so.1; amdsmi answers instead.
    "mi300x": {"driver": "6.12.12", "gpus": [MI300X], "nvml": "absent"},
    "mi300x_radeon": {"driver": "6.12.12", "gpus": [MI300X_RADEON], "nvml": "absent"},
    # An MI300X VM guest without the energy counter.
    "mi300x_vm": {
        "driver": "6.12.12",
        "gpus": [MI300X],
        "nvml": "absent",
        "amdsmi_refused": ("amdsmi_get_energy_count",),
    },
    # An H100 in an unprivileged container (most rented pods): NVML answers, GPM is refused
    # (NVML_ERROR_NO_PERMISSION, NVIDIA/DCGM#214).
    "container": {"driver": "580.65.06", "gpus": [H100_SXM], "container": True},
    # A shared GPU: another process computes on it.
    "shared": {
        "driver": "580.65.06",
        "gpus": [H100_SXM],
        "others": [{"pid": 4242, "name": "python3 train.py", "memory": 30 << 30}],
    },
}

HOST_PID_OFFSET = 700_000  # how far a sandbox's host numbers this process

# What a GPU refuses, in the words of torch and the CUDA runtime.
CAPTURING = "CUDA error: operation not permitted when stream is capturing"
NOT_WARMED = (
    "CUDA error: operation not permitted when stream is capturing (played: cuBLAS met this "
    "{op} for the first time inside a capture; its handle and workspace are made on first use, "
    "so warm it up on the capture stream before capturing)"
)
FREED = (
    "CUDA error: an illegal memory access was encountered (played: a CUDA graph replayed over "
    "an input freed since its capture; a graph does not keep its inputs alive)"
)
GEMMS = {"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "_scaled_mm_v2"}
TUNABLE_DTYPES = {
    "float16": "Half",
    "bfloat16": "BFloat16",
    "float32": "float",
    "float64": "double",
}


def machine(name: str | dict | None = None) -> dict:
    """The machine to play: a name of MACHINES, a JSON file of the same form, or the dict; one
    that says `"like": NAME` is that machine with its other keys changed."""
    if not isinstance(name, dict):
        name = name or os.environ.get("PLAYED_MACHINE", "h100")
        if not name.endswith(".json"):
            return MACHINES[name]
        name = json.loads(Path(name).read_text(encoding="utf-8"))
    changes = dict(name)
    like = changes.pop("like", None)
    return {**MACHINES[like], **changes} if like else changes


class State:
    """What the played GPUs and this process have done (shared by torch.cuda and NVML)."""

    def __init__(self, played: dict) -> None:
        self.machine = played
        self.contexts: set[int] = set()  # physical GPUs this process made a context on
        self.current = 0  # torch's index
        self.started = time.perf_counter()
        self.captured_on: list = []  # the stream each CUDA graph was captured on
        self.streams_used: list = []  # streams entered with torch.cuda.stream
        self.capture: CUDAGraph | None = None  # the graph being captured, if one is
        self.warmed: set[tuple[int, str]] = set()  # (stream, op) run outside a capture
        self.unsynced: list[Event] = []  # events recorded since the last synchronise
        # A GPU with a played `gemm_s`: its device's clock, which its events read (seconds).
        self.device_s: dict[int, float] = {}
        # ...and when, on the host's clock, its work is done: each op starts when both the
        # device is free and the host has launched it (_host_waits_for_device).
        self.busy_until: dict[int, float] = {}
        self.fast_accum: list[bool] = []  # use_fast_accum of each float8 matmul
        # The physical GPUs whose last GEMM ran on constant inputs (their "quiet_data" figures).
        self.quiet: set[int] = set()
        # ...and those whose last GEMM ran on the CUDA cores, not the tensor cores (float32 at
        # "highest" precision, float64): GPM reads their tensor pipes idle.
        self.simt: set[int] = set()
        self.memory = {"in_use": 0, "peak": 0, "blocks": {}}
        self.tunable = {
            "enabled": False,
            "tuning": False,
            "file": "tunableop_results.csv",
            "algo_count": 8,  # torch 2.15's default (PYTORCH_TUNABLEOP_CUBLASLT_...)
            "results": {},  # (op, params) -> (solution, ms), as get_results() lists them
        }
        self.profiling: dict | None = None  # a profiler's window: its activities, start, events
        # CUPTI, once a profiler traced CUDA: kineto leaves it subscribed for the rest of the
        # process unless TEARDOWN_CUPTI=1 (every launch after it pays for it, pytorch#144455);
        # and the timing events recorded while it was.
        self.cupti = False
        self.timed_under_cupti = 0
        self.mode = None

    def visible(self) -> list[int]:
        """Physical indices torch sees, in its order (CUDA_VISIBLE_DEVICES). ROCm's runtime
        applies ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES (else CUDA_VISIBLE_DEVICES)
        to what that left. "torch_sees": the GPUs a container's device files open, where given."""
        every = list(self.machine.get("torch_sees", range(len(self.machine["gpus"]))))
        names = ["CUDA_VISIBLE_DEVICES"]
        if any("gcn_arch" in g for g in self.machine["gpus"]):  # ROCm's
            hip = os.environ.get("HIP_VISIBLE_DEVICES") is not None
            names = ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES" if hip else names[0]]
        for name in names:
            chosen = os.environ.get(name)
            if chosen is not None:
                picked = [int(i) for i in chosen.split(",") if i.strip().isdigit()]
                every = [every[i] for i in picked if i < len(every)]
        return every

    def total_memory(self) -> int:
        return gpu(self.visible()[self.current])["memory_bytes"]


state: State | None = None


def gpu(physical: int) -> dict:
    return state.machine["gpus"][physical]


# ---- the device: every op on a played tensor ---------------------------------------------------


def _tensors(values: object) -> list:
    import torch
    from torch.utils._pytree import tree_leaves

    if isinstance(values, torch.Tensor):
        return [values]
    return [v for v in tree_leaves(values) if isinstance(v, torch.Tensor)]


def _address(tensor: object) -> int:
    return tensor.untyped_storage().data_ptr()


def _op(func: object) -> str:
    return func.overloadpacket.__name__


def _arguments(func: object, args: tuple, kwargs: dict) -> dict:
    """An op's arguments by the names of its schema."""
    names = [a.name for a in func._schema.arguments]
    return dict(zip(names, args, strict=False)) | kwargs


def _check_scaled_mm(a: object, b: object, scales: list) -> None:
    """What cuBLASLt's float8 matmul requires of its operands, as torch checks it on CUDA."""
    if a.stride(-1) != 1:
        raise RuntimeError("mat_a must be row-major (contiguous) for a float8 matmul on CUDA")
    if b.stride(0) != 1:
        raise RuntimeError("mat_b must be column-major for a float8 matmul on CUDA")
    if a.shape[1] % 16 or b.shape[0] % 16 or b.shape[1] % 16:
        raise RuntimeError(
            f"mat1 shape ({a.shape[0]}x{a.shape[1]}) and mat2 shape ({b.shape[0]}x{b.shape[1]})"
            " must be divisible by 16 for a float8 matmul on CUDA"
        )
    m, n = a.shape[0], b.shape[1]
    for scale, rows in zip(scales, ((m, 1), (1, n)), strict=True):
        if scale.dtype.is_floating_point and scale.numel() == 1:
            continue  # tensor-wise
        if tuple(scale.shape) != rows:
            raise RuntimeError(
                f"a scale of shape {tuple(scale.shape)}: CUDA takes one float32 scale per tensor "
                f"or one per row of A and column of B ({m}x1 and 1x{n})"
            )


def is_rocm() -> bool:
    """Whether the played GPUs are AMD's, reached through ROCm's torch."""
    return any("gcn_arch" in g for g in state.machine["gpus"])


# A float8 matmul of the other vendor's float8 refused, as hipBLASLt on gfx942 has no OCP
# float8 kernel (torch's testing/_internal/common_cuda.py: "gfx120 and gfx95 only support
# OCP"; triton's hipBLASLt test skips float8_e4m3fn unless CDNA4) and CUDA has no fnuz one.
# The words are the stand-in's own: a real refusal's text was not found to quote.
WRONG_FLOAT8 = "played: {where} has no {dtype} matmul (its float8 is {wanted})"


# The float8 (A, B) pairs cuBLASLt multiplies (cublasLtMatmul's FP8 type table, compute
# capability 8.9 and newer: e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3; not e5m2 x e5m2), which torch
# checks before it calls cuBLASLt (aten/src/ATen/native/cuda/Blas.cpp), refusing the pair it
# lacks in its own words (tests/test_standin_torch.py finds them in the installed torch).
CUBLASLT_FLOAT8_PAIRS = {
    ("float8_e4m3fn", "float8_e4m3fn"),
    ("float8_e4m3fn", "float8_e5m2"),
    ("float8_e5m2", "float8_e4m3fn"),
}
TWO_E5M2 = "Multiplication of two Float8_e5m2 matrices is not supported"


def _check_float8_pair(a: object, b: object) -> None:
    """Refuse a float8 pair CUDA's cuBLASLt has no kernel for, as torch does."""
    pair = tuple(str(t.dtype).removeprefix("torch.") for t in (a, b))
    if is_rocm() or pair in CUBLASLT_FLOAT8_PAIRS:
        return
    if pair == ("float8_e5m2", "float8_e5m2"):
        raise RuntimeError(TWO_E5M2)
    raise RuntimeError(f"played: cuBLASLt has no {pair[0]} x {pair[1]} matmul")


def _check_float8_kind(dtype: object) -> None:
    """Refuse the other vendor's float8 family: OCP's (e4m3fn, e5m2) on gfx94x, the fnuz
    variants anywhere else."""
    name = str(dtype).removeprefix("torch.")
    arch = gpu(state.visible()[state.current]).get("gcn_arch", "")
    fnuz_here = arch.startswith("gfx94")
    if name.endswith("fnuz") != fnuz_here:
        where = f"{arch.split(':')[0]} (hipBLASLt)" if arch else "CUDA (cuBLASLt)"
        wanted = "float8_e4m3fnuz" if fnuz_here else "float8_e4m3fn"
        raise RuntimeError(WRONG_FLOAT8.format(where=where, dtype=name, wanted=wanted))


def _fnuz_scaled_mm(func: object, args: tuple, kwargs: dict):
    """hipBLASLt's fnuz float8 GEMM, played: this CPU's torch has no fnuz scaled matmul, so the
    product of the operands as float32 (hipBLASLt accumulates in float32), scaled, in C's dtype.
    None for any other op."""
    import torch

    if not _op(func).startswith("_scaled_mm"):
        return None
    named = _arguments(func, args, kwargs)
    a, b = named.get("self", named.get("mat_a")), named.get("mat2", named.get("mat_b"))
    if a.dtype != torch.float8_e4m3fnuz:
        return None
    scales = [named["scale_a"], named["scale_b"]]
    scales = [s[0] if isinstance(s, list | tuple) else s for s in scales]
    out = (a.float() @ b.float()) * scales[0] * scales[1]
    return out.to(named.get("out_dtype") or torch.bfloat16)


def _before(func: object, args: tuple, kwargs: dict) -> None:
    """Refuse what a GPU refuses before running an op."""
    op = _op(func)
    if state.capture is not None:
        if op == "_local_scalar_dense":  # .item(): a host read of a value not computed yet
            raise RuntimeError(CAPTURING)
        if op in GEMMS and (id(current_stream()), op) not in state.warmed:
            raise RuntimeError(NOT_WARMED.format(op=op))
    if op.startswith("_scaled_mm"):
        named = _arguments(func, args, kwargs)
        a, b = named.get("self", named.get("mat_a")), named.get("mat2", named.get("mat_b"))
        _check_float8_kind(a.dtype)
        _check_float8_kind(b.dtype)
        _check_float8_pair(a, b)
        scales = [named["scale_a"], named["scale_b"]]
        scales = [s[0] if isinstance(s, list | tuple) else s for s in scales]
        _check_scaled_mm(a, b, scales)
        state.fast_accum.append(bool(named.get("use_fast_accum", False)))


def _device_clock() -> float | None:
    """The current GPU's device clock, where the machine plays one (its `gemm_s`), else None:
    its events read the host's clock, as the other played GPUs' do."""
    physical = state.visible()[state.current]
    if "gemm_s" not in gpu(physical):
        return None
    return state.device_s.setdefault(physical, 0.0)


def _matrices(args: tuple) -> list:
    """The matrices a GEMM's arguments hold."""
    return [t for t in _tensors(list(args)) if t.dim() >= 2]


def _constant(args: tuple) -> bool:
    """Whether every matrix a GEMM reads holds one value throughout (bits that never toggle)."""
    import torch

    mats = _matrices(args)
    plain = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    if not mats or any(t.dtype not in plain for t in mats):
        return False
    return all(bool((t == t.reshape(-1)[0]).all()) for t in mats)


def _on_cuda_cores(args: tuple) -> bool:
    """Whether cuBLAS runs this GEMM on the CUDA cores: float64, or float32 where torch's
    float32 matmul precision is "highest" (no TF32)."""
    import torch

    mats = _matrices(args)
    if any(t.dtype == torch.float64 for t in mats):
        return True
    highest = torch.get_float32_matmul_precision() == "highest"
    return highest and any(t.dtype == torch.float32 for t in mats)


def _on_device(func: object, started: int, args: tuple = ()) -> None:
    """An op's time on a played device clock: a GEMM its GPU's `gemm_s`, any other op what it
    took here. Host time between ops is not the device's: a busy host slows no played GEMM.
    A GPU that plays the data's power ("quiet_data") notes whether its GEMM's inputs were
    constant: NVML then reads its quiet figures, and its GEMM runs at that clock."""
    gemm, device = _op(func) in GEMMS, _device_clock()
    if not gemm and device is None:
        return
    physical = state.visible()[state.current]
    played = gpu(physical)
    quiet = gemm and "quiet_data" in played and _constant(args)
    if gemm and "quiet_data" in played:
        (state.quiet.add if quiet else state.quiet.discard)(physical)
    if gemm:
        (state.simt.add if _on_cuda_cores(args) else state.simt.discard)(physical)
    if device is None:
        return
    gemm_s = played.get("gemm_s", 0.0)
    if quiet:  # the same cycles at the quiet clock
        gemm_s *= played["sm_mhz"] / played["quiet_data"]["sm_mhz"]
    took = gemm_s if _op(func) in GEMMS else (time.perf_counter_ns() - started) / 1e9
    state.device_s[physical] += took
    launched = started / 1e9
    state.busy_until[physical] = max(state.busy_until.get(physical, launched), launched) + took


def _allocate(outputs: list) -> None:
    """Account the new blocks of an op's outputs against the played GPU's memory."""
    import torch

    memory = state.memory
    for tensor in outputs:
        storage = tensor.untyped_storage()
        address, size = storage.data_ptr(), storage.nbytes()
        if address == 0 or address in memory["blocks"]:
            continue
        total = state.total_memory()
        if memory["in_use"] + size > total:
            free = total - memory["in_use"]
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {size / 2**30:.2f} GiB. GPU "
                f"{state.current} has a total capacity of {total / 2**30:.2f} GiB of which "
                f"{free / 2**30:.2f} GiB is free. (played)"
            )
        memory["blocks"][address] = size
        memory["in_use"] += size
        memory["peak"] = max(memory["peak"], memory["in_use"])
        weakref.finalize(storage, _free, address, size)


def _free(address: int, size: int) -> None:
    if state is not None and state.memory["blocks"].pop(address, None) is not None:
        state.memory["in_use"] -= size


def _tune(func: object, args: tuple) -> None:
    """TunableOp on a GEMM: a shape met for the first time while tuning is searched (the played
    winner recorded, and appended to the results file as torch 2.15 does)."""
    tunable = state.tunable
    if not (tunable["enabled"] and _op(func) in GEMMS):
        return
    a, b = args[-2:] if _op(func) in ("addmm", "baddbmm") else args[:2]
    name = TUNABLE_DTYPES.get(str(a.dtype).removeprefix("torch."), str(a.dtype))
    layout = ("T" if a.stride(-1) != 1 else "N") + ("T" if b.stride(-1) != 1 else "N")
    key = (f"GemmTunableOp_{name}_{layout}", f"{layout.lower()}_{b.shape[-1]}_{a.shape[-2]}")
    if not tunable["tuning"] or key in tunable["results"]:
        return
    winner = state.machine.get("tunable_winner", "Default")
    tunable["results"][key] = (winner, 0.01)
    if tunable["file"]:
        with open(tunable["file"], "a", encoding="utf-8") as results:
            results.write(f"{key[0]},{key[1]},{winner},0.01\n")


# ---- torch's profiler, over played C++ hooks ---------------------------------------------------


def _kernel_name(func: object, args: tuple) -> str | None:
    """What cuBLAS names the kernel of a GEMM on the played GPU (None: no name played)."""
    import torch

    op = _op(func)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if op.startswith("_scaled_mm"):  # named after its A's float8, as torch's dtype names it
        dtype = str(tensors[0].dtype).removeprefix("torch.")
    elif tensors and tensors[-1].dtype == torch.float32:  # TF32 where torch allows it
        dtype = "float32" if torch.get_float32_matmul_precision() == "highest" else "tf32"
    else:
        dtype = str(tensors[-1].dtype).removeprefix("torch.") if tensors else ""
    return gpu(state.visible()[state.current]).get("kernels", {}).get(dtype)


def _profile(func: object, args: tuple, started: int) -> None:
    """A GEMM run while a profiler records CUDA activity: a CUDA kernel event, as CUPTI gives
    one, with the played GPU's name for it; others leave none."""
    window = state.profiling
    if window is None:
        return
    from torch.profiler import ProfilerActivity

    if ProfilerActivity.CUDA not in window["activities"]:
        return
    name = _kernel_name(func, args) if _op(func) in GEMMS else None
    if name is not None:
        window["events"].append(
            KinetoEvent(name, started, time.perf_counter_ns(), len(window["events"]) + 1)
        )


class KinetoEvent:
    """One CUDA kernel as torch._C._autograd._KinetoEvent gives it to torch's profiler: every
    method it has (tests/test_standin_torch.py holds the two to the same names)."""

    def __init__(self, name: str, start_ns: int, end_ns: int, correlation: int) -> None:
        self._name, self._start, self._end, self._correlation = name, start_ns, end_ns, correlation

    def name(self):
        return self._name

    def start_ns(self):
        return self._start

    def end_ns(self):
        return self._end

    def duration_ns(self):
        return self._end - self._start

    def device_type(self):
        from torch.autograd import DeviceType

        return DeviceType.CUDA

    def device_index(self):
        return state.current

    def device_resource_id(self):
        return 7  # the stream

    def correlation_id(self):
        return self._correlation

    def linked_correlation_id(self):
        return self._correlation  # the launch that queued it (not profiled: no CPU activity)

    def external_id(self):
        return self._correlation

    def activity_type(self):
        return "kernel"

    def is_async(self):
        return False

    def is_hidden_event(self):
        return False

    def start_thread_id(self):
        return 0

    def end_thread_id(self):
        return 0

    def fwd_thread_id(self):
        return 0

    def overload_name(self):
        return ""

    def shapes(self):
        return []

    def dtypes(self):
        return []

    def concrete_inputs(self):
        return []

    def kwinputs(self):
        return {}

    def stack(self):
        return []

    def scope(self):
        return 0

    def sequence_nr(self):
        return -1

    def flops(self):
        return 0

    def nbytes(self):
        return 0

    def is_user_annotation(self):
        return False

    def is_python_function(self):
        return False

    def extra_meta(self):
        return {}

    def typed_metadata(self):
        return {}

    def metadata_json(self):
        return ""

    def flow_id(self):
        return 0

    def flow_type(self):
        return 0

    def flow_start(self):
        return False

    def structured_input_shapes(self):
        return []

    def structured_input_strides(self):
        return []

    def python_id(self):
        return -1

    def python_parent_id(self):
        return -1

    def python_module_id(self):
        return -1

    def cuda_elapsed_us(self):
        return 0  # a CPU event's legacy CUDA time: a kernel event has none

    def privateuse1_elapsed_us(self):
        return 0


class ProfilerResult:
    """What torch._C._autograd._disable_profiler returns, as torch's profiler reads it."""

    def __init__(self, events: list, trace_start_ns: int) -> None:
        self._events, self._start = events, trace_start_ns

    def events(self):
        return list(self._events)

    def trace_start_ns(self):
        return self._start


def _profiler_hooks() -> dict:
    """torch.autograd's profiler hooks (C++ in torch), played: torch.autograd.profiler's own
    Python calls them by these names."""

    def _supported_activities():
        from torch.profiler import ProfilerActivity

        if state.machine.get("cupti") is False:  # a host whose torch finds no CUPTI
            return {ProfilerActivity.CPU}
        return {ProfilerActivity.CPU, ProfilerActivity.CUDA}  # CUPTI, as on a GPU host

    def _prepare_profiler(config, activities, activity_filter={}, profiler_extensions={}):  # noqa: B006
        pass  # torch's own signature and defaults; nothing to prepare on a played GPU

    def _enable_profiler(config, activities, scopes=set()):  # noqa: B006
        if state.profiling is not None:
            raise RuntimeError("played: a profiler is already recording in this process")
        from torch.profiler import ProfilerActivity

        if ProfilerActivity.CUDA in set(activities):
            state.cupti = True
        state.profiling = {
            "activities": set(activities),
            "start": time.perf_counter_ns(),
            "events": [],
        }

    def _disable_profiler():
        window, state.profiling = state.profiling, None
        if window is None:
            raise RuntimeError("played: no profiler is recording in this process")
        if os.environ.get("TEARDOWN_CUPTI") == "1":
            state.cupti = False
        return ProfilerResult(window["events"], window["start"])

    return {
        "_supported_activities": _supported_activities,
        "_prepare_profiler": _prepare_profiler,
        "_enable_profiler": _enable_profiler,
        "_disable_profiler": _disable_profiler,
    }


def _device_mode():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Device(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # torch's documented opt-out of wrapping __torch_dispatch__ in dynamo.disable, whose
            # first call imports the compiler (2-4 s in every played process). The lab compiles
            # nothing, and a real GPU has no dispatch mode to wrap.
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            _before(func, args, kwargs)
            _tune(func, args)
            started = time.perf_counter_ns()
            out = _fnuz_scaled_mm(func, args, kwargs)
            out = func(*args, **kwargs) if out is None else out
            _on_device(func, started, args)
            _profile(func, args, started)
            outputs = _tensors(out)
            _allocate(outputs)
            if state.capture is not None:
                state.capture._record(func, args, kwargs, outputs)
            else:
                state.warmed.add((id(current_stream()), _op(func)))
            return out

    return Device()


# ---- torch.cuda, played ---------------------------------------------------------------------


def _not_capturing() -> None:
    if state.capture is not None:
        raise RuntimeError(CAPTURING)


class Event:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False, external=False):
        self.timing, self.at, self.done = enable_timing, None, False

    def record(self, stream=None) -> None:
        if self.timing and state.cupti:
            state.timed_under_cupti += 1
        device = _device_clock()
        self.at, self.done = time.perf_counter() if device is None else device, False
        state.unsynced.append(self)

    def synchronize(self) -> None:
        _not_capturing()
        if self.at is not None:
            _host_waits_for_device()
        self.done = self.at is not None

    def query(self):
        # The work before it ran synchronously on the CPU: it is complete once asked.
        self.done = self.at is not None
        return True

    def elapsed_time(self, end_event: "Event"):
        # torch's CUDAEvent::elapsed_time checks, in its order and words.
        if not (self.timing and end_event.timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.at is None or end_event.at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        if not (self.done and end_event.done):
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        return (end_event.at - self.at) * 1e3  # milliseconds, as torch's


def _host_waits_for_device() -> None:
    """A synchronise returns no sooner than the GPU finished: where the machine plays a device
    clock, the host waits until the played device's work is done on the host's clock, as a real
    host blocks there. (The played GEMMs run here at the host's own pace, faster or slower than
    the GPU's; an event's synchronise waits for all of it, never less than a real one.)"""
    if _device_clock() is None:
        return
    behind = state.busy_until.get(state.visible()[state.current], 0.0) - time.perf_counter()
    if behind > 0:
        time.sleep(behind)


def _synchronize_all() -> None:
    _not_capturing()
    _host_waits_for_device()
    for event in state.unsynced:
        event.done = True
    state.unsynced.clear()


class Stream:
    def __init__(self, device=None, priority=0, **kwargs) -> None:
        pass

    def wait_stream(self, stream) -> None:
        pass

    def synchronize(self) -> None:
        _synchronize_all()

    def query(self) -> bool:
        return True


DEFAULT_STREAM = Stream()
_current_stream = [DEFAULT_STREAM]


def current_stream(device=None) -> Stream:
    return _current_stream[-1]


@contextlib.contextmanager
def stream(stream):
    state.streams_used.append(stream)
    _current_stream.append(stream)
    try:
        yield
    finally:
        _current_stream.pop()


def synchronize(device=None) -> None:
    _synchronize_all()
    state.contexts.add(state.visible()[state.current])


class CUDAGraph:
    """The ops captured, replayed in order. Its own outputs live in its pool (kept, as a real
    graph keeps them); its inputs are only their memory's address, held by a weak reference."""

    def __init__(self, keep_graph=False) -> None:
        self.ops: list[tuple] = []
        self.pool: dict[int, object] = {}  # address -> a tensor the graph allocated
        self.inputs: set[int] = set()  # addresses of the memory it reads and does not own

    def _record(self, func: object, args: tuple, kwargs: dict, outputs: list) -> None:
        args, kwargs = self._spec(args), self._spec(kwargs)
        # An output in an input's memory (a view of it) is that input's: not the graph's.
        kept = [t if _address(t) not in self.inputs else None for t in outputs]
        for tensor in kept:
            if tensor is not None:
                self.pool.setdefault(_address(tensor), tensor)
        self.ops.append((func, args, kwargs, kept))

    def _spec(self, values: object) -> object:
        import torch
        from torch.utils._pytree import tree_map

        def spec(value: object) -> object:
            if not isinstance(value, torch.Tensor):
                return value
            storage = value.untyped_storage()
            if storage.data_ptr() in self.pool:
                return value  # the graph's own memory
            self.inputs.add(storage.data_ptr())
            where = (value.dtype, value.shape, value.stride(), value.storage_offset())
            return Input(weakref.ref(storage), *where)

        return tree_map(spec, values)

    def replay(self) -> None:
        import torch

        # A replay launches what was captured: it allocates nothing and meets no cuBLAS call
        # for the first time, so the device's dispatch mode is not in it.
        with torch._C._DisableTorchDispatch():
            for func, args, kwargs, outputs in self.ops:
                named = dict(zip(kwargs, _rebuilt(kwargs.values()), strict=True))
                started = time.perf_counter_ns()
                inputs = _rebuilt(args)
                out = func(*inputs, **named)
                _on_device(func, started, tuple(inputs))  # a replayed GEMM takes its time too
                for kept, new in zip(outputs, _tensors(out), strict=False):
                    if kept is not None and kept.data_ptr() != new.data_ptr():
                        kept.copy_(new)  # into the graph's memory, where a replay writes


def _rebuilt(values: object) -> list:
    """Captured arguments with each input's tensor made again over its memory (one level of
    lists deep, as aten's arguments are)."""
    out = []
    for value in values:
        if isinstance(value, Input):
            value = value.tensor()
        elif isinstance(value, list | tuple):
            value = [v.tensor() if isinstance(v, Input) else v for v in value]
        out.append(value)
    return out


class Input:
    """A captured input: where its memory was, not the memory itself."""

    def __init__(self, storage: weakref.ref, dtype, shape, stride, offset) -> None:
        self.storage, self.dtype, self.shape = storage, dtype, shape
        self.stride, self.offset = stride, offset

    def tensor(self):
        import torch

        storage = self.storage()
        if storage is None:
            raise RuntimeError(FREED)
        return torch.empty(0, dtype=self.dtype).set_(storage, self.offset, self.shape, self.stride)


class graph:
    def __init__(
        self,
        cuda_graph,
        pool=None,
        stream=None,
        capture_error_mode="global",
        enable_annotations=False,
        annotation_config=None,
        check_input_liveness=False,
    ) -> None:
        self.cuda_graph, self.stream = cuda_graph, stream or Stream()

    def __enter__(self) -> None:
        synchronize()  # as torch's: everything queued before is done first
        state.captured_on.append(self.stream)
        self.context = stream(self.stream)
        self.context.__enter__()
        state.capture = self.cuda_graph

    def __exit__(self, *args) -> None:
        state.capture = None
        self.context.__exit__(*args)


# TunableOp: torch.cuda.tunable is torch's own module; these are the C++ hooks it calls.
def _tunable_hooks() -> dict:
    t = state.tunable

    def set_filename(filename, insert_device_ordinal=False):
        t["file"] = filename

    def get_results():
        return [(op, params, *won) for (op, params), won in t["results"].items()]

    return {
        "_cuda_tunableop_enable": lambda val: t.update(enabled=bool(val)),
        "_cuda_tunableop_is_enabled": lambda: t["enabled"],
        "_cuda_tunableop_tuning_enable": lambda val: t.update(tuning=bool(val)),
        "_cuda_tunableop_tuning_is_enabled": lambda: t["tuning"],
        "_cuda_tunableop_set_filename": set_filename,
        "_cuda_tunableop_get_filename": lambda: t["file"],
        "_cuda_tunableop_get_results": get_results,
        "_cuda_tunableop_set_cublaslt_requested_algo_count": lambda n: t.update(
            algo_count=max(1, int(n))
        ),
        "_cuda_tunableop_get_cublaslt_requested_algo_count": lambda: t["algo_count"],
    }


def pci_address(physical: int) -> tuple[int, int, int]:
    """A played GPU's PCI domain, bus and device: its "pci", else one bus a GPU from 0x11."""
    return tuple(gpu(physical).get("pci", (0, 0x11 + 0x10 * physical, 0)))


def _props(index: int):
    from types import SimpleNamespace

    physical = state.visible()[index]
    g = gpu(physical)
    rocm = {"gcnArchName": g["gcn_arch"]} if "gcn_arch" in g else {}  # HIP's only
    domain, bus, device = pci_address(physical)
    return SimpleNamespace(
        **rocm,
        pci_domain_id=domain,
        pci_bus_id=bus,
        pci_device_id=device,
        name=g["name"],
        major=g["capability"][0],
        minor=g["capability"][1],
        multi_processor_count=g["sm_count"],
        total_memory=g["memory_bytes"],
        L2_cache_size=g["l2_bytes"],
        uuid=g["uuid"],
    )


def _index(device) -> int:
    if device is None:
        return state.current
    if isinstance(device, int):
        return device
    text = str(device)
    return int(text.split(":")[1]) if ":" in text else state.current


def set_device(device) -> None:
    index = _index(device)
    if index >= len(state.visible()):
        raise RuntimeError(f"CUDA error: invalid device ordinal {index}")
    broken = gpu(state.visible()[index]).get("broken")
    if broken:  # a GPU the driver lists but cannot make a context on (an ECC fault, say)
        raise RuntimeError(f"CUDA error: {broken}")
    state.current = index
    state.contexts.add(state.visible()[index])


def _sleep(cycles):
    seconds = cycles / (gpu(state.visible()[state.current])["sm_mhz"] * 1e6)
    if _device_clock() is not None:
        state.device_s[state.visible()[state.current]] += seconds
    time.sleep(seconds)


def reset_peak_memory_stats(device=None) -> None:
    state.memory["peak"] = state.memory["in_use"]


def torch_cuda() -> dict:
    """The attributes of torch.cuda the stand-in replaces (each conforms to torch's own)."""
    return {
        "is_available": lambda: bool(state.visible()),
        "device_count": lambda: len(state.visible()),
        "get_device_properties": lambda device=None: _props(_index(device)),
        "get_device_name": lambda device=None: _props(_index(device)).name,
        "get_device_capability": lambda device=None: (
            _props(_index(device)).major,
            _props(_index(device)).minor,
        ),
        "set_device": set_device,
        "current_device": lambda: state.current,
        "init": lambda: None,
        "is_initialized": lambda: True,
        "synchronize": synchronize,
        "Event": Event,
        "Stream": Stream,
        "current_stream": current_stream,
        "stream": stream,
        "CUDAGraph": CUDAGraph,
        "graph": graph,
        "mem_get_info": lambda device=None: (
            state.total_memory() - state.memory["in_use"],
            state.total_memory(),
        ),
        "memory_allocated": lambda device=None: state.memory["in_use"],
        "max_memory_allocated": lambda device=None: state.memory["peak"],
        "reset_peak_memory_stats": reset_peak_memory_stats,
        "empty_cache": lambda: None,
        "_sleep": _sleep,
    }


def begin(name: str | dict | None = None) -> State:
    """Start playing a machine (no import of torch or roofline: cheap in every process)."""
    global state
    state = State(machine(name))
    return state


def play_torch(torch, setattr_=setattr) -> None:
    for attribute, value in torch_cuda().items():
        setattr_(torch.cuda, attribute, value)
    for attribute, value in _tunable_hooks().items():
        setattr_(torch._C, attribute, value)
    if is_rocm():  # ROCm's torch: a HIP build, no CUDA version
        setattr_(torch.version, "hip", PLAYED_HIP)
        setattr_(torch.version, "cuda", None)
    import torch.autograd.profiler  # imported by torch itself; named here for what is set

    for attribute, value in _profiler_hooks().items():  # where torch's profiler looks them up
        setattr_(torch.autograd.profiler, attribute, value)
        setattr_(torch.autograd, attribute, value)
    said = state.machine.get("float8_raises")
    if said:  # a library that refuses float8 here (cuBLASLt, a scaled-matmul API that differs)

        def refuses(*args, **kwargs):
            raise RuntimeError(said)

        setattr_(torch.nn.functional, "scaled_mm", refuses)
        setattr_(torch, "_scaled_mm", refuses)
    state.mode = _device_mode()
    state.mode.__enter__()


def play_kinds(kinds, setattr_=setattr) -> None:
    # The one line of the seam only a real GPU runs: tensors on the device.
    setattr_(kinds.Cuda, "tensors", lambda self: "cpu")


def install(name: str | dict | None = None, setattr_=setattr) -> State:
    """Play the machine in this process: torch.cuda's attributes and roofline.device.kinds' tensor
    placement replaced through `setattr_` (pytest's monkeypatch.setattr undoes them); the
    device's dispatch mode entered until `uninstall()`."""
    return install_stand_in(sys.modules[__name__], name, setattr_)


def uninstall() -> None:
    uninstall_stand_in(sys.modules[__name__])


def install_stand_in(played, name: object, setattr_=setattr) -> object:
    """A stand-in module (this one, or played_mps) installed in this process: its state begun,
    torch and roofline.device.kinds played; one played before in this process replaced."""
    import torch

    import roofline.device.kinds

    uninstall_stand_in(played)
    begun = played.begin(name)
    played.play_torch(torch, setattr_)
    played.play_kinds(roofline.device.kinds, setattr_)
    return begun


def uninstall_stand_in(played) -> None:
    if played.state is not None and played.state.mode is not None:
        played.state.mode.__exit__(None, None, None)
    played.state = None
