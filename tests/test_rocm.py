"""An AMD GPU as a device (kind rocm): the MI300X recognised by its architecture, its float8
chosen by architecture, amdsmi's telemetry in the rows, AMD's best-shape figures shown as such;
and the ROCm stand-in (tests/fakes/cuda: played MI300X hosts, a played amdsmi) held to the
installed torch and amdsmi. End to end through `dvc repro` and `scripts/gpu-check`."""

import ast
import dataclasses
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from roofline import gpu_suite
from roofline.device.timing import BenchSettings
from roofline.gpu_suite import device_files, match
from roofline.machines.identity import find_device, identity, recognises, unmatched_gpus
from tests.machines import (
    AMDSMI_INSTALLED,
    NO_AMDSMI,
    ROOT,
    SHORT_WINDOW,
    STAND_IN,
    clone,
    dvc,
    gpu_check,
    make_project,
    results,
)

DEVICES = device_files(ROOT / "conf/device")
# The installed amdsmi's folder (None where it is not installed: the tests that read it skip).
_AMDSMI_SPEC = __import__("importlib").machinery.PathFinder.find_spec("amdsmi")
AMDSMI = Path(_AMDSMI_SPEC.origin).parent if _AMDSMI_SPEC else None
needs_amdsmi = pytest.mark.skipif(not AMDSMI_INSTALLED, reason=NO_AMDSMI)


def amd_gpu(name="AMD Instinct MI300X", architecture="gfx942") -> dict:
    return {
        "index": 0,
        "name": name,
        "compute_capability": "9.4",
        "architecture": architecture,
        "sm_count": 304,
        "memory_bytes": 196288 << 20,
    }


# ---- recognised by its architecture, or its name ---------------------------------------------


@pytest.mark.parametrize("name", ["AMD Instinct MI300X", "AMD Radeon Graphics"])
def test_an_mi300x_is_recognised_by_its_architecture_whatever_rocm_names_it(name):
    gpu = amd_gpu(name)
    found = [n for n, d in DEVICES.items() if find_device(d, {"cpu": {}, "gpus": [gpu]})]
    assert found == ["mi300x"]
    assert unmatched_gpus(DEVICES, {"cpu": {}, "gpus": [gpu]}) == []
    # The same hardware whatever its name: the architecture where NVIDIA has a capability.
    assert identity("rocm", gpu)["architecture"] == "gfx942"
    assert "compute_capability" not in identity("rocm", gpu)


def test_an_amd_gpu_is_never_an_nvidia_device_nor_the_reverse():
    mi300x = DEVICES["mi300x"]
    assert not recognises(mi300x, amd_gpu("AMD Instinct MI250X", "gfx90a"))  # not this device
    nvidia = {**amd_gpu("AMD Instinct MI300X"), "architecture": None}  # no architecture
    del nvidia["architecture"]
    assert not recognises(mi300x, nvidia)
    assert not recognises(DEVICES["h100"], dict(amd_gpu(), name="NVIDIA H100 80GB HBM3"))
    unknown = amd_gpu("AMD Instinct MI355X", "gfx950")
    assert unmatched_gpus(DEVICES, {"cpu": {}, "gpus": [unknown]}) == [unknown]


def test_the_mi300x_line_is_its_datasheets_and_the_radeon_name_gets_none(capsys):
    name, dev = match(amd_gpu(), DEVICES)
    assert name == "mi300x" and dev["sku"] == "MI300X OAM 192GB" and not dev["missing"]
    peaks = dev["peak_tflops"]
    assert (peaks["float16"], peaks["bfloat16"], peaks["float8_e4m3fnuz"]) == (
        1307.4,
        1307.4,
        2614.9,
    )
    assert (peaks["tf32"], peaks["float32"], dev["memory_bandwidth_gbps"]) == (653.7, 163.4, 5300)
    # 304 CUs x 2048 dense FP16 FLOP per clock x 2100 MHz: the datasheet's peak.
    assert 304 * 2048 * dev["peak_clock_mhz"] / 1e6 == pytest.approx(1307.4, abs=0.05)
    name, dev = match(amd_gpu("AMD Radeon Graphics"), DEVICES)
    assert name == "mi300x" and dev["peak_tflops"] == {}  # which MI300 it is: not said
    assert "no datasheet for 'AMD Radeon Graphics'" in capsys.readouterr().out


# ---- float8 by architecture ------------------------------------------------------------------


