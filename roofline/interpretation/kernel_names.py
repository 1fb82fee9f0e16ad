"""The kernel that ran, read from its name (a measured row's `kernel`): what the name says of
its output tile, thread-block cluster, instruction family and split-K on a GPU, and of its
library and instruction set on a CPU. Pure functions: a name that says nothing leaves each
field None, never a guess.

GPU names are cuBLAS's, as torch's profiler reports them:

    sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_..._cublas
        Hopper's warpgroup MMA (WGMMA); a cluster where the name has one (cluster2x1x1,
        cgasize1x2x1)
    sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize96x128x32_stage4_..._tensor16x8x16_kernel
    ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn
        Ampere's mma.sync tensor-core instructions (HMMA, m16n8k16); ampere_sgemm_* are SIMT
    cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_nn_align8>
    nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT
        cuBLAS's Hopper-and-later kernels: tile, K tile x stages, cluster, then the schedule;
        "splitK" where it splits K

cuBLAS is column-major: torch computes C = A @ B as C^T = B^T @ A^T, so a tile's first size in
its name runs along C's columns (N) and its second along C's rows (M). `output_tile` is the
tile over torch's M x N.

CPU lines are roofline.device.kernel_ran's: "oneMKL 2024.0 Update 2 SGEMM (AVX-512 with AMX
dispatch), 2 threads", "oneDNN 3.13.3 brg_matmul:avx10_1_512_amx, 2 threads",
"openblas 0.3.31.188.0, SkylakeX kernel, 2 threads"."""

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KernelInfo:
    """What a kernel's name says; None where it says nothing of it."""

    name: str
    tile: tuple[int, int] | None = None  # the output tile, in the name's order
    cluster: str | None = None  # thread blocks per cluster, e.g. "2x1x1"
    family: str | None = None  # the instruction family, e.g. "WGMMA"
    split_k: bool | None = None  # True where the name says it splits K
    library: str | None = None  # a CPU's library and version, e.g. "oneMKL 2024.0 Update 2"
    routine: str | None = None  # a CPU's routine or implementation, e.g. "SGEMM", "brg_matmul"
    isa: str | None = None  # a CPU's instruction set, e.g. "AVX-512 with AMX", "SkylakeX"
    threads: int | None = None
    column_major: bool = False  # cuBLAS's: its tile's first size runs along C's columns

    @property
    def output_tile(self) -> tuple[int, int] | None:
        """The tile over torch's output C (M x N)."""
        if self.tile is None:
            return None
        return (self.tile[1], self.tile[0]) if self.column_major else self.tile

    def summary(self) -> str:
        """What the name says, in a few words: "WGMMA, tile 128x128" or "oneMKL 2024.0 Update 2
        SGEMM, AVX-512 with AMX dispatch, 2 threads"; "" where it says nothing."""
        if self.library:
            what = " ".join(p for p in (self.library, self.routine) if p)
            isa = self.isa or ""
            if isa and self.library.startswith(("oneMKL", "MKL")):
                isa += " dispatch"
            elif isa and not self.routine:  # a BLAS's own kernel family (OpenBLAS's SkylakeX)
                isa += " kernel"
            threads = f"{self.threads} thread" + ("" if self.threads == 1 else "s")
            return ", ".join(p for p in (what, isa, threads if self.threads else "") if p)
        parts = [self.family or ""]
        if self.tile:
            parts.append(f"tile {self.tile[0]}x{self.tile[1]}")
            out = self.output_tile
            if out and out != self.tile:  # cuBLAS's order: C's M x N the other way round
                parts.append(f"{out[0]}x{out[1]} over M x N")
        if self.cluster:
            parts.append(f"cluster {self.cluster}")
        if self.split_k:
            parts.append("split-K")
        return ", ".join(p for p in parts if p)


def _sizes(text: str) -> tuple[int, int]:
    first, second = text.split("x")[:2]
    return int(first), int(second)


def _split_k(name: str) -> bool | None:
    return True if re.search(r"split_?k(?!_?off)", name, re.IGNORECASE) else None


XMMA = re.compile(r"sm(?P<sm>\d+)_xmma_gemm_")
XMMA_TILE = re.compile(r"tilesize(?P<tile>\d+x\d+)x\d+")
XMMA_CLUSTER = re.compile(r"_(?:cluster|cgasize)(?P<cluster>\d+x\d+x\d+)")
# cuBLAS's Ampere (and Turing, Volta) kernels: ampere_{type}_{s|h}{instruction}gemm_{type}_
# {tile}_..., the instruction's shape in its digits (s16816: m16n8k16); SIMT ampere_sgemm_{tile}_.
AMPERE = re.compile(
    r"(?:ampere|turing|volta)_(?:\w+?_)?(?P<mma>[shd]\d{3,5}|[shd])?gemm_(?:\w+?_)?"
    r"(?P<tile>\d+x\d+)_"
)
CUTLASS = re.compile(
    r"cutlass(?:3x)?_(?:sm)?(?P<sm>\d+)_(?P<kind>wmma_tensorop|sptensorop|tensorop|simt)_\w*?gemm\w*?_"
    r"(?P<tile>\d+x\d+)(?:x\d+)?_"
)
CUTLASS_CLUSTER = re.compile(r"_\d+x\d+x\d+_(?P<cluster>\d+x\d+x\d+)_")
NVJET = re.compile(r"nvjet_[a-z0-9]+_(?P<tile>\d+x\d+)_\d+x\d+_(?P<cluster>\d+x\d+)_")


