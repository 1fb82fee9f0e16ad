"""The measured kernels: a dense matmul (checked, then timed) and a large copy.

Device-agnostic: the same code runs on every kind of device (roofline.device.kinds)."""

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from roofline.core.arithmetic import buffer_sets, matmul_bytes, summarize
from roofline.core.dtypes import DTYPES
from roofline.device import backends
from roofline.device.kinds import Kind
from roofline.device.timing import BenchSettings, TimedWindow, calls_to_fill, sample

# Operand sets to rotate through at most (tiny shapes against a large cache).
MAX_SETS = 4096
# Where each operand set starts, cut from one allocation: where a tensor of its own would
# (torch's CUDA allocator rounds blocks to 512 bytes), so its kernels read it as aligned.
SET_ALIGN_BYTES = 512


class WrongResult(Exception):
    """The kernel's output disagrees with the float64 reference: it is not timed."""


@dataclass
class Point:
    samples: list[float]
    check_error: float
    buffer_sets: int
    timing: str = ""  # how the samples were timed
    window: Any = None  # what the telemetry window recorded (a Sampler), or None
    timed: TimedWindow | None = None  # the timed window's length, cut, and share of the host
    # The timed call itself (on operand set i), for one more call after timing that learns the
    # kernel it runs (roofline.measuring.measure); it holds the operands until the point is done.
    call: Callable[[int], object] | None = None
    # The kernel the check's call ran, where it was learnt there (Kind.kernel_at_check): its
    # name ("" where the library cannot say), or what learning it raised; None: not learnt.
    kernel: str | Exception | None = None


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, DTYPES[name].torch_name)


def unsupported_reason(
    dtype: str,
    device_kind: str,
    native_dtypes: set[str] | None = None,
    compute_capability: str | None = None,
    shape: list[int] | None = None,
    architecture: str | None = None,
) -> str | None:
    """Why a dtype (at this shape) cannot be measured on this device, or None when it can.
    An AMD GPU (kind rocm) is judged by its `architecture` (gcnArchName), an NVIDIA one by its
    `compute_capability`."""
    from roofline.core.dtypes import float8_for, runs_on_rocm

    d = DTYPES[dtype]
    if device_kind == "cpu":
        if d.gpu_only:
            return f"{dtype} is a GPU tensor-core format; CPUs have no native {dtype} matmul"
        if native_dtypes is not None and dtype not in native_dtypes:
            needs = " or ".join(path.isa.split(",")[0] for path in d.cpu)
            return (
                f"no native {dtype} on this CPU (needs {needs}); "
                "PyTorch's fallback would be a slow emulation, not this CPU's ceiling"
            )
        return None
    if device_kind == "mps" and (d.tf32 or d.scaled):
        return f"{dtype} is an NVIDIA tensor-core format; Apple's GPU has no {dtype} matmul"
    if device_kind == "rocm":
        if architecture is not None and not runs_on_rocm(dtype, architecture):
            base = architecture.split(":")[0]
            instead = f"; this GPU's float8 is {float8_for(base)}" if d.scaled else ""
            return f"{base} (ROCm) has no {dtype} matmul{instead}"
    elif device_kind == "cuda" and not d.cuda:
        return f"{dtype} is an AMD (ROCm) format; NVIDIA's GPUs take float8_e4m3fn"
    if device_kind == "cuda" and d.min_compute_capability and compute_capability is not None:
        have = tuple(int(x) for x in compute_capability.split("."))
        if have < d.min_compute_capability:
            need = ".".join(map(str, d.min_compute_capability))
            return f"{dtype} matmul needs compute capability >= {need}; this GPU is {compute_capability}"
    if shape and any(dim % d.dim_multiple for dim in shape):
        return (
            f"{dtype} through torch's scaled matmul needs M, N and K in multiples of "
            f"{d.dim_multiple}; this is {shape}"
        )
    return None


