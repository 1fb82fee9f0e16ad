"""The lab's own entry point, `bench_matmul`, over the pipeline's harness (not a second one)."""

import torch

from roofline.core import arithmetic as ar
from roofline.core.dtypes import DTYPES
from roofline.device import kinds
from roofline.device.hardware import cpu_info
from roofline.device.timing import BenchSettings
from roofline.measuring.matmul import measure_matmul, torch_dtype

# torch dtype -> the registry's name; tf32 is a math mode of float32, not a torch dtype.
DTYPE_NAMES = {torch_dtype(name): name for name, d in DTYPES.items() if not d.tf32}


def bench_matmul(
    M: int = 8192,
    N: int = 8192,
    K: int = 8192,
    dtype: torch.dtype = torch.float16,
    device: str = "cuda",
    warmup: int = 5,
    iters: int = 20,
) -> tuple[float, float]:
    """(achieved TFLOP/s, achieved GB/s one way) of one dense matmul, from the median of `iters`
    CUDA-event-timed (GPU) or host-timed (CPU) calls after `warmup`, on random inputs checked
    against float64 first (a wrong product raises WrongResult instead of returning a number).
    float32 means IEEE float32: TF32 tensor cores are not allowed."""
    if dtype not in DTYPE_NAMES:
        raise ValueError(f"dtype {dtype}; allowed: {', '.join(map(str, DTYPE_NAMES))}")
    where = torch.device(device)
    if where.type == "cuda":
        index = where.index or 0
        kind, cache = kinds.Cuda(index), kinds.l2_bytes(index)
    else:
        cpu = cpu_info()
        kind, cache = kinds.make(where.type), cpu["cache_bytes"]
        torch.set_num_threads(cpu["logical_cores"])
    name = DTYPE_NAMES[dtype]
    point = measure_matmul(
        M,
        N,
        K,
        name,
        kind,
        # A count of calls, as asked: no window by time.
        BenchSettings(warmup=warmup, warmup_seconds=0.0, repeats=iters, min_seconds=0.0),
        cache_bytes=cache,
    )
    median = ar.summarize(point.samples)["median_s"]
    return (
        ar.tflops(ar.matmul_flops(M, N, K), median),
        ar.gbps(ar.matmul_bytes(M, N, K, name), median),
    )
