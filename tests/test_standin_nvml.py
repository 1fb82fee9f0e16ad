"""The NVML stand-ins (tests/fakes/cuda/pynvml.py, tests/fakes/old_driver/pynvml.py) held to
the installed nvidia-ml-py, and the lab held to what a strict driver answers.

Conformance is derived, not listed: every public name a stand-in offers is compared with the
real library's (names, parameters, constants, classes), and every C symbol its played driver
answers must be one nvidia-ml-py asks for. Then each refusal a real driver gives (a MIG slice's
handle, a call newer than the driver, no libnvidia-ml.so.1, NVML before nvmlInit) is played,
and the lab must still measure and name what it could not read."""

import ctypes
import importlib.machinery
import importlib.util
import inspect
import re
import sys
from pathlib import Path

import pytest

from roofline.core.errors import HardwareError
from roofline.device import hardware, kinds
from roofline.device.hardware import gpu_info
from roofline.device.timing import BenchSettings
from roofline.measuring.measure import describe, gpu_target, measure_point

FAKES = Path(__file__).parent / "fakes"
BENCH = BenchSettings(
    seed=0, warmup=1, warmup_seconds=0.0, repeats=3, check_rows=8, min_seconds=0.0
)


# ---- conformance ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real():
    """The installed nvidia-ml-py's pynvml, loaded under another name: in these tests the
    stand-in is `pynvml`."""
    outside = [p for p in sys.path if not Path(p or ".").resolve().is_relative_to(FAKES)]
    found = importlib.machinery.PathFinder.find_spec("pynvml", outside)
    assert found is not None and "site-packages" in found.origin, found
    spec = importlib.util.spec_from_file_location("nvidia_ml_py_pynvml", found.origin)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pynvml makes its NVMLError_* classes by finding itself
    spec.loader.exec_module(module)
    return module


def public(module) -> dict:
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }


def parameters(function) -> list[tuple]:
    """Names, kinds and defaults of a function's parameters (annotations aside)."""
    found = inspect.signature(function).parameters.values()
    return [(p.name, p.kind.name, p.default) for p in found]


def file_of(thing) -> Path:
    return Path(inspect.getfile(thing)).resolve()


def difference(ours, theirs) -> str:
    """How a stand-in's object differs from nvidia-ml-py's of the same name ("" if it does not)."""
    if ours is theirs:
        return ""
    if inspect.isclass(ours) or inspect.isclass(theirs):
        same = (
            inspect.isclass(ours)
            and inspect.isclass(theirs)
            and ours.__qualname__ == theirs.__qualname__
            and file_of(ours) == file_of(theirs)
        )
        return "" if same else f"{ours!r} is not nvidia-ml-py's class"
    if callable(ours) or callable(theirs):
        if not (inspect.isfunction(ours) and inspect.isfunction(theirs)):
            return f"{ours!r} is not the same kind of callable as {theirs!r}"
        if parameters(ours) != parameters(theirs):
            return f"parameters {parameters(ours)}, nvidia-ml-py's {parameters(theirs)}"
        return ""
    if isinstance(ours, ctypes._SimpleCData) and type(ours) is type(theirs):
        ours, theirs = ours.value, theirs.value
    if type(ours) is not type(theirs) or ours != theirs:
        return f"{ours!r} where nvidia-ml-py has {theirs!r}"
    return ""


def conformance_problems(standin, real) -> list[str]:
    """What a stand-in offers that the installed nvidia-ml-py does not, or offers otherwise: a
    name it lacks, a function with other parameters, a constant of another value, a class not
    its own; and a C symbol the played driver answers that nvidia-ml-py never resolves. []
    when the stand-in conforms."""
    problems = []
    for name, ours in sorted(public(standin).items()):
        if not hasattr(real, name):
            problems.append(f"{name}: not in nvidia-ml-py")
        elif found := difference(ours, getattr(real, name)):
            problems.append(f"{name}: {found}")
    source = Path(real.__file__).read_text(encoding="utf-8")
    asked = set(re.findall(r'_nvmlGetFunctionPointer\("(\w+)"\)', source))
    for symbol in sorted(set(getattr(standin, "_CALLS", {})) - asked):
        problems.append(f"{symbol}: played, but nvidia-ml-py never resolves it")
    return problems


