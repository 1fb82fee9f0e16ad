"""Apple's GPU's dense peak, computed: Apple publishes no TFLOP/s per dtype, but each GPU core
has 128 ALUs, each an FP32 FMA (2 FLOP) a clock, and runs FP16 at the FP32 rate: cores x 128 x
2 x clock (philipturner/metal-benchmarks, "Overview of Apple-designed GPUs": M1, 8 cores at
1278 MHz, 2617 GFLOP/s). The cores are the probe's (system_profiler's); the clock is the chip's.
Only clocks that table gives as measured are here (its M2 Pro and later are "at least" figures
from leaks: a peak from them could sit below what the GPU does). Add a chip with its source."""

from collections.abc import Mapping
from typing import Any

SOURCE = "philipturner/metal-benchmarks"
# The GPU clock of each chip, in MHz (the source above).
CLOCK_MHZ = {
    "Apple M1": 1278,
    "Apple M1 Pro": 1296,
    "Apple M1 Max": 1296,
    "Apple M1 Ultra": 1296,
    "Apple M2": 1398,
}
FLOP_PER_CORE_CYCLE = 128 * 2  # 128 ALUs, an FMA each
DTYPES = ("float32", "float16")  # FP16 at the FP32 rate; no float64, bfloat16 not counted


def apple_gpu_peak(found: Mapping[str, Any], dtype: str) -> tuple[float, str] | str:
    """(TFLOP/s, how) for a probed Apple GPU, or why there is none."""
    chip = found["name"].removesuffix(" GPU")
    if dtype not in DTYPES:
        return f"no computed peak for {dtype} on Apple's GPU (only {', '.join(DTYPES)})"
    if chip not in CLOCK_MHZ:
        return (
            f"no GPU clock is cited for {chip}: add it to roofline/interpretation/apple_gpu.py "
            "with its source, or set peak_tflops in conf/device/mps.yaml"
        )
    cores = found.get("cores")
    if not cores:
        return f"macOS did not say how many GPU cores this {chip} has (system_profiler)"
    clock = CLOCK_MHZ[chip]
    tflops = cores * FLOP_PER_CORE_CYCLE * clock * 1e6 / 1e12
    how = f"{cores} GPU cores x 128 ALUs x 2 (FMA) x {clock} MHz ({SOURCE})"
    return tflops, how + (", FP16 at the FP32 rate" if dtype == "float16" else "")