def test_float8_is_chosen_by_architecture_and_the_other_one_is_skipped_with_a_reason():
    from roofline.core.dtypes import float8_for
    from roofline.gpu_suite import suite_dtypes
    from roofline.measuring.matmul import unsupported_reason as why

    assert float8_for("gfx942") == "float8_e4m3fnuz" and float8_for("gfx950") == "float8_e4m3fn"
    assert float8_for(None) == "float8_e4m3fn"  # NVIDIA's
    assert "float8_e4m3fnuz" in suite_dtypes(amd_gpu())
    assert "float8_e4m3fn" not in suite_dtypes(amd_gpu())
    said = why("float8_e4m3fn", "rocm", None, "9.4", [64] * 3, "gfx942:sramecc+:xnack-")
    assert said == "gfx942 (ROCm) has no float8_e4m3fn matmul; this GPU's float8 is float8_e4m3fnuz"
    assert why("float8_e4m3fnuz", "rocm", None, "9.4", [64] * 3, "gfx942") is None
    assert why("tf32", "rocm", None, "9.5", None, "gfx950") == "gfx950 (ROCm) has no tf32 matmul"
    assert "NVIDIA's GPUs take float8_e4m3fn" in why("float8_e4m3fnuz", "cuda", None, "9.0")


# ---- AMD's best-shape figures: beside ours, never a yardstick --------------------------------


def test_a_best_shape_figure_is_shown_as_such_and_never_flags_the_lab_shape():
    import pandas as pd

    from roofline.interpretation.interpret import judge
    from roofline.interpretation.rows import KNOB_COLUMNS
    from roofline.rendering.report import summary_paragraph
    from tests.conftest import measured_row
    from tests.manifests import entry as manifest_entry

    published = DEVICES["mi300x"]["skus"]["oam"]["published"]
    assert all(p["best_shape"] and p["shape"] != [8192] * 3 for p in published)
    # Even a best-shape figure written at the lab's own shape never becomes its yardstick.
    published = [*published, {**published[0], "shape": [8192] * 3}]
    n = 8192
    head = measured_row(
        "mi300x", "float16", [n] * 3, [2 * n**3 / 400e12], 1307.4, "datasheet (dense)", 0.0
    )
    entry = manifest_entry(kind="rocm", datasheet={"published": published})
    figure, verdict = judge(entry, head)
    assert figure is None and verdict.flags == []  # 400 is far below 654: no flag
    rows = pd.DataFrame([__import__("dataclasses").asdict(head)])
    summary = summary_paragraph("mi300x", entry, rows, pd.DataFrame(columns=KNOB_COLUMNS))[0]
    assert "Published at its source's best shape, 4096×4864×32896 (not 8192×8192×8192)" in summary
    assert "654 TFLOP/s float16, a burst (AMD, ROCm/rocm-blogs" in summary
    assert (
        "this run's 8192×8192×8192 is 61% of it, shown for scale, not judged against it" in summary
    )
    assert "below published" not in summary and "Published for this SKU" not in summary


# ---- the ROCm stand-in, held to the installed torch and amdsmi --------------------------------


def wrapper_symbols() -> set[str]:
    """The C functions the installed amdsmi's wrapper binds from libamd_smi.so."""
    text = (AMDSMI / "amdsmi_wrapper.py").read_text(encoding="utf-8")
    return set(re.findall(r"^(\w+) = _libraries\['libamd_smi\.so'\]\.\1$", text, re.M))


def test_the_played_amdsmi_plays_only_c_functions_the_installed_one_binds(played):
    played("mi300x")
    import amdsmi as played_amdsmi

    spec = __import__("importlib").util.spec_from_file_location("x", STAND_IN / "amdsmi.py")
    assert set(vars(sys.modules["amdsmi"])) >= {"amdsmi_init", "AmdSmiLibraryException"}
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    played_symbols = {
        d.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        for d in node.decorator_list
        if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "_plays"
    }
    assert played_symbols and played_symbols <= wrapper_symbols()
    # Its Python is the installed package's, unchanged: same functions, same signatures.
    real = (AMDSMI / "amdsmi_interface.py").read_text(encoding="utf-8")
    for name in ("amdsmi_get_clock_info", "amdsmi_get_power_info", "amdsmi_get_energy_count"):
        function = getattr(played_amdsmi, name)
        assert inspect.getsourcefile(function).endswith("amdsmi/amdsmi_interface.py")
        assert f"def {name}(" in real


