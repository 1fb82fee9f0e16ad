"""The kernel a call ran, as its library names it, learnt from a call that is never a timed
one (a CPU's checked call, a GPU's one more call after the window): what
roofline.device.kinds' `Kind.kernel` records in each measured row.

    cuda  torch's profiler (CUPTI) around the call: the longest CUDA kernel it saw, the GEMM
          (cuBLAS's split-K reduction or a memset beside it is shorter)
    cpu   MKL's and oneDNN's verbose output around the call (torch), which they print to the
          process's stdout from C, so it is captured at file descriptor 1; threadpoolctl's view
          of numpy's BLAS (the kernel family OpenBLAS picked for this CPU)

What a verbose line says is condensed to one line here (`from_verbose`), e.g.
"oneMKL 2024.0 Update 2 SGEMM (AVX-512 with AMX dispatch), 2 threads" or
"oneDNN 3.13.3 brg_matmul:avx10_1_512_amx, 2 threads"; roofline.interpretation.kernel_names
reads these lines and cuBLAS's names back. torch is imported when a kernel is learnt, never
at import."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import tempfile
from collections.abc import Callable


class NotSeen(Exception):
    """The call ran and its library did not say which kernel: the reason is the message."""


# What MKL and oneDNN print once per process (their version, the code path MKL dispatched to,
# oneDNN's threads), kept from the first call that printed it for the calls after.
SEEN: dict[str, str] = {}

MKL_HEADER = re.compile(r"MKL_VERBOSE (?P<library>.+?) Product build .*? architecture (?P<isa>.*)")
MKL_CALL = re.compile(r"MKL_VERBOSE (?P<routine>[A-Z][A-Z0-9_]*)\(.*?NThr:(?P<threads>\d+)")
# "Intel(R) Advanced Vector Extensions 512 (Intel(R) AVX-512)": the short name in parentheses.
MKL_ISA = re.compile(r"\(Intel\(R\) ([^)]+)\)")
ONEDNN_VERSION = re.compile(r"info,oneDNN v(?P<version>[\w.]+)")
ONEDNN_THREADS = re.compile(r"info,cpu,runtime:[^,]*,nthr:(?P<threads>\d+)")
ONEDNN_PREFIXES = ("onednn_verbose,", "dnnl_verbose,")
# oneDNN's primitives that do a matmul's arithmetic (a reorder beside it only moves data).
ONEDNN_GEMMS = ("matmul", "inner_product", "gemm")


def stdout_of(call: Callable[[], object]) -> str:
    """What `call` wrote to this process's stdout at file descriptor 1 (where C libraries print,
    past sys.stdout), captured in a temporary file and restored after, whatever it raised."""
    sys.stdout.flush()
    flush_c_stdout()
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(1)
        try:
            os.dup2(captured.fileno(), 1)
            try:
                call()
            finally:
                sys.stdout.flush()
                flush_c_stdout()
                os.dup2(saved, 1)
        finally:
            os.close(saved)
        captured.seek(0)
        return captured.read().decode("utf-8", "replace")


def flush_c_stdout() -> None:
    """The C library's stdout buffer, written out (a library's printf still in it would be
    written after the descriptor is restored, outside the capture)."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(None).fflush(None)


def from_mkl(lines: list[str]) -> str | None:
    """MKL's verbose lines as one: its version and dispatch (the header it prints once per
    process, kept in SEEN), the routine of its GEMM call and its threads."""
    for line in lines:
        header = MKL_HEADER.search(line)
        if header:
            isa = " with ".join(MKL_ISA.findall(header["isa"]))
            SEEN["mkl"] = header["library"].strip()
            SEEN["mkl_isa"] = isa
    calls = [c for c in (MKL_CALL.search(line) for line in lines) if c]
    if not calls:
        return None
    call = next((c for c in calls if "GEMM" in c["routine"]), calls[0])
    library = SEEN.get("mkl", "MKL")
    isa = f" ({SEEN['mkl_isa']} dispatch)" if SEEN.get("mkl_isa") else ""
    return f"{library} {call['routine']}{isa}, {threads(int(call['threads']))}"


