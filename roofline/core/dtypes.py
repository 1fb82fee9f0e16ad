"""The dtypes the lab measures, one entry each. Every per-dtype table (bytes, tolerances, CPU
instruction sets, GPU requirements, plot markers, the config's allowed names) derives from here.

Pure data: no torch import, so the arithmetic and the config can use it anywhere."""

from dataclasses import dataclass


@dataclass(frozen=True)
class CpuPath:
    """One CPU instruction-set path that runs a dtype's matmul natively."""

    flags: tuple[str, ...]  # CPU flags (as /proc/cpuinfo names them) that must all be present
    flop_per_cycle: int  # per core, at full width
    isa: str  # its name, and what the FLOP/cycle assumes
    # Microarchitectures that run it on units half as wide, at half the FLOP per cycle (Zen 4
    # splits AVX-512 over two 256-bit halves; the first Zen, and Intel's Gracemont E-cores,
    # split AVX2 over 128-bit ones: roofline.device.core_types).
    half_rate_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class DType:
    name: str
    torch_name: str  # the torch dtype of A (and of B, unless b_torch_name), as getattr(torch, _)
    input_bytes: int  # per element of A and B
    output_bytes: int  # per element of C
    # Largest allowed max|C - C_ref| / max|C_ref| against float64 on the checked rows. Rounding
    # of the output (and, for tf32/float8, of the inputs) gives ~1e-3; a wrong kernel gives ~1.
    tolerance: float
    cpu: tuple[CpuPath, ...] = ()  # best first, for a computed peak
    cpu_everywhere: bool = False  # every CPU runs it natively, whether or not a path is known
    min_compute_capability: tuple[int, int] | None = None  # GPUs; None: any CUDA GPU
    # AMD GPUs (ROCm) that run it, by the prefix of their architecture (gcnArchName, e.g.
    # "gfx942"); None: every one. An NVIDIA-only format lists none: ().
    rocm_architectures: tuple[str, ...] | None = None
    cuda: bool = True  # whether NVIDIA's GPUs (CUDA) run it
    tf32: bool = False  # float32 storage, TF32 tensor-core math allowed
    numpy_blas: bool = False  # numpy's matmul calls its BLAS for it (else a slow C loop)
    # float8 goes through torch's scaled matmul: B column-major, per-tensor scales, C in bfloat16,
    # and every dimension a multiple of 16.
    scaled: bool = False
    dim_multiple: int = 1
    marker: str = "o"  # matplotlib marker on the plots
    b_torch_name: str = ""  # B's torch dtype where it is not A's (a float8 pair: e5m2 x e4m3fn)
    # The dtype whose datasheet figure is this one's too, where a conf line gives none for it
    # (NVIDIA's and AMD's "FP8" figure covers E4M3 and E5M2 alike).
    peak_as: str = ""

    @property
    def b_torch(self) -> str:
        return self.b_torch_name or self.torch_name

    @property
    def b_layout(self) -> str:
        return "column-major" if self.scaled else "row-major"

    @property
    def gpu_only(self) -> bool:
        return not self.cpu and not self.cpu_everywhere


# Two FMA units per core assumed: true of server cores and most client cores since Skylake.
_AVX512_FMA = CpuPath(("avx512f",), 64, "AVX-512 FMA, 2 units assumed", ("zen4",))
_AVX2_FMA = CpuPath(("avx2", "fma"), 32, "AVX2 FMA, 2 units assumed", ("zen", "gracemont"))

DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType(
            "float32",
            "float32",
            4,
            4,
            1e-4,
            cpu=(_AVX512_FMA, _AVX2_FMA),  # elsewhere (SSE only, arm64): no computed peak
            cpu_everywhere=True,
            numpy_blas=True,
            marker="o",
        ),
        # TF32 on AMD: CDNA3 (gfx94x: MI300) has XF32 matrix instructions; CDNA4 (gfx950) has
        # none (its datasheet lists no TF32 figure).
        DType(
            "tf32",
            "float32",
            4,
            4,
            1e-2,
            min_compute_capability=(8, 0),
            rocm_architectures=("gfx94",),
            tf32=True,
            marker="D",
        ),
        DType(
            "float16",
            "float16",
            2,
            2,
            1e-2,
            cpu=(
                CpuPath(("amx_fp16",), 1024, "AMX-FP16"),
                CpuPath(("avx512_fp16",), 128, "AVX512-FP16, 2 units assumed"),
            ),
            marker="s",
        ),
        DType(
            "bfloat16",
            "bfloat16",
            2,
            2,
            2e-2,
            cpu=(
                CpuPath(("amx_bf16",), 1024, "AMX-BF16"),
                CpuPath(("avx512_bf16",), 128, "AVX512-BF16, 2 units assumed", ("zen4",)),
            ),
            min_compute_capability=(8, 0),
            marker="^",
        ),
        DType(
            "float8_e4m3fn",
            "float8_e4m3fn",
            1,
            2,  # torch's scaled matmul writes C in bfloat16
            2e-2,
            min_compute_capability=(8, 9),
            # OCP float8 on AMD: gfx950 (MI350) and gfx120x, never gfx94x (torch's
            # testing/_internal/common_cuda.py: "gfx120 and gfx95 only support OCP").
            rocm_architectures=("gfx95", "gfx120"),
            scaled=True,
            dim_multiple=16,
            marker="*",
        ),
        # MI300's float8 (gfx94x, CDNA3): the "fnuz" variant (no negative zero, NaN at 0x80,
        # exponent bias 8), which hipBLASLt takes there in place of OCP's float8_e4m3fn.
        DType(
            "float8_e4m3fnuz",
            "float8_e4m3fnuz",
            1,
            2,  # torch's scaled matmul writes C in bfloat16
            2e-2,
            rocm_architectures=("gfx94",),
            cuda=False,
            scaled=True,
            dim_multiple=16,
            marker="P",
        ),
    )
}
NAMES = tuple(DTYPES)
# The lab's kernel on each kind of device: a device's headline figure and roof (FP16 on a GPU,
# Apple's too; FP32 on a CPU).
LAB_DTYPE = {"cpu": "float32", "cuda": "float16", "rocm": "float16", "mps": "float16"}
# Every CPU flag that decides whether some dtype runs natively (what the probe records).
CPU_FLAGS = tuple(sorted({f for d in DTYPES.values() for path in d.cpu for f in path.flags}))


def runs_on_rocm(name: str, architecture: str) -> bool:
    """Whether an AMD GPU of this architecture (gcnArchName, with or without its feature
    suffix: "gfx942:sramecc+:xnack-") runs this dtype's matmul."""
    allowed = DTYPES[name].rocm_architectures
    return allowed is None or architecture.startswith(allowed)


def float8_for(architecture: str | None) -> str:
    """The float8 dtype a GPU's matmul takes: OCP's float8_e4m3fn on NVIDIA (architecture
    None) and on AMD's gfx950 (MI350); float8_e4m3fnuz on gfx94x (MI300)."""
    if architecture and runs_on_rocm("float8_e4m3fnuz", architecture):
        return "float8_e4m3fnuz"
    return "float8_e4m3fn"


def dtype(name: str) -> DType:
    """The registry entry, or ValueError naming the dtype and the known ones."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; allowed: {', '.join(NAMES)}") from None