def test_the_played_mi300x_answers_as_amdsmi_does_and_refuses_what_a_vm_refuses(played):
    played("mi300x")
    import amdsmi

    with pytest.raises(amdsmi.AmdSmiLibraryException) as early:
        amdsmi.amdsmi_get_processor_handles()  # before amdsmi_init
    assert early.value.get_error_code() == amdsmi.amdsmi_wrapper.AMDSMI_STATUS_NOT_INIT
    amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
    (handle,) = amdsmi.amdsmi_get_processor_handles()
    asic = amdsmi.amdsmi_get_gpu_asic_info(handle)
    assert asic["market_name"] == "AMD Instinct MI300X"
    assert asic["target_graphics_version"] == "gfx942" and asic["num_compute_units"] == 304
    clock = amdsmi.amdsmi_get_clock_info(handle, amdsmi.AmdSmiClkType.GFX)
    assert clock["max_clk"] == 2100 and set(clock) >= {"clk", "min_clk", "clk_locked"}
    assert amdsmi.amdsmi_get_power_info(handle)["average_socket_power"] == "N/A"
    energy = amdsmi.amdsmi_get_energy_count(handle)
    assert set(energy) == {"energy_accumulator", "counter_resolution", "timestamp"}
    status = amdsmi.amdsmi_get_violation_status(handle)
    assert status["active_ppt_pwr"] is True and status["active_socket_thrm"] is False
    with pytest.raises(amdsmi.AmdSmiParameterException):
        amdsmi.amdsmi_get_clock_info(handle, 0)  # not an AmdSmiClkType: refused by its Python
    played("mi300x_vm")
    import amdsmi

    amdsmi.amdsmi_init()
    (handle,) = amdsmi.amdsmi_get_processor_handles()
    with pytest.raises(amdsmi.AmdSmiLibraryException) as refused:
        amdsmi.amdsmi_get_energy_count(handle)
    assert refused.value.get_error_code() == amdsmi.amdsmi_wrapper.AMDSMI_STATUS_NOT_SUPPORTED


@needs_amdsmi
def test_each_vendors_library_fails_on_the_others_host_as_the_real_one_does(played, capsys):
    code = "import amdsmi"  # the installed package, on this host without ROCm
    real = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert real.returncode == 1 and "KeyError: 'libamd_smi.so'" in real.stderr
    played("h100")
    with pytest.raises(KeyError, match=r"libamd_smi\.so"):
        import amdsmi  # noqa: F401
    assert "Unable to find libamd_smi.so" in capsys.readouterr().out  # as the real one prints
    played("mi300x")
    import pynvml

    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()  # no NVIDIA driver on an AMD host


def test_the_played_rocm_torch_is_a_hip_build_with_fnuz_float8_only(played):
    played("mi300x")
    assert torch.version.hip and torch.version.cuda is None
    props = torch.cuda.get_device_properties(0)
    assert props.gcnArchName == "gfx942:sramecc+:xnack-" and props.multi_processor_count == 304
    # The installed torch's property names: gcnArchName is a real one (HIP's).
    stub = (Path(torch.__file__).parent / "_C/__init__.pyi").read_text(encoding="utf-8")
    assert "    gcnArchName: str" in stub
    f = torch.nn.functional
    one, whole = torch.ones(()), f.ScalingType.TensorWise

    def scaled(dtype):
        a = torch.randn(32, 32).to(dtype)
        b = torch.randn(32, 32).to(dtype).t().contiguous().t()
        out = f.scaled_mm(a, b, one, whole, one, whole, output_dtype=torch.bfloat16)
        return out, (a.float() @ b.float()).to(torch.bfloat16)

    out, expected = scaled(torch.float8_e4m3fnuz)
    assert torch.equal(out, expected)
    with pytest.raises(RuntimeError, match="gfx942 \\(hipBLASLt\\) has no float8_e4m3fn"):
        scaled(torch.float8_e4m3fn)
    with pytest.raises(RuntimeError, match="gfx942 \\(hipBLASLt\\) has no float8_e5m2"):
        scaled(torch.float8_e5m2)  # OCP's other float8: refused there as e4m3fn is


def test_the_probe_records_the_architecture_and_amdsmis_limits(played):
    from roofline.device import kinds
    from roofline.device.hardware import gpu_info

    played("mi300x_radeon")
    (gpu,) = gpu_info()
    assert gpu["name"] == "AMD Radeon Graphics" and gpu["architecture"] == "gfx942"
    assert gpu["hip"] and "cublaslt" not in gpu and "nvml_error" not in gpu
    assert (gpu["driver"], gpu["power_limit_w"], gpu["max_sm_clock_mhz"]) == ("6.12.12", 750, 2100)
    assert find_device(DEVICES["mi300x"], {"cpu": {}, "gpus": [gpu]}) is gpu
    kind = kinds.gpu(gpu)
    assert isinstance(kind, kinds.Rocm) and kind.blas == "hipBLASLt" and not kind.telemetry_error
    assert kind.tunable_offers() == (0, "rocBLAS's and hipBLASLt's solutions (ROCm)")


