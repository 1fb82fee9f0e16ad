"""The dtype registry: every per-dtype fact in one entry, and the tables derived from it."""

import pytest
import torch

from roofline.configuration.measuring_config import DType
from roofline.core import arithmetic as ar
from roofline.core.dtypes import CPU_FLAGS, DTYPES, LAB_DTYPE, NAMES, dtype
from roofline.measuring.matmul import torch_dtype, unsupported_reason
from tests.conftest import counted


def test_each_entry_matches_its_torch_dtype():
    for name, d in DTYPES.items():
        assert torch_dtype(name).itemsize == d.input_bytes, name
    assert DTYPES["tf32"].tf32 and torch_dtype("tf32") is torch.float32
    assert DTYPES["float8_e4m3fn"].output_bytes == 2  # torch's scaled matmul writes bfloat16


def test_the_config_allows_exactly_the_registry():
    assert [d.value for d in DType] == list(NAMES)
    assert set(LAB_DTYPE.values()) <= set(NAMES)


def test_an_unknown_dtype_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown dtype 'int4'; allowed: float32, tf32"):
        dtype("int4")


def test_cpu_paths_and_gpu_requirements():
    assert DTYPES["float32"].cpu[0].flags == ("avx512f",) and not DTYPES["tf32"].cpu
    assert {"avx512f", "avx2", "fma", "amx_bf16", "avx512_fp16"} <= set(CPU_FLAGS)
    assert ar.cpu_flop_per_cycle("bfloat16", {"avx512_bf16"}) == (
        128,
        "AVX512-BF16, 2 units assumed",
    )
    assert "needs AMX-FP16 or AVX512-FP16" in unsupported_reason("float16", "cpu", {"float32"})
    assert "compute capability >= 8.0; this GPU is 7.0" in unsupported_reason(
        "bfloat16", "cuda", None, "7.0"
    )
    assert DTYPES["float8_e4m3fn"].b_layout == "column-major"
    assert DTYPES["float16"].b_layout == "row-major"


@pytest.mark.parametrize(
    ("name", "nbytes"),
    [("float32", 48), ("tf32", 48), ("float16", 24), ("bfloat16", 24), ("float8_e4m3fn", 16)],
)
def test_bytes_of_a_2x2x2_product(name, nbytes):
    # A and B: 4 elements each at the input size; C: 4 at the output size.
    assert ar.matmul_bytes(2, 2, 2, name) == nbytes


def test_a_float8_pair_makes_b_in_its_own_dtype_and_shares_the_datasheets_fp8_figure(monkeypatch):
    """An entry whose B is another float8 (cuBLASLt's e5m2 x e4m3fn) and whose datasheet figure
    is the FP8 one, played under a name no real entry will take."""
    from dataclasses import replace

    from roofline.interpretation.datasheets import peaks_of
    from roofline.measuring import matmul

    e4m3 = DTYPES["float8_e4m3fn"]
    pair = replace(
        e4m3,
        name="played_pair",
        torch_name="float8_e5m2",
        b_torch_name="float8_e4m3fn",
        peak_as="float8_e4m3fn",
    )
    monkeypatch.setitem(DTYPES, "played_pair", pair)
    assert (pair.b_torch, e4m3.b_torch) == ("float8_e4m3fn", "float8_e4m3fn")
    prepared = matmul.prepare_matmul(
        32, 32, 32, "played_pair", "cpu", counted(check_rows=4), cache_bytes=0
    )
    assert prepared.check_error <= pair.tolerance
    [(a, b)] = matmul.operand_sets(
        32, 32, 32, "played_pair", "cpu", torch.Generator().manual_seed(0)
    )
    assert (a.dtype, b.dtype, b.stride(0)) == (torch.float8_e5m2, torch.float8_e4m3fn, 1)
    # The FP8 figure where the line names none for the pair; the line's own where it does.
    line = {"float16": 989.4, "float8_e4m3fn": 1978.9, "played_pair": None}
    peaks = peaks_of(line)
    # Other entries may share the FP8 figure too: only these three are this test's.
    assert {d: peaks[d] for d in line} == {
        "float16": 989.4,
        "float8_e4m3fn": 1978.9,
        "played_pair": 1978.9,
    }
    assert peaks_of(line | {"played_pair": 1000.0})["played_pair"] == 1000.0
    assert "played_pair" not in peaks_of({"float16": 989.4})