def cuda_standin(played, machine: str = "h100", **changes):
    """The CUDA stand-in's NVML, playing `machine`."""
    played(machine, **changes)
    return sys.modules["pynvml"]


def old_driver_standin():
    spec = importlib.util.spec_from_file_location(
        "old_driver_pynvml", FAKES / "old_driver/pynvml.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cuda_standin_conforms_to_nvidia_ml_py(played, real):
    nvml = cuda_standin(played)
    assert conformance_problems(nvml, real) == []
    # Its functions are nvidia-ml-py's own Python: only the driver under them is played.
    functions = [
        f for n, f in public(nvml).items() if n.startswith("nvml") and inspect.isfunction(f)
    ]
    assert {file_of(f) for f in functions} == {file_of(real)}
    assert {"nvmlInit", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetHandleByUUID"} <= public(
        nvml
    ).keys()


def test_the_old_driver_standin_conforms_to_nvidia_ml_py(real):
    nvml = old_driver_standin()
    assert conformance_problems(nvml, real) == []
    nvml.nvmlInit()
    assert nvml.nvmlDeviceGetCount() == 1 and nvml.nvmlSystemGetDriverVersion() == "550.54.15"
    assert nvml.nvmlSystemGetCudaDriverVersion() == 12040
    assert nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(0)) == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("nvmlDeviceGetNoSuchThing", lambda handle: 0, "nvmlDeviceGetNoSuchThing: not in"),
        ("nvmlDeviceGetName", lambda device: "H100", "nvmlDeviceGetName: parameters"),
        ("NVML_CLOCK_SM", 7, "NVML_CLOCK_SM: 7 where nvidia-ml-py has 1"),
        ("NVMLError_NotSupported", type("NVMLError_NotSupported", (Exception,), {}), "class"),
    ],
)
def test_the_check_names_what_a_doctored_standin_invents(
    played, real, monkeypatch, name, value, said
):
    nvml = cuda_standin(played)
    monkeypatch.setattr(nvml, name, value, raising=False)
    (problem,) = conformance_problems(nvml, real)
    assert problem.startswith(name) and said in problem


def test_the_check_names_a_played_symbol_nvidia_ml_py_never_asks_for(played, real, monkeypatch):
    nvml = cuda_standin(played)
    monkeypatch.setitem(nvml._CALLS, "nvmlDeviceGetNoSuchSymbol", lambda *args: None)
    assert conformance_problems(nvml, real) == [
        "nvmlDeviceGetNoSuchSymbol: played, but nvidia-ml-py never resolves it"
    ]