def test_without_amdsmi_the_rows_say_telemetry_is_missing(played, monkeypatch):
    from roofline.device.hardware import gpu_info
    from roofline.measuring.measure import gpu_target

    played("mi300x", amdsmi="absent")  # ROCm's torch, no libamd_smi.so
    monkeypatch.setattr("roofline.device.amd_telemetry.KFD", ROOT)  # a ROCm driver is here
    (gpu,) = gpu_info()
    assert gpu["smi_error"].startswith("amdsmi: KeyError")
    said = []
    target = gpu_target(gpu, said.append)
    assert target.kind.monitor() is None and said[0].startswith("no amdsmi telemetry")


# ---- end to end ------------------------------------------------------------------------------


def rocm_env(machine: str) -> dict:
    return {"PYTHONPATH": str(STAND_IN), "PLAYED_MACHINE": machine, "ROOFLINE_HARDWARE": None}


@needs_amdsmi
@pytest.mark.posix
@pytest.mark.slow
def test_a_played_mi300x_runs_through_dvc_repro_with_fnuz_float8_and_amdsmi(tmp_path):
    origin = make_project(tmp_path, gpus=("mi300x",), podhost=False)
    pod = clone(origin, tmp_path / "pod", pull=False)
    out = dvc(pod, "repro", env=rocm_env("mi300x"))
    record = results(pod, "mi300x")
    assert record["status"] == "measured", out
    assert record["found"]["architecture"] == "gfx942" and record["found"]["power_limit_w"] == 750
    rows = {r["dtype"]: r for r in record["rows"] if r["series"] == "lab"}
    assert set(rows) == {"float16", "float8_e4m3fnuz", "float32"}
    for row in rows.values():
        assert row["status"] == "measured", row
        assert row["sm_clock_mhz"] == 1300 and row["power_source"] == SHORT_WINDOW
        assert row["clock_reason"] == "sw_power_cap" and row["telemetry_errors"] == ""
    with (pod / "experiments/x4-roofline/results.csv").open() as table:
        lines = [r for r in __import__("csv").DictReader(table) if r["device"] == "mi300x"]
    fp16 = next(r for r in lines if r["dtype"] == "float16" and r["series"] == "lab")
    assert float(fp16["peak_tflops"]) == 1307.4 and fp16["sku"] == "MI300X OAM 192GB"
    assert float(fp16["mfu"]) == pytest.approx(float(fp16["achieved_tflops"]) / 1307.4)
    report = (pod / "experiments/x4-roofline/REPORT.md").read_text(encoding="utf-8")
    assert "| mi300x | MI300X OAM 192GB | float16 |" in report
    assert "Published at its source's best shape, 4096×4864×32896" in report


# The copy's buffer small too: 1 GiB copied on the played GPU is this CPU's memcpy (6 s a run).
SMALL = [
    *("--size", "64", "--min-seconds", "0.01", "--warmup-seconds", "0.01"),
    *("--copy-mib", "16", "--no-knobs"),
]


def suite_on_mi300x(suite: dict, log: str) -> dict:
    """The GPU suite's record of a played MI300X, checked as every MI300X's: its float16 row."""
    assert suite["device"] == "mi300x" and suite["hardware"]["architecture"] == "gfx942"
    assert {r["dtype"]: r["status"] for r in suite["rows"]} == dict.fromkeys(
        ("float32", "tf32", "float16", "bfloat16", "float8_e4m3fnuz"), "measured"
    )
    fp16 = next(r for r in suite["rows"] if r["dtype"] == "float16")
    assert fp16["sm_clock_mhz"] == 1300 and fp16["power_source"] == SHORT_WINDOW
    assert "recognised as mi300x" in log and "gfx942, 304 CUs" in log
    return fp16


@needs_amdsmi
@pytest.mark.posix
@pytest.mark.slow
def test_gpu_check_runs_on_a_played_mi300x(tmp_path):
    out_dir = tmp_path / "check"
    code, out = gpu_check(out_dir, "mi300x", *SMALL)
    assert code == 0, out
    (suite,) = json.loads((out_dir / "gpu-suite.json").read_text())
    fp16 = suite_on_mi300x(suite, (out_dir / "gpu-suite.log").read_text())
    assert fp16["peak_tflops"] == 1307.4 and fp16["mfu"] > 0