def from_onednn(lines: list[str]) -> str | None:
    """oneDNN's verbose lines as one: its version and threads (printed once per process, kept
    in SEEN) and the implementation that executed the matmul, e.g. brg_matmul:avx10_1_512_amx."""
    executed = []
    for line in lines:
        if not line.startswith(ONEDNN_PREFIXES):
            continue
        version, nthr = ONEDNN_VERSION.search(line), ONEDNN_THREADS.search(line)
        if version:
            SEEN["onednn"] = version["version"]
        if nthr:
            SEEN["onednn_threads"] = nthr["threads"]
        fields = line.split(",")
        if "exec" in fields:
            at = fields.index("exec")  # then the engine, the primitive and its implementation
            if len(fields) > at + 3:
                executed.append((fields[at + 2], fields[at + 3], seconds_of(fields[-1])))
    if not executed:
        return None
    gemms = [e for e in executed if e[0] in ONEDNN_GEMMS] or executed
    _, implementation, _ = max(gemms, key=lambda e: e[2])
    version = f" {SEEN['onednn']}" if "onednn" in SEEN else ""
    nthr = f", {threads(int(SEEN['onednn_threads']))}" if "onednn_threads" in SEEN else ""
    return f"oneDNN{version} {implementation}{nthr}"


def seconds_of(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def threads(n: int) -> str:
    return f"{n} thread" + ("" if n == 1 else "s")


def from_verbose(text: str) -> str | None:
    """The kernel MKL's or oneDNN's verbose output says ran, as one line; None where it names
    none. MKL's GEMM first: torch's float32 goes through it; its other dtypes through oneDNN."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return from_mkl(lines) or from_onednn(lines)


def cpu_torch(call: Callable[[], object]) -> str:
    """The kernel one call of torch's matmul runs on a CPU, from MKL's and oneDNN's verbose
    output around it (torch.backends.mkl.verbose, torch.backends.mkldnn.verbose)."""
    import torch

    scopes = []
    if torch.backends.mkl.is_available():
        scopes.append(torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON))
    if torch.backends.mkldnn.is_available():
        scopes.append(torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON))
    if not scopes:
        raise NotSeen("this torch has neither MKL nor oneDNN, whose verbose output names it")

    def verbose_call() -> None:
        with contextlib.ExitStack() as stack:
            for scope in scopes:
                stack.enter_context(scope)
            call()

    name = from_verbose(stdout_of(verbose_call))
    if name is None:
        raise NotSeen(
            "neither MKL nor oneDNN printed a line for the call: torch ran it through another "
            "library"
        )
    return name


def numpy_kernel(call: Callable[[], object]) -> str:
    """The kernel numpy's BLAS runs, as threadpoolctl sees the library loaded: its name and
    version, the kernel family it picked for this CPU (OpenBLAS's "SkylakeX", "Haswell") and
    its threads."""
    from roofline.device.backends import numpy_blas

    call()  # the library is loaded, and has picked its kernel
    blas = numpy_blas()
    if not blas.get("kernel"):
        raise NotSeen(
            f"threadpoolctl names no kernel of numpy's BLAS ({blas.get('library') or 'none loaded'})"
        )
    library = " ".join(str(p) for p in (blas.get("library"), blas.get("version")) if p)
    count = f", {threads(int(blas['threads']))}" if blas.get("threads") else ""
    return f"{library}, {blas['kernel']} kernel{count}"


# A CUDA event of the profiler that moves memory rather than running a kernel.
NOT_KERNELS = ("Memcpy", "Memset")


def cuda_profiled(call: Callable[[], object], synchronize: Callable[[], None]) -> str:
    """The GEMM kernel one call runs on the GPU, from torch's profiler around it: the longest
    CUDA kernel event (a split-K reduction or a memset beside the GEMM is shorter)."""
    import torch.autograd.profiler
    import torch.profiler
    from torch.autograd import DeviceType

    if torch.profiler.ProfilerActivity.CUDA not in torch.profiler.supported_activities():
        raise NotSeen("torch's profiler cannot trace CUDA kernels here (no CUPTI)")
    # The profiler torch.profiler.profile(activities=[CUDA]) wraps, as it sets it up. The
    # wrapper asks `hasattr(torch, "_inductor")` first, which imports inductor and dynamo (1.2 s
    # of CPU a process here) for a CUPTI workaround that applies only where inductor's own CUDA
    # graphs are on (TORCHINDUCTOR_CUDAGRAPHS=1); this process never compiles with inductor.
    with torch.autograd.profiler.profile(
        use_cpu=False, use_device="cuda", use_kineto=True
    ) as profiled:
        call()
        synchronize()
    kernels = [
        e
        for e in profiled.function_events
        if e.device_type == DeviceType.CUDA and not e.name.startswith(NOT_KERNELS)
    ]
    if not kernels:
        raise NotSeen(
            "torch's profiler saw no CUDA kernel in the call (no CUPTI kernel activity here)"
        )
    return max(kernels, key=lambda e: e.time_range.elapsed_us()).name