@contextlib.contextmanager
def float32_math(dtype: str) -> Iterator[None]:
    """float32 matmul on the GPU uses TF32 tensor cores only when the dtype allows it (tf32)."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if DTYPES[dtype].tf32 else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def operand_sets(
    m: int,
    n: int,
    k: int,
    dtype: str,
    device: str,
    gen: torch.Generator,
    sets: int = 1,
    constant: bool = False,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`sets` pairs (A, B) of random normal inputs (never zeros: they run faster) rounded to the
    dtype; or, `constant`, every element 1 (bits that never toggle: the data's own power,
    measured apart, and the product still checked, every element of it K). Each operand made
    for every set at once: the thousands of sets a small shape rotates through past a GPU's L2
    were four launches each."""
    d = DTYPES[dtype]

    def made(rows: int, cols: int, to: torch.dtype) -> torch.Tensor:
        """[set, row, col], each set starting on SET_ALIGN_BYTES, as a tensor of its own does."""
        per = rows * cols
        aligned = math.ceil(per * to.itemsize / SET_ALIGN_BYTES) * SET_ALIGN_BYTES
        stride = aligned // to.itemsize  # elements from one set's start to the next
        if constant:
            whole = torch.ones(sets, stride, device=device)
        else:
            whole = torch.randn(sets, stride, device=device, generator=gen)
        return whole.to(to)[:, :per].view(sets, rows, cols)

    a = made(m, k, torch_dtype(dtype)).unbind()
    to_b = getattr(torch, d.b_torch)
    if d.b_layout == "column-major":
        b = made(n, k, to_b).transpose(1, 2).unbind()
    else:
        b = made(k, n, to_b).unbind()
    return list(zip(a, b, strict=True))


