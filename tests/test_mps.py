"""Apple's GPU, played (tests/fakes/cuda/played_mps.py: torch.mps over played hooks, float64
refused on the device in MPS's words): its points are checked against a float64 product computed
on the CPU, timed by MPS events, and measured through `dvc repro` on a played Mac."""

import csv
import inspect
import re

import pytest

from roofline.device import kinds
from roofline.measuring.matmul import measure_matmul
from tests.conftest import counted
from tests.machines import PLAYED_CACHES, STAND_IN, clone, dvc, make_project, results

MAC = {
    "cpu": {
        "model": "Apple M2 Pro",
        "logical_cores": 2,
        "isa": [],
        "system": "Darwin",
        "machine": "arm64",
        # its performance levels as macOS's sysctl lists them (roofline.device.core_types)
        "core_types": [
            {"name": "Performance cores", "cores": 1, "logical_cores": 1, "clusters": 1}
            | {"efficiency": False, "microarchitecture": None, "max_clock_ghz": None},
            {"name": "Efficiency cores", "cores": 1, "logical_cores": 1, "clusters": 1}
            | {"efficiency": True, "microarchitecture": None, "max_clock_ghz": None},
        ],
        **PLAYED_CACHES,
        "cache_bytes": 1 << 20,
        "memory_bytes": 16 << 30,
    },
    "gpus": [],
    "apple_gpus": [{"name": "Apple M2 Pro GPU", "memory_bytes": 16 << 30}],
}


@pytest.fixture
def stand_in(monkeypatch):
    """The Mac stand-in's module, its folder on the path for this test only (its pynvml.py
    would otherwise be every later test's)."""
    monkeypatch.syspath_prepend(str(STAND_IN))
    import played_mps

    return played_mps


@pytest.fixture
def mac(stand_in, monkeypatch):
    yield lambda macos="14.5": stand_in.install(macos, monkeypatch.setattr)
    stand_in.uninstall()


def point(dtype: str):
    return measure_matmul(
        64, 64, 64, dtype, kinds.Mps(), counted(1, 3, check_rows=8), cache_bytes=None
    )


def test_the_played_device_refuses_float64_and_float8_as_mps_does(mac):
    import torch

    mac()
    a = torch.randn(8, 8, device=kinds.Mps().tensors())
    with pytest.raises(TypeError, match="Cannot convert a MPS Tensor to float64 dtype"):
        a.double()
    with pytest.raises(TypeError, match="Float8_e4m3fn to the MPS backend but it does not"):
        a.to(torch.float8_e4m3fn)
    assert a.to("cpu", copy=True).double().dtype == torch.float64  # on the CPU, it exists
    start, end = torch.mps.Event(enable_timing=True), torch.mps.Event()
    start.record()
    end.record()
    with pytest.raises(RuntimeError, match="Events were not created with argument"):
        start.elapsed_time(end)


def test_an_mps_point_is_checked_on_the_cpu_and_timed_by_mps_events(mac, monkeypatch):
    mac()
    for dtype in ("float32", "float16"):
        measured = point(dtype)
        # Each event's record commits a command buffer: a short call is timed several to a
        # sample, so that a sample holds one commit, not one a call.
        timing = re.fullmatch(
            r"mps events, calls back to back, (\d+) calls a sample \(a command buffer commit a "
            r"sample\)",
            measured.timing,
        )
        assert measured.check_error < 1e-2 and timing and int(timing[1]) >= 2, measured.timing
        assert len(measured.samples) == 3 and all(s > 0 for s in measured.samples)
    # The check on the device, as it was before: MPS's own refusal, never a number.
    monkeypatch.setattr(kinds.Mps, "reference", None)
    with pytest.raises(TypeError, match="doesn't support float64"):
        point("float32")


def test_bfloat16_on_apples_gpu_needs_macos_14(mac):
    mac("13.6")
    with pytest.raises(TypeError, match="MPS BFloat16 is only supported on MacOS 14 or newer"):
        point("bfloat16")
    mac("14.5")
    assert point("bfloat16").check_error < 1e-2