def test_the_gpu_suite_recognises_an_mi300x_that_names_itself_radeon(played, tmp_path, capsys):
    """As ROCm names some MI300X ("AMD Radeon Graphics"): known by its architecture alone. The
    suite in this process (scripts/gpu-check runs it the same way: the test above)."""
    played("mi300x_radeon")
    out = tmp_path / "gpu-suite.json"
    gpu_suite.main([*SMALL, "--out", str(out)])
    (suite,) = json.loads(out.read_text())
    suite_on_mi300x(suite, capsys.readouterr().out)


def test_a_rocm_device_may_be_recognised_by_its_architecture_alone():
    from roofline.configuration.measuring_config import check
    from tests.conftest import config, device

    shape = {"dtypes": ["float16"], "shapes": [[64, 64, 64]]}
    by_arch = device(kind="rocm", recognise={"gpu_architecture": "^gfx942$"}, **shape)
    assert check(config({"mi300x": by_arch})) == []
    neither = device(kind="rocm", **shape)
    (error,) = check(config({"mi300x": neither}))
    assert "recognise.gpu_name is not set" in error and "or gpu_architecture" in error
    wrong = device(kind="rocm", recognise={"gpu_architecture": "gfx9(42"}, **shape)
    assert (
        "gpu_architecture='gfx9(42' is not a regular expression" in check(config({"x": wrong}))[0]
    )


# ---- what amdsmi cannot say, and a GPU shared with another process ---------------------------


BENCH = BenchSettings(
    seed=0, warmup=1, warmup_seconds=0.0, repeats=3, check_rows=8, min_seconds=0.0
)


def mi300x(**changes) -> dict:
    """The played MI300X (played_cuda.MI300X, importable while a machine is played) changed."""
    import played_cuda

    return {**played_cuda.MI300X, **changes}


def measured(gpu: dict, dtype: str = "float32", bench: BenchSettings = BENCH, calls: int = 1):
    """One point measured on the played AMD GPU as the benchmark measures it, and its row;
    `calls` a sample (the benchmark's calls_per_sample)."""
    from roofline.interpretation.rows import row
    from roofline.measuring.measure import gpu_target, measure_point

    said = []
    target = gpu_target(gpu, said.append)
    point = measure_point("mi300x", dtype, [64] * 3, target, bench, gpu, calls_per_sample=calls)
    assert point.status == "measured", point.reason
    return point, row(point), said


def test_a_window_of_a_second_or_more_has_its_power_from_amdsmis_energy_counter(played):
    from roofline.device.hardware import gpu_info

    played("mi300x")
    (gpu,) = gpu_info()
    # Ten calls a sample: a played 64^3 call can take 0.1 ms on a fast host, and 10,000 samples
    # of one (the cap on a window's samples) would cut the window short of its 1.2 s.
    bench = dataclasses.replace(BENCH, min_seconds=1.2)
    point, _, _ = measured(gpu, bench=bench, calls=10)
    assert point.window_s >= 1.2 and point.power_source == "energy counter"
    assert point.power_w == pytest.approx(740, rel=0.1)
    assert point.energy_j == pytest.approx(point.power_w * point.window_s, rel=0.05)


def test_an_amd_windows_end_is_not_stretched_by_amdsmis_sleeping_violation_call(played):
    import time

    from roofline.device.hardware import gpu_info
    from roofline.device.kinds import gpu as kind_of

    played("mi300x")
    (gpu,) = gpu_info()
    monitor = kind_of(gpu).monitor()
    # amdsmi_get_violation_status sleeps 100 ms inside each call, and the sampler reads it every
    # sample: the window ends when the timed work does, not when that call returns.
    # Windows that end at every phase of that call.
    over = []
    for seconds in (0.30, 0.32, 0.34, 0.36, 0.38):
        started = time.perf_counter()
        with monitor() as window:
            time.sleep(seconds)
        ended = time.perf_counter()
        over.append(window.window_s - seconds)
        assert window.window_s <= ended - started
    assert max(over) < 0.05, over


