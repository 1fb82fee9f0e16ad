"""The kernel that ran, read from its name (roofline.interpretation.kernel_names) and from a CPU
library's verbose output (roofline.device.kernel_ran). Every GPU name here is a real one from a
public profile, cited beside it; every verbose line is one this project's machine printed."""

import pytest

from roofline.device import kernel_ran
from roofline.interpretation.kernel_names import parse
from tests.fakes.cuda.played_cuda import SM80_KERNELS, SM90_KERNELS

# ---- GPU kernels, as torch's profiler names them -------------------------------------------

# The names the CUDA stand-in plays, each cited there: a Hopper float16 GEMM of 128x128 tiles, a
# Hopper bfloat16 one of 256x128, an A800's (GA100, as the A100) bfloat16 one.
SM90_F16, SM90_BF16 = SM90_KERNELS["float16"], SM90_KERNELS["bfloat16"]
AMPERE_BF16 = SM80_KERNELS["bfloat16"]
# An RTX 4090's bfloat16 GEMMs, cuBLAS's own and its CUTLASS one: pytorch/pytorch issue 181718
# (https://github.com/pytorch/pytorch/issues/181718).
AMPERE_BF16_1688 = "ampere_bf16_s1688gemm_bf16_128x128_ldg8_f2f_stages_32x1_nn"
CUTLASS_80 = "cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_nn_align8>"
# An A100's bfloat16 GEMM at an odd size: pytorch/pytorch issue 146817
# (https://github.com/pytorch/pytorch/issues/146817).
CUTLASS_WMMA = (
    "void cutlass::Kernel2<cutlass_75_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_nn_align1>"
    "(cutlass_75_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_nn_align1::Params)"
)
# An H100 PCIe's CUTLASS 3 kernel, with its cluster: NVIDIA/cutlass issue 1967
# (https://github.com/NVIDIA/cutlass/issues/1967).
CUTLASS3_SM90 = (
    "cutlass3x_sm90_sptensorop_s64x128x32spgemm_f16_f16_f32_void_f16_128x128x64_1x2x1_0_ntn_"
    "align8_warpspecialized_cooperative_epi_nosmem"
)
# cuBLASLt's split-K reduction beside a split-K GEMM: Dao-AILab/quack pull 157
# (https://github.com/Dao-AILab/quack/pull/157).
SPLIT_K_REDUCE = "cublasLt::splitKreduce_kernel"
# cuBLAS's Hopper nvjet kernels, wide and split-K: verbatim in a vLLM profiler's test data of
# real H100 kernel names (found by the code search, which did not give its repository); the
# split-K form, nvjet_..._splitK_TNT, is also named in Dao-AILab/quack pull 157.
NVJET_WIDE = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"
NVJET_SPLIT_K = "nvjet_tst_64x64_64x8_2x1_v_bz_splitK_TNT"


def test_a_hopper_cublas_name_says_wgmma_and_its_tile():
    info = parse(SM90_F16)
    assert (info.family, info.tile, info.cluster, info.split_k) == ("WGMMA", (128, 128), None, None)
    assert info.summary() == "WGMMA, tile 128x128"


def test_cublas_is_column_major_so_its_tile_runs_along_cs_columns_first():
    # torch computes C = A @ B as cuBLAS's C^T = B^T A^T: 256 of C's columns, 128 of its rows.
    info = parse(SM90_BF16)
    assert info.tile == (256, 128) and info.output_tile == (128, 256)
    assert info.summary() == "WGMMA, tile 256x128, 128x256 over M x N"


@pytest.mark.parametrize(
    ("name", "family", "tile"),
    [
        (AMPERE_BF16, "HMMA (mma.sync)", (256, 128)),
        (AMPERE_BF16_1688, "HMMA (mma.sync)", (128, 128)),
        (CUTLASS_80, "HMMA (mma.sync)", (64, 64)),
        (CUTLASS_WMMA, "WMMA", (32, 32)),
    ],
)
def test_ampere_and_cutlass_names_say_their_instructions_and_tile(name, family, tile):
    info = parse(name)
    assert (info.family, info.tile, info.cluster) == (family, tile, None)


def test_a_cluster_is_read_where_the_name_has_one():
    info = parse(CUTLASS3_SM90)
    assert (info.family, info.tile, info.cluster) == ("WGMMA, sparse", (128, 128), "1x2x1")
    assert info.output_tile == (128, 128)  # CUTLASS 3 states its layouts (ntn) instead


def test_split_k_is_read_where_the_name_says_it_and_nowhere_else():
    assert parse(SPLIT_K_REDUCE).split_k is True
    wide, narrow = parse(NVJET_WIDE), parse(NVJET_SPLIT_K)
    assert (wide.tile, wide.cluster, wide.split_k) == ((128, 256), "1x2x1", None)
    assert (narrow.tile, narrow.cluster, narrow.split_k) == ((64, 64), "2x1x1", True)
    assert narrow.summary().endswith("cluster 2x1x1, split-K")
    assert parse(SM90_F16).split_k is None  # "segment_k_off" says nothing of split-K


def test_a_name_that_says_nothing_gives_nothing():
    info = parse("void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>")
    assert (info.tile, info.family, info.cluster, info.split_k) == (None, None, None, None)
    assert info.output_tile is None and info.summary() == ""