@pytest.mark.slow
@pytest.mark.posix
def test_a_played_mac_measures_its_gpu_and_its_cpu_through_dvc_repro(tmp_path):
    """The pipeline up to its table on a played Mac (its description: an M2 Pro, Darwin on
    arm64, with its GPU): mps float32 and float16 measured, and no CPU row held to a peak it does
    not have. The pages rendered from the table are other tests' subject (tests/test_pipeline.py)."""
    mac = clone(make_project(tmp_path, gpus=("mps",), podhost=False), tmp_path / "mac", pull=False)
    played = {"PYTHONPATH": str(STAND_IN), "PLAYED_MPS": "14.5"}
    out = dvc(mac, "repro", "aggregate", hardware=MAC, env=played)
    record = results(mac, "mps")
    assert record["status"] == "measured", out
    assert {r["dtype"]: r["status"] for r in record["rows"]} == {
        "float16": "measured",
        "float32": "measured",
    }, record["rows"]
    assert all(
        " calls a sample (a command buffer commit a sample)" in r["timing"] for r in record["rows"]
    )
    assert all(r["timing_mode"] == "events" for r in record["rows"])
    assert record["found"] == MAC["apple_gpus"][0]
    with (mac / "experiments/x4-roofline/results.csv").open(encoding="utf-8") as table:
        rows = list(csv.DictReader(table))
    cpu = [r for r in rows if r["device"] == "cpu" and r["status"] == "measured"]
    assert cpu and all(r["mfu"] == "" and "above" not in r["flag"] for r in cpu), cpu
    # torch's float32 ran on Accelerate (the played torch says so), so on the matrix units.
    (torch_row,) = [r for r in cpu if r["backend"] == "torch"]
    assert torch_row["peak_source"].startswith(
        "no computed peak: Accelerate runs float32 on Apple M2 Pro's matrix units (AMX, or SME "
        "from M4), one per CPU cluster (1 of Performance cores, 1 of Efficiency cores)"
    ), torch_row["peak_source"]
    assert results(mac, "cpu")["libraries"]["torch"]["float32"] == "Accelerate"
    gpu = [r for r in rows if r["device"] == "mps"]
    assert {r["dtype"] for r in gpu if r["status"] == "measured"} == {"float16", "float32"}
    assert all(float(r["achieved_tflops"]) > 0 and r["mfu"] == "" for r in gpu)  # no peak


def test_every_hook_the_stand_in_plays_is_one_the_installed_torch_has(stand_in):
    import torch

    assert [name for name in stand_in.hooks() if not hasattr(torch._C, name)] == []
    # torch.mps's own Python reaches them: its Event, synchronize and availability.
    event = (torch.mps.event.Event.__init__, torch.mps.Event.record, torch.mps.synchronize)
    sources = "".join(inspect.getsource(f) for f in event)
    assert "_mps_acquireEvent" in sources and "_mps_recordEvent" in sources
    assert "_mps_deviceSynchronize" in sources


# What `system_profiler SPDisplaysDataType -json` prints on an 8-core M1 (the fields read).
M1_PROFILE = '{"SPDisplaysDataType": [{"_name": "Apple M1", "sppci_cores": "8"}]}'


def test_apples_gpu_peak_is_its_cores_x_128_x_2_x_its_chips_clock():
    from roofline.device.hardware import apple_gpu_cores
    from roofline.interpretation.apple_gpu import apple_gpu_peak

    cores = apple_gpu_cores(M1_PROFILE)
    assert cores == 8 and apple_gpu_cores("{}") is None and apple_gpu_cores("not json") is None
    m1 = {"name": "Apple M1 GPU", "memory_bytes": 16 << 30, "cores": cores}
    peak, how = apple_gpu_peak(m1, "float32")
    assert peak == pytest.approx(2.617, abs=1e-3)  # the source's own 2617 GFLOP/s
    assert how == "8 GPU cores x 128 ALUs x 2 (FMA) x 1278 MHz (philipturner/metal-benchmarks)"
    assert apple_gpu_peak(m1, "float16")[0] == peak  # FP16 at the FP32 rate
    seven = apple_gpu_peak(m1 | {"cores": 7}, "float32")[0]
    assert seven == pytest.approx(2.290, abs=1e-3)  # the 7-core M1
    # A chip whose clock the table lacks, or whose cores macOS did not say: no peak, and why.
    assert apple_gpu_peak(MAC["apple_gpus"][0] | {"cores": 19}, "float32").startswith(
        "no GPU clock is cited for Apple M2 Pro: add it to roofline/interpretation/apple_gpu.py"
    )
    assert "did not say how many GPU cores" in apple_gpu_peak(m1 | {"cores": None}, "float32")


def test_an_mps_rows_mfu_is_against_its_computed_peak_where_its_chip_is_cited():
    from roofline.configuration.measuring_config import to_plain
    from roofline.core.measurement import measurement
    from roofline.interpretation.datasheets import judged
    from roofline.interpretation.interpret import interpret
    from tests.conftest import device

    mps = judged("mps", to_plain(device(kind="mps", sku="Apple silicon GPU")), None)
    m1 = {"name": "Apple M1 GPU", "memory_bytes": 16 << 30, "cores": 8}
    seconds = 2 * 4096**3 / 2.0e12  # 2 TFLOP/s
    points = [measurement("mps", d, [4096] * 3, [seconds], 1e-3) for d in ("float32", "float16")]
    for row in interpret(points, mps, {"status": "measured", "found": m1}):
        assert row.peak_tflops == pytest.approx(2.617, abs=1e-3)
        assert row.mfu == pytest.approx(2.0 / 2.617, rel=1e-3) and not row.flag
    (row, _) = interpret(points, mps, {"status": "measured", "found": MAC["apple_gpus"][0]})
    assert row.mfu is None and row.peak_source.startswith("no computed peak: no GPU clock is")