def test_the_rows_clock_is_the_lowest_xcds_and_the_metrics_table_says_what_held_it(played):
    """An MI300X's eight compute dies clock on their own, one slower here: the row's clock is
    the slowest's (AMD's "lowest XCD's median clock"), and its power cap held the clock for
    the whole window by the metrics table's residency counters, its heat for none of it."""
    from roofline.device.hardware import gpu_info

    played("mi300x", gpus=[mi300x(xcd_mhz=[1300] * 7 + [1250])])
    (gpu,) = gpu_info()
    point, _, _ = measured(gpu)
    assert point.sm_clock_mhz == 1250 and point.counter_errors == ""
    assert point.power_held_s == pytest.approx(point.window_s, abs=0.05)
    assert point.thermal_held_s == 0.0


def test_a_metrics_table_the_gpu_refuses_is_named_and_its_gfx_clock_is_read(played):
    from roofline.device.hardware import gpu_info

    played("mi300x", amdsmi_refused=("amdsmi_get_gpu_metrics_info",))  # as a VM guest may
    (gpu,) = gpu_info()
    point, _, _ = measured(gpu)
    assert point.sm_clock_mhz == 1300  # amdsmi_get_clock_info's GFX clock
    assert point.power_held_s is None and point.thermal_held_s is None  # never a zero
    assert point.counter_errors.startswith(
        "held times: amdsmi_get_gpu_metrics_info: AmdSmiLibraryException: "
    )
    assert "AMDSMI_STATUS_NOT_SUPPORTED" in point.counter_errors


def test_the_played_metrics_table_reads_na_for_every_field_it_does_not_play(played):
    played("mi300x")
    import amdsmi

    amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
    (handle,) = amdsmi.amdsmi_get_processor_handles()
    table = amdsmi.amdsmi_get_gpu_metrics_info(handle)
    assert table["current_gfxclks"] == [1300] * 8 and table["current_socket_power"] == 740
    assert table["ppt_residency_acc"] == table["accumulation_counter"] > 0
    assert table["socket_thm_residency_acc"] == table["hbm_thm_residency_acc"] == 0
    assert table["temperature_vrgfx"] == table["current_uclk"] == "N/A"  # not played
    assert table["xcp_stats.gfx_busy_inst"][0] == ["N/A"] * 8


def nothing_renumbered(monkeypatch) -> None:
    """This process's environment, whatever the shell running the tests set."""
    from roofline.core.depends import GPU_VISIBILITY

    for name in GPU_VISIBILITY:
        monkeypatch.delenv(name, raising=False)


# Two MI300X on one host whose amdsmi UUIDs are not the ones torch reports; the second's power
# cap lowered, so reading the wrong GPU shows.
def two_gpus(**changes) -> dict:
    return {
        "gpus": [
            mi300x(amdsmi_uuid="0b5f0000-0000-4000-8000-0000000000a0"),
            mi300x(
                uuid="1a2b3c4d-0000-4000-8000-000000000301",
                amdsmi_uuid="0b5f0000-0000-4000-8000-0000000000a1",
                power_cap_w=600.0,
                power_w=590.0,
            ),
        ],
        **changes,
    }


@pytest.mark.parametrize("refused", [(), ("amdsmi_get_gpu_device_uuid",)])
def test_where_amdsmis_uuids_are_not_torchs_each_gpu_is_found_by_its_pci_address(
    played, monkeypatch, refused
):
    from roofline.device import amd_telemetry, kinds
    from roofline.device.hardware import gpu_info

    nothing_renumbered(monkeypatch)
    played("mi300x", **two_gpus(amdsmi_refused=refused))  # UUIDs that differ, or none read
    first, second = gpu_info()
    assert "smi_error" not in first and "smi_error" not in second
    assert (first["power_limit_w"], second["power_limit_w"]) == (750, 600)  # each its own
    kind = kinds.gpu(second)
    assert not kind.telemetry_error
    assert amd_telemetry.power_w(kind.handle) == 590  # the second GPU's, not the first's


RENUMBERED = [
    ("HIP_VISIBLE_DEVICES", {}, "HIP_VISIBLE_DEVICES"),
    ("CUDA_VISIBLE_DEVICES", {}, "CUDA_VISIBLE_DEVICES"),
    ("ROCR_VISIBLE_DEVICES", {}, "ROCR_VISIBLE_DEVICES"),
    # A container given the second GPU's device files: torch sees one, while amdsmi lists
    # the host's two (as rocm-smi does in one: ROCm/ROCm-docker#49).
    (None, {"torch_sees": [1]}, "a different GPU count"),
]