def parse_gpu(name: str) -> KernelInfo:
    """What a CUDA kernel's name says (cuBLAS's names; a name it does not know says nothing)."""
    split_k = _split_k(name)
    xmma = XMMA.search(name)
    if xmma:
        sm = int(xmma["sm"])
        tile, cluster = XMMA_TILE.search(name), XMMA_CLUSTER.search(name)
        family = "WGMMA" if sm >= 90 and ("warpgroup" in name or "gmma" in name) else None
        if family is None and sm >= 80 and "tensor" in name:
            family = "HMMA (mma.sync)"
        return KernelInfo(
            name,
            tile=_sizes(tile["tile"]) if tile else None,
            cluster=cluster["cluster"] if cluster else None,
            family=family,
            split_k=split_k,
            column_major=True,
        )
    nvjet = NVJET.search(name)
    if nvjet:
        return KernelInfo(
            name,
            tile=_sizes(nvjet["tile"]),
            cluster=f"{nvjet['cluster']}x1",
            family="nvjet (WGMMA or later)",
            split_k=split_k,
            column_major=True,
        )
    cutlass = CUTLASS.search(name)
    if cutlass:
        kind = cutlass["kind"]
        sm = int(cutlass["sm"])
        family = {
            "simt": "SIMT (CUDA cores)",
            "wmma_tensorop": "WMMA",
            "tensorop": "WGMMA" if sm >= 90 else "HMMA (mma.sync)",
            "sptensorop": "WGMMA, sparse" if sm >= 90 else "HMMA (mma.sync), sparse",
        }[kind]
        cluster = CUTLASS_CLUSTER.search(name) if sm >= 90 else None
        return KernelInfo(
            name,
            tile=_sizes(cutlass["tile"]),
            cluster=cluster["cluster"] if cluster else None,
            family=family,
            split_k=split_k,
            # cuBLAS's own CUTLASS kernels (cutlass_80_*) are column-major as cuBLAS is; a
            # CUTLASS 3 library kernel (cutlass3x_*) states its layouts in its name instead.
            column_major="cutlass3x" not in name,
        )
    ampere = AMPERE.search(name)
    if ampere:
        tensor = ampere["mma"] and any(c.isdigit() for c in ampere["mma"])
        family = "HMMA (mma.sync)" if tensor else "SIMT (CUDA cores)"
        return KernelInfo(
            name, tile=_sizes(ampere["tile"]), family=family, split_k=split_k, column_major=True
        )
    return KernelInfo(name, split_k=split_k)


MKL = re.compile(
    r"^(?P<library>(?:oneMKL|MKL)\b.*?) (?P<routine>[A-Z][A-Z0-9_]*GEMM\w*|[A-Z][A-Z0-9_]+)"
    r"(?: \((?P<isa>.+) dispatch\))?, (?P<threads>\d+) threads?$"
)
ONEDNN = re.compile(
    r"^(?P<library>oneDNN(?: [\w.]+)?) (?P<routine>[a-z_0-9]+):(?P<isa>\w+)"
    r"(?:, (?P<threads>\d+) threads?)?$"
)
NUMPY_BLAS = re.compile(
    r"^(?P<library>[\w.+-]+(?: [\w.+-]+)?), (?P<isa>\S+) kernel(?:, (?P<threads>\d+) threads?)?$"
)


def parse_cpu(name: str) -> KernelInfo | None:
    """What a CPU's kernel line says (roofline.device.kernel_ran's lines), or None where it is
    not one."""
    for pattern in (MKL, ONEDNN, NUMPY_BLAS):
        found = pattern.match(name)
        if found:
            parts = found.groupdict()
            return KernelInfo(
                name,
                library=parts["library"],
                routine=parts.get("routine"),
                isa=parts.get("isa"),
                threads=int(parts["threads"]) if parts.get("threads") else None,
            )
    return None


def parse(name: str) -> KernelInfo:
    """What a recorded kernel name says: a CPU's line, else a GPU kernel's name."""
    name = name.strip()
    return parse_cpu(name) or parse_gpu(name)
