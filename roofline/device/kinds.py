"""What a kind of device does, in one place: where its tensors live, how a run of calls is timed
and synchronised, graph capture, TunableOp, its properties, the telemetry of a timed window,
and the kernel a call ran (roofline.device.kernel_ran). Measuring code reaches torch.cuda and NVML only through here, so a stand-in for both
(tests/fakes/cuda) plays a GPU end to end on a machine without one.

    cpu   host clock; the kernel from MKL's or oneDNN's verbose output (numpy: threadpoolctl)
    cuda  CUDA events queued back to back, CUDA graphs, TunableOp, NVML telemetry; the kernel
          from torch's profiler
    rocm  an AMD GPU through ROCm's torch, which keeps the torch.cuda API (events, graphs,
          TunableOp over rocBLAS's and hipBLASLt's solutions, the profiler); amdsmi telemetry
    mps   Metal events (Apple silicon); no kernel name

torch is imported when a kind is made, never at import: the probe reads no torch."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from roofline.device import amd_telemetry, gpm, kernel_ran, telemetry
from roofline.device.description import GpuInfo
from roofline.device.timing import EventTimer, HostTimer, Timer, Work


class Unavailable(Exception):
    """This device cannot do what was asked (graphs, TunableOp): the reason is the message."""


Monitor = Callable[[], contextlib.AbstractContextManager]


class Replay:
    """A CUDA graph's replay as a timed call. It holds the captured call, and so the tensors
    the graph reads: a graph does not own its inputs, and replaying over freed memory reads
    whatever the allocator put there since (or faults)."""

    def __init__(self, graph: Any, captured: Work) -> None:
        self.graph, self.captured = graph, captured

    def __call__(self, _: int) -> None:
        self.graph.replay()


class Kind:
    """The CPU, and what every kind does unless it says otherwise."""

    name = "cpu"
    graphs = False  # whether a short call is worth replaying from a graph
    reference: str | None = None  # where a product's float64 check runs: None, on the device
    # Whether the kernel is learnt from the check's own call: a CPU library names the same
    # kernel on every call, and an 8192^3 call is seconds. A GPU's first call may autotune
    # (TunableOp, cuBLASLt's heuristics), so its kernel is learnt after the window.
    kernel_at_check = True
    # A sample holds at least this many seconds of calls (0: one call a sample), where each
    # timed sample costs the device a pause of its own (Mps).
    sample_at_least_s = 0.0

    def tensors(self) -> str:
        """The torch device its tensors live on."""
        return "cpu"

    def timer(self) -> Timer:
        return HostTimer()

    def synchronize(self) -> None:
        """Wait for queued work (CPU work is synchronous)."""

    def graph(self, call: Work, sets: int) -> Work:
        raise Unavailable(f"{self.name} has no CUDA graphs")

    def tunable(self, enabled: bool, results: Path) -> contextlib.AbstractContextManager:
        raise Unavailable(f"{self.name} has no TunableOp")

    def tuned_solutions(self) -> list[tuple[str, str]]:
        return []

    def monitor(self) -> Monitor | None:
        """Telemetry of a timed window, or None where there is none."""
        return None

    def kernel(self, call: Callable[[], object], backend: str = "torch") -> str | None:
        """The kernel one more call of `call` runs, as its library names it (the call is not
        timed): torch's from MKL's or oneDNN's verbose output, numpy's BLAS from threadpoolctl;
        None where the library cannot say (a function of your own). Raises where it should
        have said and did not (roofline.device.kernel_ran.NotSeen)."""
        if backend == "torch":
            return kernel_ran.cpu_torch(call)
        if backend == "numpy":
            return kernel_ran.numpy_kernel(call)
        return None


class Mps(Kind):
    """Apple silicon's GPU: Metal events; no telemetry API, unified memory."""

    name = "mps"
    # MPS has no float64 ("Cannot convert a MPS Tensor to float64 dtype", pytorch#122602): the
    # check's rows are copied to the CPU, and checked there.
    reference = "cpu"
    # torch.mps.Event.record commits the command buffer (MPSEvent.mm, recordLocked with
    # syncEvent), and an event's time is when the host hears of it: a sample per call would hold
    # a commit and the host's encoding of the next call. Several calls a sample hold one.
    sample_at_least_s = 0.005

    def __init__(self) -> None:
        import torch

        self.device = torch.mps

    def tensors(self) -> str:  # pragma: no cover -- a real Apple GPU only
        return "mps"

    def timer(self) -> Timer:
        return EventTimer(self.device, "mps events, calls back to back")

    def synchronize(self) -> None:
        self.device.synchronize()

    def kernel(self, call: Callable[[], object], backend: str = "torch") -> str | None:
        """Metal names no kernel to torch: None."""
        return None