# ---- a CPU's library, from its verbose output ------------------------------------------------

# What this project's development machine printed (2 cores of an Intel Xeon with AMX, torch
# 2.15's MKL and oneDNN), around one 256^3 matmul each.
MKL_HEADER = (
    "MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture "
    "Intel(R) Advanced Vector Extensions 512 (Intel(R) AVX-512) with support for INT8, BF16, "
    "FP16 (limited) instructions, and Intel(R) Advanced Matrix Extensions (Intel(R) AMX) with "
    "INT8 and BF16, Lnx 2.60GHz lp64 gnu_thread"
)
MKL_SGEMM = (
    "MKL_VERBOSE SGEMM(N,N,256,256,256,0x7fffcb2ae620,0x55897aa95f40,256,0x55897aa55ec0,256,"
    "0x7fffcb2ae640,0x55897aad5fc0,256) 332.69us CNR:OFF Dyn:1 FastMM:1 TID:0  NThr:2"
)
ONEDNN_FIRST = [
    "onednn_verbose,v1,info,oneDNN v3.13.3 (commit b38f97eb6f2173513112f15a0481750b8a66e901)",
    "onednn_verbose,v1,info,cpu,runtime:OpenMP,nthr:2",
    "onednn_verbose,v1,info,cpu,isa:Intel AVX10.1 and Intel AMX with bfloat16 and 8-bit integer "
    "support",
    "onednn_verbose,v1,info,gpu,runtime:none",
    "onednn_verbose,v1,primitive,info,template:operation,engine,primitive,implementation,"
    "prop_kind,memory_descriptors,attributes,auxiliary,problem_desc,exec_time",
]
ONEDNN_BF16 = (
    "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,undef,"
    "src:bf16::blocked:ab::f0 wei:bf16::blocked:ab::f0 dst:bf16::blocked:ab::f0,"
    "attr-scratchpad:user,,256x256:256x256,0.0449219"
)
ONEDNN_F16 = (
    "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512,undef,"
    "src:f16::blocked:ab::f0 wei:f16::blocked:ab::f0 dst:f16::blocked:ab::f0,"
    "attr-scratchpad:user,,256x256:256x256,0.109863"
)


@pytest.fixture
def fresh(monkeypatch):
    """A process that has seen no verbose output yet (what MKL and oneDNN print once)."""
    monkeypatch.setattr(kernel_ran, "SEEN", {})


def test_mkls_sgemm_line_and_its_header_name_the_library_dispatch_and_threads(fresh):
    said = kernel_ran.from_verbose(f"{MKL_HEADER}\n{MKL_SGEMM}\n")
    assert said == "oneMKL 2024.0 Update 2 SGEMM (AVX-512 with AMX dispatch), 2 threads"
    # MKL prints its header once per process: a later call's line alone says as much.
    assert kernel_ran.from_verbose(MKL_SGEMM) == said
    info = parse(said)
    assert (info.library, info.routine, info.isa, info.threads) == (
        "oneMKL 2024.0 Update 2",
        "SGEMM",
        "AVX-512 with AMX",
        2,
    )
    assert info.summary() == "oneMKL 2024.0 Update 2 SGEMM, AVX-512 with AMX dispatch, 2 threads"
    assert info.tile is None  # a CPU's line is no GPU name


def test_mkls_line_without_its_header_still_names_the_routine(fresh):
    said = kernel_ran.from_verbose(MKL_SGEMM)
    assert said == "MKL SGEMM, 2 threads"
    assert parse(said).routine == "SGEMM"


def test_onednns_exec_line_names_its_implementation_and_instruction_set(fresh):
    said = kernel_ran.from_verbose("\n".join([*ONEDNN_FIRST, ONEDNN_BF16]))
    assert said == "oneDNN 3.13.3 brg_matmul:avx10_1_512_amx, 2 threads"
    assert kernel_ran.from_verbose(ONEDNN_F16) == "oneDNN 3.13.3 brg_matmul:avx10_1_512, 2 threads"
    info = parse(said)
    assert (info.library, info.routine, info.isa, info.threads) == (
        "oneDNN 3.13.3",
        "brg_matmul",
        "avx10_1_512_amx",
        2,
    )


def test_output_that_names_no_kernel_names_none(fresh):
    assert kernel_ran.from_verbose("") is None
    assert kernel_ran.from_verbose("\n".join(ONEDNN_FIRST)) is None  # info, nothing executed


def test_numpys_blas_line_reads_back():
    info = parse("openblas 0.3.31.188.0, SkylakeX kernel, 2 threads")
    assert (info.library, info.isa, info.threads) == ("openblas 0.3.31.188.0", "SkylakeX", 2)
    assert info.summary() == "openblas 0.3.31.188.0, SkylakeX kernel, 2 threads"


def test_fd_1_is_captured_and_restored_even_when_the_call_raises(capfd):
    import os

    def writes_then_raises():
        os.write(1, b"from C\n")
        raise RuntimeError("the call failed")

    assert kernel_ran.stdout_of(lambda: os.write(1, b"printed by a library\n")) == (
        "printed by a library\n"
    )
    with pytest.raises(RuntimeError, match="the call failed"):
        kernel_ran.stdout_of(writes_then_raises)
    os.write(1, b"after\n")
    assert capfd.readouterr().out == "after\n"