def matmul_fn(
    dtype: str, device: str, fast_accum: bool = False
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """torch's matmul for a dtype; float8 through the public scaled matmul where this torch has
    one (torch.nn.functional.scaled_mm), else torch._scaled_mm, with per-tensor scales of 1
    and a bfloat16 C. `fast_accum`: float8's faster, less exact accumulation."""
    if not DTYPES[dtype].scaled:
        return torch.matmul
    one = torch.ones((), device=device)
    public = getattr(torch.nn.functional, "scaled_mm", None)
    if public is not None:
        whole = torch.nn.functional.ScalingType.TensorWise
        return lambda a, b: public(
            a, b, one, whole, one, whole, output_dtype=torch.bfloat16, use_fast_accum=fast_accum
        )
    return lambda a, b: torch._scaled_mm(
        a, b, one, one, out_dtype=torch.bfloat16, use_fast_accum=fast_accum
    )


def check_product(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    rows: int,
    gen: torch.Generator,
    reference: str | None = None,
) -> float:
    """max|C - A@B| / max|A@B| over a random sample of rows, against float64: computed on the
    operands' device, or copied to `reference` first (a device without float64: Apple's GPU)."""
    picked = torch.randperm(a.shape[0], generator=gen, device=gen.device)[:rows].to(a.device)
    a, b, c = a[picked], b, c[picked]
    if reference is not None:
        a, b, c = (x.to(reference, copy=True) for x in (a, b, c))
    ref = a.double() @ b.double()
    return ((c.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


# Below this per-call time a GPU call is worth replaying from a CUDA graph: host launch cost is
# then a large part of it.
GRAPH_BELOW_S = 100e-6


@dataclass
class Prepared:
    """A matmul ready to time: its operands made and its product checked against float64.
    `call(i)` runs it on operand set i % sets (rotating, so none is found in cache)."""

    call: Callable[[int], object]
    check_error: float
    sets: int
    kernel: str | Exception | None = None  # the check's call's, where `learn` was given


def prepare_matmul(
    m: int,
    n: int,
    k: int,
    dtype: str,
    device: str,
    bench: BenchSettings,
    *,
    cache_bytes: int | None,
    backend: str | Callable = "torch",
    fast_accum: bool = False,
    sets: int | None = None,
    reference: str | None = None,
    learn: Callable[[Callable[[], object]], str | None] | None = None,
    constant: bool = False,
) -> Prepared:
    """Random operands (enough sets to rotate past the cache, or `sets`), C = A @ B through
    `backend` (roofline.device.backends) checked against float64 (on `reference`, where the
    device has none: roofline.device.kinds.Kind.reference). Raises WrongResult instead of
    returning a kernel whose output is wrong. `learn`: runs the checked call and names the
    kernel it ran (Kind.kernel), so no call is spent on that alone. `constant`: every input
    element 1 (the data's power knob's variant; never the lab's headline)."""
    seed, check_rows = bench.seed, bench.check_rows
    gen = torch.Generator(device=device).manual_seed(seed)
    if sets is None:
        sets = min(MAX_SETS, buffer_sets(matmul_bytes(m, n, k, dtype), cache_bytes or 0))
    inputs = operand_sets(m, n, k, dtype, device, gen, sets, constant)
    library = backends.backend(backend, matmul_fn(dtype, device, fast_accum))
    operands = [library.operands(a, b) for a, b in inputs]
    mm = library.matmul
    made: list[object] = []  # the checked call's output, once it ran
    tried: list[bool] = []

    def checked() -> None:
        tried.append(True)
        made.append(mm(*operands[0]))

    kernel: str | Exception | None = None
    with float32_math(dtype):
        if learn is not None:
            try:
                kernel = learn(checked) or ""
            except Exception as err:  # the call's own failure is the point's; a name's is not
                if tried and not made:
                    raise
                kernel = err
        if not made:  # no learning asked, or one that answered without calling
            checked()
        product = library.product(made.pop())
        error = check_product(*inputs[0], product, check_rows, gen, reference)
    tolerance = DTYPES[dtype].tolerance
    if not error <= tolerance:  # also catches NaN
        raise WrongResult(
            f"max relative error {error:.3g} > {tolerance:g} against float64 on {check_rows} rows"
        )
    return Prepared(lambda i: mm(*operands[i % sets]), error, sets, kernel)


def measure_matmul(
    m: int,
    n: int,
    k: int,
    dtype: str,
    kind: Kind,
    bench: BenchSettings,
    *,
    cache_bytes: int | None,
    monitor: Callable[[], Any] | None = None,
    backend: str = "torch",
    threads: int | None = None,
    calls_per_sample: int = 1,
) -> Point:
    """Check C = A @ B, then time it on `kind`'s timer (from a CUDA graph too where that
    measures a short call better). Raises WrongResult instead of timing a kernel whose output
    is wrong. `threads`: the host threads a CPU's calls run on (roofline.device.timing.sample).
    `calls_per_sample`: calls back to back in each timed sample, kept as their mean (a long
    window of short calls would pass the cap on a window's samples)."""
    ready = prepare_matmul(
        m,
        n,
        k,
        dtype,
        kind.tensors(),
        bench,
        cache_bytes=cache_bytes,
        backend=backend,
        reference=kind.reference,
        learn=(lambda call: kind.kernel(call, backend)) if kind.kernel_at_check else None,
    )
    timer = kind.timer()
    timing = dict(timer=timer, bench=bench, window=monitor, threads=threads)
    with float32_math(dtype):
        why = ""
        if calls_per_sample == 1 and kind.sample_at_least_s:  # one boundary for several calls
            calls_per_sample = calls_to_fill_sample(timer, ready.call, kind.sample_at_least_s)
            why = " (a command buffer commit a sample)"
        if calls_per_sample > 1:
            samples, window, timed = sample(batched(ready.call, calls_per_sample), **timing)
            samples = [t / calls_per_sample for t in samples]
            how = f"{timer.name}, {calls_per_sample} calls a sample{why}"
            return Point(
                samples, ready.check_error, ready.sets, how, window, timed, ready.call, ready.kernel
            )
        samples, window, timed = sample(ready.call, **timing)
        how = timer.name
        median = summarize(samples)["median_s"] if samples else 0.0
        if kind.graphs and median < GRAPH_BELOW_S:
            replays, graph_window, graph_timed = sample(
                kind.graph(ready.call, ready.sets), **timing
            )
            per_call = [t / ready.sets for t in replays]
            if summarize(per_call)["median_s"] < summarize(samples)["median_s"]:
                samples, window, timed = per_call, graph_window, graph_timed
                how = f"CUDA graph of {ready.sets} calls, replayed back to back"
            else:
                how += " (a CUDA graph was not faster)"
    return Point(
        samples, ready.check_error, ready.sets, how, window, timed, ready.call, ready.kernel
    )


# Calls timed together to learn a short call's time (calls_to_fill_sample): a boundary's cost
# spread over them, not held by each.
PROBE_CALLS = 8


def calls_to_fill_sample(timer: Any, call: Callable[[int], object], seconds: float) -> int:
    """How many calls back to back fill a sample of `seconds`: from the faster of two timed
    batches of PROBE_CALLS (one call where a call alone fills it)."""
    per_call = min(timer.times(batched(call, PROBE_CALLS), 0, 2)) / PROBE_CALLS
    return max(1, calls_to_fill(seconds, per_call))


def batched(call: Callable[[int], object], count: int) -> Callable[[int], object]:
    """Work that makes `count` calls back to back, rotating on through the operand sets; each
    output is dropped as the next is made."""

    def work(i: int) -> object:
        out = None
        for j in range(count):
            out = call(i * count + j)
        return out

    return work


def measure_copy(nbytes: int, kind: Kind, bench: BenchSettings) -> list[float]:
    """Time dst.copy_(src) for a buffer of `nbytes`; it reads and writes nbytes each."""
    device = kind.tensors()
    gen = torch.Generator(device=device).manual_seed(bench.seed)
    src = torch.randn(nbytes // 4, device=device, generator=gen)
    dst = torch.empty_like(src)
    work = lambda i: dst.copy_(src)  # noqa: E731
    return sample(work, kind.timer(), bench).samples