def test_answers_have_the_types_nvidia_ml_py_returns(played):
    nvml = cuda_standin(played, "shared")
    nvml.nvmlInit()
    driver = nvml.nvmlSystemGetDriverVersion()  # c_char buffer, decoded by convertStrBytes
    assert type(driver) is str and driver == "580.65.06"
    assert type(nvml.nvmlDeviceGetCount()) is int
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(handle, nvml.c_nvmlDevice_t) and handle  # a pointer, not an index
    assert type(nvml.nvmlDeviceGetName(handle)) is str
    is_mig = nvml.nvmlDeviceIsMigDeviceHandle(handle)
    assert isinstance(is_mig, ctypes.c_uint) and is_mig.value == 0  # a c_uint, not an int
    assert type(nvml.nvmlDeviceGetPowerUsage(handle)) is int  # milliwatts
    (other,) = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    assert isinstance(other, nvml.nvmlFriendlyObject)
    assert vars(other) == {
        "pid": 4242,
        "usedGpuMemory": 30 << 30,
        "gpuInstanceId": 0xFFFFFFFF,  # no MIG
        "computeInstanceId": 0xFFFFFFFF,
    }
    assert nvml.nvmlSystemGetProcessName(4242) == "python3 train.py"
    with pytest.raises(nvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetHandleByUUID("GPU-no-such-uuid")
    with pytest.raises(nvml.NVMLError_InvalidArgument):  # an index is no handle
        nvml.nvmlDeviceGetPowerUsage(0)


# ---- strict answers -------------------------------------------------------------------------


def test_nvml_before_init_or_after_the_last_shutdown_is_uninitialized(played):
    nvml = cuda_standin(played)
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()  # no library loaded yet
    nvml.nvmlInit()
    nvml.nvmlInit()  # NVML counts them
    nvml.nvmlShutdown()
    assert nvml.nvmlDeviceGetCount() == 1
    nvml.nvmlShutdown()
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlSystemGetDriverVersion()
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlShutdown()


def test_a_mig_slice_handle_refuses_what_is_the_whole_gpus(played):
    nvml = cuda_standin(played, "mig")
    nvml.nvmlInit()
    slice_ = nvml.nvmlDeviceGetHandleByUUID("MIG-5c1b7e00-0000-4000-8000-00000000000a")
    refused = [
        lambda h: nvml.nvmlDeviceGetPowerUsage(h),
        lambda h: nvml.nvmlDeviceGetEnforcedPowerLimit(h),
        lambda h: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
        lambda h: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_MEM),
        lambda h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
        lambda h: nvml.nvmlDeviceGetCurrentClocksEventReasons(h),
        lambda h: nvml.nvmlDeviceGetTotalEnergyConsumption(h),
    ]
    for read in refused:
        with pytest.raises(nvml.NVMLError_NotSupported):
            read(slice_)
    assert nvml.nvmlDeviceGetName(slice_) == "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    assert nvml.nvmlDeviceIsMigDeviceHandle(slice_).value == 1
    assert nvml.nvmlDeviceGetComputeRunningProcesses(slice_) == []  # its own processes
    parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(slice_)
    assert nvml.nvmlDeviceGetName(parent) == "NVIDIA A100-SXM4-80GB"
    assert [read(parent) for read in refused] == [
        250_000,
        400_000,
        1410,
        1593,
        55,
        0,
        pytest.approx(1e9, rel=1e-3),
    ]
    with pytest.raises(nvml.NVMLError_NoPermission):  # every slice's processes: root only
        nvml.nvmlDeviceGetComputeRunningProcesses(parent)
    with pytest.raises(nvml.NVMLError_InvalidArgument):  # a whole GPU has no parent
        nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(parent)