@pytest.mark.parametrize(("variable", "changes", "why"), RENUMBERED)
def test_renumbered_gpus_whose_uuids_amdsmi_cannot_match_are_found_by_their_pci_address(
    played, monkeypatch, variable, changes, why
):
    from roofline.device import amd_telemetry, kinds
    from roofline.device.hardware import gpu_info

    nothing_renumbered(monkeypatch)
    if variable:
        monkeypatch.setenv(variable, "1,0")  # torch's 0 is the host's 1: amdsmi's order is not
    played("mi300x", **two_gpus(**changes))
    gpu = gpu_info()[0]
    assert gpu["uuid"] == "1a2b3c4d-0000-4000-8000-000000000301"  # the host's second GPU
    assert gpu["power_limit_w"] == 600 and "smi_error" not in gpu  # its own, not the first's
    kind = kinds.gpu(gpu)
    assert amd_telemetry.power_w(kind.handle) == 590  # the second GPU's, read by its address
    assert amd_telemetry.pci_address(0) == "0000:21:00"


@pytest.mark.parametrize(("variable", "changes", "why"), RENUMBERED)
def test_renumbered_gpus_amdsmi_cannot_match_at_all_get_no_telemetry_rather_than_anothers(
    played, monkeypatch, variable, changes, why
):
    from roofline.device import kinds
    from roofline.device.hardware import gpu_info

    nothing_renumbered(monkeypatch)
    if variable:
        monkeypatch.setenv(variable, "1,0")
    # An amdsmi that refuses the PCI address too, with UUIDs that are not torch's.
    played("mi300x", **two_gpus(amdsmi_refused=("amdsmi_get_gpu_device_bdf",), **changes))
    gpu = gpu_info()[0]
    assert "power_limit_w" not in gpu and "driver" not in gpu  # not the first GPU's 750 W
    assert gpu["smi_error"] == (
        "amdsmi: LookupError: amdsmi has no GPU at torch's PCI address 0000:21:00 nor with its "
        "UUID 1a2b3c4d-0000-4000-8000-000000000301, and its order cannot stand in for it "
        f"({why})"
    )
    kind = kinds.gpu(gpu)
    assert kind.monitor() is None
    assert kind.telemetry_error.startswith("no amdsmi telemetry: amdsmi has no GPU at torch's")


def test_renumbered_gpus_amdsmi_knows_by_uuid_are_read_whatever_their_order(played, monkeypatch):
    from roofline.device.hardware import gpu_info

    nothing_renumbered(monkeypatch)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1,0")
    second = mi300x(uuid="1a2b3c4d-0000-4000-8000-000000000301", power_cap_w=600.0)
    played("mi300x", gpus=[mi300x(), second])  # amdsmi's UUIDs are torch's
    first, second = gpu_info()
    assert (first["power_limit_w"], second["power_limit_w"]) == (600, 750)
    assert "smi_error" not in first


def test_a_limit_amdsmi_refuses_or_cannot_read_is_named_and_the_others_kept(played):
    from roofline.device.hardware import gpu_info

    # A guest that refuses the power cap and whose HBM clock reads "N/A".
    played("mi300x", gpus=[mi300x(max_mem_mhz=None)], amdsmi_refused=("amdsmi_get_power_cap_info",))
    (gpu,) = gpu_info()
    assert (gpu["driver"], gpu["max_sm_clock_mhz"]) == ("6.12.12", 2100)  # kept
    assert "power_limit_w" not in gpu and "max_mem_clock_mhz" not in gpu  # never a made-up figure
    power, clock = gpu["smi_error"].removeprefix("amdsmi: ").split("; ")
    assert power.startswith("power_limit_w: AmdSmiLibraryException: ")
    assert "AMDSMI_STATUS_NOT_SUPPORTED" in power
    assert "\n" not in power  # amdsmi's message spans lines: a record's field is one
    assert clock == "max_mem_clock_mhz: LookupError: amdsmi reports no MEM max_clk"


def test_a_clock_and_power_amdsmi_reports_as_na_are_row_errors_not_figures(played):
    from roofline.device.hardware import gpu_info

    played("mi300x_vm", gpus=[mi300x(gfx_mhz=None, power_field=None)])  # neither power field
    (gpu,) = gpu_info()
    assert gpu["max_sm_clock_mhz"] == 2100  # its maximum still reported
    point, line, _ = measured(gpu)
    assert point.sm_clock_mhz is None and point.sm_clock_max_mhz == 2100
    assert point.temperature_max_c == 70 and point.clock_reason == "sw_power_cap"  # still read
    assert point.power_w is None and point.power_source == ""
    errors = point.telemetry_errors
    assert "sm_mhz: LookupError: amdsmi reports no GFX clk" in errors
    assert "power_w: LookupError: amdsmi reports no socket power" in errors
    assert "mem_mhz" not in errors and line.joules_per_tflop is None