class Cuda(Kind):
    """One NVIDIA GPU, by torch's index (what CUDA_VISIBLE_DEVICES left) and its UUID (what
    NVML knows it by)."""

    name = "cuda"
    graphs = True
    kernel_at_check = False
    blas = "cuBLASLt"  # the library its GEMMs go through

    def __init__(self, index: int = 0, uuid: str | None = None) -> None:
        import torch

        self.index, self.cuda = index, torch.cuda
        self.handle, self.telemetry_error = None, ""
        try:
            self.handle = self.open_telemetry(uuid)
        except Exception as err:  # measure anyway; the rows then say telemetry is missing
            self.telemetry_error = f"no {self.telemetry_library} telemetry: {err}"
        before = self._pids()
        self.cuda.set_device(index)
        torch.empty(1, device=self.tensors())  # this process's context, so NVML lists it
        self.synchronize()
        after = self._pids()
        # NVML lists host PIDs in many containers (gVisor, older Docker): this process is
        # then the one that appeared when it made its context, not os.getpid().
        self.own_pids = {os.getpid()} if os.getpid() in after else after - before

    def _pids(self) -> set[int]:
        if self.handle is None:
            return set()
        try:
            return self.listed_pids()
        except Exception:
            return set()

    telemetry_library = "NVML"

    def open_telemetry(self, uuid: str | None) -> Any:
        return telemetry.open_gpu(uuid)

    def listed_pids(self) -> set[int]:
        """The processes the telemetry library lists on this GPU."""
        return {p.pid for p in telemetry.processes(self.handle)}

    def tensors(
        self,
    ) -> str:  # pragma: no cover -- a real GPU only: the stand-in keeps them on the CPU
        return f"cuda:{self.index}"

    def timer(self) -> Timer:
        return EventTimer(self.cuda, "cuda events, calls back to back")

    def synchronize(self) -> None:
        self.cuda.synchronize()

    def graph(self, call: Work, sets: int) -> Work:
        """One CUDA graph of `sets` calls (one per operand set), replayed whole: the launch cost
        is paid once for all of them. Warm-up and capture on one side stream, as torch asks."""
        stream = self.cuda.Stream()
        stream.wait_stream(self.cuda.current_stream())
        with self.cuda.stream(stream):
            for i in range(sets):
                call(i)
        self.cuda.current_stream().wait_stream(stream)
        graph = self.cuda.CUDAGraph()
        with self.cuda.graph(graph, stream=stream):
            for i in range(sets):
                call(i)
        self.synchronize()
        return Replay(graph, call)

    def tunable(self, enabled: bool, results: Path) -> contextlib.AbstractContextManager:
        """TunableOp on (searching the GEMM solutions this build offers, each result appended
        to `results` as it is found, as torch 2.15 does) or off."""
        tuning = getattr(self.cuda, "tunable", None)
        if tuning is None:
            raise Unavailable("this torch has no TunableOp (torch.cuda.tunable)")

        @contextlib.contextmanager
        def switch() -> Iterator[None]:
            tuning.set_filename(str(results))
            tuning.enable(enabled)
            tuning.tuning_enable(enabled)
            try:
                yield
            finally:
                tuning.tuning_enable(False)
                tuning.enable(False)

        return switch()

    def tunable_offers(self) -> tuple[int, str]:
        """How many GEMM solutions TunableOp searches on this build, at most, and which."""
        import torch

        tuning = getattr(self.cuda, "tunable", None)
        if tuning is None:
            return 0, "none (this torch has no torch.cuda.tunable)"
        if torch.version.hip:
            return 0, "rocBLAS's and hipBLASLt's solutions (ROCm)"
        count = getattr(tuning, "get_cublaslt_requested_algo_count", None)
        if count is None:  # torch before the cuBLASLt candidates: cuBLAS's own call only
            return 1, "'Default' (cuBLAS's own call) only"
        n = count()
        return 1 + n, f"'Default' and up to {n} cuBLASLt heuristic candidates"

    def tuned_solutions(self) -> list[tuple[str, str]]:
        """What TunableOp picked so far, as (operator, solution): the operator names the dtype
        and layout, e.g. GemmTunableOp_Half_TN (torch.cuda.tunable.get_results())."""
        tuning = getattr(self.cuda, "tunable", None)
        return [(str(r[0]), str(r[2])) for r in tuning.get_results()] if tuning else []

    def peak_memory(self, reset: bool = False) -> int:
        """The most memory torch's allocator held on this GPU since the last reset (bytes)."""
        if reset:
            self.cuda.reset_peak_memory_stats(self.index)
        return self.cuda.max_memory_allocated(self.index)

    def kernel(self, call: Callable[[], object], backend: str = "torch") -> str | None:
        """cuBLAS's kernel for one more call of `call`, from torch's profiler (CUPTI)."""
        return kernel_ran.cuda_profiled(call, self.synchronize)

    def monitor(self) -> Monitor | None:
        if self.handle is None:
            return None
        handle, own = self.handle, self.own_pids
        return lambda: telemetry.Sampler(handle, own_pids=own, counters=gpm.Counters)