def test_a_call_newer_than_the_driver_is_a_missing_function(played):
    nvml = cuda_standin(played, "h100", driver="525.147.05")
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(nvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)  # R535's name
    assert nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle) == 0x4
    nvml = cuda_standin(played, "h100", missing_calls=["nvmlDeviceGetTotalEnergyConsumption"])
    nvml.nvmlInit()
    with pytest.raises(nvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetTotalEnergyConsumption(nvml.nvmlDeviceGetHandleByIndex(0))


def test_a_container_without_libnvidia_ml_cannot_init_nvml(played):
    nvml = cuda_standin(played, "h100", nvml="absent")
    with pytest.raises(nvml.NVMLError_LibraryNotFound):
        nvml.nvmlInit()
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlSystemGetDriverVersion()


# ---- the lab on those hosts -----------------------------------------------------------------


def point(dtype: str = "float32"):
    """One point measured on the played GPU, as the benchmark measures it."""
    gpu = gpu_info()[0]
    return measure_point("h100", dtype, [64] * 3, gpu_target(gpu, print), BENCH, gpu)


def test_the_lab_asks_nvml_nothing_before_nvmlinit(played):
    cuda_standin(played, "h100")
    assert hardware.nvml_driver() == "580.65.06"  # on its own, before any other NVML call
    (gpu,) = gpu_info()
    assert "nvml_error" not in gpu and gpu["driver"] == "580.65.06"
    measured = point()
    assert measured.status == "measured" and measured.telemetry_errors == ""
    assert measured.sm_clock_mhz == 1755 and measured.throttle_reasons == "sw_power_cap"


def test_on_a_mig_slice_the_clocks_are_its_gpus_and_the_boards_power_is_not_read(played):
    cuda_standin(played, "mig")
    (gpu,) = gpu_info()
    assert gpu["power_limit_w"] == 400.0 and gpu["max_sm_clock_mhz"] == 1410  # its GPU's
    assert "nvml_error" not in gpu and gpu["mig_parent"] == "NVIDIA A100-SXM4-80GB"
    measured = point()
    assert measured.status == "measured" and measured.samples_s
    # The slice's handle refuses the board's figures: its clock is read from its GPU (every
    # slice runs at it); the board's power, every slice's, is not read, and says so.
    assert measured.sm_clock_mhz == 1410 and measured.temperature_max_c == 55
    assert measured.power_w is None and measured.energy_j is None
    assert measured.telemetry_errors.split("; ") == [
        "energy: NVMLError_NotSupported: Not Supported",
        "power_w: SharedBoard: a MIG slice shares its board's power with the other slices",
    ]
    assert describe(measured).startswith("h100 float32 [64, 64, 64] (torch): ")


def test_on_a_driver_before_r535_the_clock_event_reasons_come_from_the_older_call(played):
    cuda_standin(played, "h100", driver="525.147.05")
    measured = point()
    assert measured.status == "measured" and measured.telemetry_errors == ""
    assert measured.throttle_reasons == "sw_power_cap"


def test_a_call_the_driver_lacks_is_named_and_the_rest_is_measured(played):
    cuda_standin(played, "h100", missing_calls=["nvmlDeviceGetTotalEnergyConsumption"])
    measured = point()
    assert measured.status == "measured" and measured.energy_j is None
    assert measured.power_source.startswith("mean of the power readings")
    assert measured.telemetry_errors == "energy: NVMLError_FunctionNotFound: Function Not Found"


def test_a_gpu_that_answers_clocks_but_refuses_power_is_described(played):
    # As a GeForce does (nicolargo/glances#1523: nvmlDeviceGetPowerUsage -> NotSupported).
    refused = ["nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEnergyConsumption"]
    cuda_standin(played, "h100", refused_calls=refused)
    measured = point()
    assert measured.status == "measured" and measured.sm_clock_mhz == 1755
    assert (
        measured.power_w is None and "power_w: NVMLError_NotSupported" in measured.telemetry_errors
    )
    assert "SM 1755 MHz" in describe(measured)


def test_a_container_with_cuda_but_no_nvml_still_finds_and_measures_its_gpu(played, monkeypatch):
    # NVIDIA_DRIVER_CAPABILITIES=compute mounts libcuda.so but not libnvidia-ml.so
    # (libnvidia-container's compute_libs and utility_libs).
    cuda_standin(played, "h100", nvml="absent")
    monkeypatch.setattr(hardware, "cuda_driver_loads", lambda: True)
    (gpu,) = gpu_info()
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and "power_limit_w" not in gpu
    assert gpu["nvml_error"] == "NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    kind = kinds.Cuda(0, gpu["uuid"])
    assert kind.monitor() is None and "NVML Shared Library Not Found" in kind.telemetry_error
    measured = point()
    assert measured.status == "measured" and measured.samples_s
    assert measured.sm_clock_mhz is None and measured.power_w is None  # nothing invented


def test_without_either_driver_library_there_is_no_gpu_and_torch_is_not_asked(played, monkeypatch):
    cuda_standin(played, "h100", nvml="absent")
    monkeypatch.setattr(hardware, "cuda_driver_loads", lambda: False)
    monkeypatch.setattr(kinds, "cuda_available", lambda: pytest.fail("torch was asked"))
    assert hardware.gpu_count() == 0 and gpu_info() == []


def test_a_driver_too_old_for_torch_stops_by_name(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", old_driver_standin())
    monkeypatch.setattr(kinds, "cuda_available", lambda: (False, ""))  # as on that host
    monkeypatch.setattr("torch.version.cuda", "13.0")
    with pytest.raises(HardwareError) as stopped:
        gpu_info()
    assert "NVML sees 1 NVIDIA GPU (driver 550.54.15)" in str(stopped.value)
    assert "CUDA 13 needs driver >= 580" in str(stopped.value)