def test_a_gpu_before_the_mi300_series_has_its_power_from_average_socket_power(played):
    from roofline.device.hardware import gpu_info

    # One GCD of an MI250X (gfx90a, 110 of its 220 CUs, 64 of its 128 GB): amdsmi reports its
    # average_socket_power, and current_socket_power as "N/A". A guest without the energy
    # counter, so the row's power is the readings'.
    mi250x = mi300x(
        name="AMD Instinct MI250X",
        market_name="AMD Instinct MI250X",
        gcn_arch="gfx90a:sramecc+:xnack-",
        gfx=0x90A,
        capability=[9, 0],
        sm_count=110,
        cu_count=110,
        memory_bytes=64 << 30,
        power_field="average_socket_power",
        power_w=480.0,
    )
    played("mi300x_vm", gpus=[mi250x])
    (gpu,) = gpu_info()
    assert gpu["architecture"] == "gfx90a"
    point, _, _ = measured(gpu)
    assert point.power_w == 480 and "power_w" not in point.telemetry_errors
    assert point.power_source.startswith("mean of")


def test_a_shared_mi300x_names_the_other_processes_and_flags_the_row(played):
    from roofline.device.hardware import gpu_info

    others = [
        {"pid": 4242, "name": "python3 train.py", "memory": 30 << 30},
        {"pid": 4343, "name": "rocprofv3", "memory": 0},  # no memory of its own: none shown
    ]
    played("mi300x", others=others)
    (gpu,) = gpu_info()
    point, line, _ = measured(gpu)
    said = "pid 4242 python3 train.py, 30.0 GiB; pid 4343 rocprofv3"
    assert point.other_processes == said  # this process, which amdsmi lists too, left out
    assert f"shared GPU: other processes computed on it during the window ({said})" in line.flag
    played("mi300x")  # alone on it: no flag
    point, line, _ = measured(gpu_info()[0])
    assert point.other_processes == "" and "shared" not in line.flag


def test_tunableop_is_a_measured_knob_on_the_played_mi300x(played):
    from roofline.device.hardware import gpu_info
    from roofline.measuring.knobs import measure_knobs
    from roofline.measuring.measure import gpu_target
    from tests.test_standin import KNOBS, SETTINGS

    played("mi300x")
    (gpu,) = gpu_info()
    knobs = SimpleNamespace(rocm=KNOBS.cuda, **vars(KNOBS))  # the GPU knobs, by kind
    rows, tuning = measure_knobs("mi300x", gpu_target(gpu, print), gpu, knobs, SETTINGS, print)
    tunable = {r["knob"]: r for r in rows}["hipBLASLt -> TunableOp"]
    assert tunable["status"] == "measured", tunable["reason"]
    assert tunable["baseline"] == "hipBLASLt's heuristic"
    assert tunable["variant"] == (
        "TunableOp's search of rocBLAS's and hipBLASLt's solutions (ROCm), which picked Default"
    )
    assert "GemmTunableOp_Half_NN,nn_64_64,Default" in tuning  # appended as it was found


def test_a_rocm_gpu_lets_hipblaslt_run_tf32_before_any_matmul(played, monkeypatch):
    import os

    from roofline.device import kinds
    from roofline.device.hardware import gpu_info

    played("mi300x")
    environ = {k: v for k, v in os.environ.items() if k != "HIPBLASLT_ALLOW_TF32"}
    monkeypatch.setattr(os, "environ", environ)  # this process's, for this test only
    kind = kinds.gpu(gpu_info()[0])
    # Without it, ROCm's torch runs a "tf32" matmul as float32 (torch's own tests set it).
    assert kind.name == "rocm" and os.environ["HIPBLASLT_ALLOW_TF32"] == "1"


def test_the_first_gpu_script_times_amdsmis_violation_call_and_sets_its_uuids_beside_torchs(
    played,
):
    from roofline.device.hardware import gpu_info
    from roofline.first_gpu import amd_questions

    played("mi300x")
    (gpu,) = gpu_info()
    took, uuids = amd_questions(gpu)
    assert 100 <= int(took["answer"].removesuffix(" ms")) < 200  # it sleeps 100 ms inside
    assert uuids["means"] == "the same: each GPU's telemetry could be matched by UUID too"