class Rocm(Cuda):
    """One AMD GPU through ROCm's torch: the torch.cuda API (HIP events, graphs, TunableOp, the
    profiler) over hipBLASLt and rocBLAS, with amdsmi's telemetry in NVML's place."""

    name = "rocm"
    blas = "hipBLASLt"
    telemetry_library = "amdsmi"

    def __init__(self, index: int = 0, uuid: str | None = None) -> None:
        # ROCm's torch runs float32 matmuls on TF32 (XF32) only where hipBLASLt is allowed to,
        # whatever torch.set_float32_matmul_precision says: without this, a "tf32" row would
        # be float32 judged against the TF32 peak (torch's test_linalg.py, _hip_allow_tf32).
        os.environ.setdefault("HIPBLASLT_ALLOW_TF32", "1")
        super().__init__(index, uuid)

    def open_telemetry(self, uuid: str | None) -> Any:
        return amd_telemetry.open_gpu(uuid, self.index)

    def listed_pids(self) -> set[int]:
        return {p["pid"] for p in amd_telemetry.processes(self.handle)}

    def monitor(self) -> Monitor | None:
        if self.handle is None:
            return None
        handle, own = self.handle, self.own_pids
        return lambda: telemetry.Sampler(
            handle,
            fields=amd_telemetry.fields(),
            energy=amd_telemetry.energy_j,
            processes=amd_telemetry.other_processes,
            own_pids=own,
            counters=amd_telemetry.Counters,
        )


def gpu(found: GpuInfo) -> Cuda:
    """The kind of GPU a probe's description is: an AMD one (it has an architecture) through
    ROCm, else an NVIDIA one."""
    kind = Rocm if found.get("architecture") else Cuda
    return kind(found.get("index", 0), found.get("uuid"))


def make(kind: str, found: GpuInfo | None = None) -> Kind:
    """The kind of device `found` (a probe's description: a GPU's, the one kind that reads it)
    is."""
    if kind == "rocm":
        return Rocm(found.get("index", 0), found.get("uuid")) if found else Rocm()
    if kind == "cuda":
        return Cuda(found.get("index", 0), found.get("uuid")) if found else Cuda()
    if kind == "mps":
        return Mps()
    return Kind()


def cuda_available() -> tuple[bool, str]:
    """Whether torch can use a CUDA GPU, and what torch said when it cannot."""
    import warnings

    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
    return available, " ".join(str(w.message).strip() for w in caught)


def cuda_gpus() -> list[GpuInfo]:
    """Each GPU torch can use, as the probe records it: torch's properties, then NVML's driver,
    limits and clocks read from the GPU with the same UUID (NVML ignores CUDA_VISIBLE_DEVICES,
    so its indices are not torch's); on ROCm's torch, an AMD GPU's architecture and amdsmi's
    figures instead."""
    import torch

    gpus: list[GpuInfo] = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        uuid = str(props.uuid) if getattr(props, "uuid", None) else None
        if torch.version.hip:  # ROCm: the same API, an AMD GPU
            gpus.append(
                {
                    "index": index,
                    "name": props.name,
                    "compute_capability": f"{props.major}.{props.minor}",
                    "architecture": amd_telemetry.architecture(props.gcnArchName),
                    "sm_count": props.multi_processor_count,  # compute units
                    "memory_bytes": props.total_memory,
                    "l2_bytes": getattr(props, "L2_cache_size", None),
                    "uuid": uuid,
                    "hip": torch.version.hip,
                    **amd_telemetry.limits(uuid, index),
                }
            )
            continue
        gpus.append(
            {
                "index": index,
                "name": props.name,
                "compute_capability": f"{props.major}.{props.minor}",
                "sm_count": props.multi_processor_count,
                "memory_bytes": props.total_memory,
                "l2_bytes": getattr(props, "L2_cache_size", None),
                "uuid": uuid,
                "cuda": torch.version.cuda,
                "cublaslt": cublaslt_version(),
                **telemetry.limits(uuid),
            }
        )
    return gpus


def cublaslt_version() -> int | None:
    """cublasLtGetVersion() of the cuBLASLt that torch loaded (e.g. 130401), or None."""
    import ctypes

    for soname in ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"):
        try:
            return int(ctypes.CDLL(soname).cublasLtGetVersion())
        except (OSError, AttributeError):
            continue
    return None


def l2_bytes(index: int) -> int | None:
    import torch

    return getattr(torch.cuda.get_device_properties(index), "L2_cache_size", None)
