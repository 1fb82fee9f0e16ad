"""NVML (nvidia-ml-py's `pynvml`) for the machine played_cuda plays, as strict as a real driver:
it is the installed nvidia-ml-py itself, its Python unchanged, loading a played
libnvidia-ml.so.1 instead of the driver's. Names, signatures, constants, exception classes and
return types are therefore the real library's (tests/test_standin_nvml.py checks it), and each
answer is what a real driver returns, refusals included:

- before nvmlInit (or after the last nvmlShutdown), NVMLError_Uninitialized;
- on a MIG slice's own handle, NVMLError_NotSupported for what belongs to the whole GPU
  (power, its limit, clocks, temperature, clock-event reasons, energy): ask its parent;
- a call newer than the driver (nvmlDeviceGetCurrentClocksEventReasons before R535), or one
  the machine lists in "missing_calls", is a missing C symbol: NVMLError_FunctionNotFound;
- where the container has no libnvidia-ml.so.1 ("nvml": "absent"), nvmlInit raises
  NVMLError_LibraryNotFound;
- a call nvidia-ml-py makes that no played driver answers is not offered at all
  (AttributeError), never answered with a figure a driver did not give.

Machine keys read (played_cuda.MACHINES): driver, cuda_driver, gpus (uuid, name, mig_parent,
power_limit_w, max_sm_mhz, max_mem_mhz, sm_mhz, mem_mhz, power_w, temp_c, reasons, gpm: GPM's
metrics by id on a GPU that has GPM, gpm_refused: ids it answers NOT_SUPPORTED), others,
host_pids, energy (False: no energy counter), nvml ("absent"), missing_calls and
refused_calls (C symbols this driver lacks, or answers NOT_SUPPORTED to)."""

import ctypes
import functools
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import time
from collections.abc import Callable as _Callable
from pathlib import Path as _Path

_FAKES = _Path(__file__).resolve().parents[1]  # tests/fakes: every stand-in lives under it

# Calls a driver gained at a branch: R525's NVML reference documents only
# nvmlDeviceGetCurrentClocksThrottleReasons; R535 added ...ClocksEventReasons, keeping the old
# name as deprecated (docs.nvidia.com/deploy/nvml-api: deprecated.html).
_SINCE = {"nvmlDeviceGetCurrentClocksEventReasons": 535}
# What a MIG slice's own handle answers (nvml.h: a MIG handle returns its MIG device name, its
# processes "per instance"); the rest is the whole GPU's, answered on the parent's handle.
_MIG_ANSWERS = {
    "nvmlDeviceGetName",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeRunningProcesses_v3",
}
# The GPU instance a played slice is (its processes say the same): one slice per played GPU.
_PLAYED_GPU_INSTANCE = 1
# The CUDA version each played driver branch reports, where a machine does not say it (CUDA
# toolkit release notes: 13.0 GA needs >= 580.65.06, 12.8 GA >= 570.26, 12.4 GA >= 550.54.14).
# How often the played energy counter moves: the slowest of the 20-100 ms the real one takes.
_ENERGY_STEP_S = 0.1
_CUDA_OF_BRANCH = {580: 13000, 570: 12080, 550: 12040}
# nvidia-ml-py's library state, not its API: the stand-in plays how the library loads.
_LIBRARY_STATE = {"nvmlLib", "libLoadLock", "CDLL"}


def _load_real(name: str):
    """A fresh copy of the installed nvidia-ml-py's pynvml, as module `name` (fresh, so the
    library it loads and initialises is this stand-in's alone)."""
    outside = [p for p in sys.path if not _Path(p or ".").resolve().is_relative_to(_FAKES)]
    found = importlib.machinery.PathFinder.find_spec("pynvml", outside)
    if found is None or not found.origin:
        raise ImportError(
            "nvidia-ml-py is not installed: the NVML stand-in plays a driver under it"
        )
    spec = importlib.util.spec_from_file_location(name, found.origin)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pynvml makes its NVMLError_* classes by finding itself there
    spec.loader.exec_module(module)
    return module


def _bodies(path: str) -> dict[str, str]:
    """Each top-level function of a Python file, by name: its text up to the next top-level
    line."""
    text = _Path(path).read_text(encoding="utf-8")
    return {m[1]: m[0] for m in re.finditer(r"^def (\w+)\(.*?(?=^\S|\Z)", text, re.M | re.S)}


def _symbols(bodies: dict[str, str], name: str, seen: set[str] | None = None) -> set[str]:
    """The C symbols a pynvml function resolves (_nvmlGetFunctionPointer), itself or through
    the pynvml functions it calls."""
    seen = seen if seen is not None else {name}
    body = bodies.get(name, "")
    found = set(re.findall(r'_nvmlGetFunctionPointer\("(\w+)"\)', body))
    for called in re.findall(r"\b(\w*nvml\w*)\(", body):
        if called not in seen:
            seen.add(called)
            found |= _symbols(bodies, called, seen)
    return found


def _public(real) -> dict:
    """What the stand-in offers: nvidia-ml-py's public names, less its library state and the
    functions that resolve a C symbol no played driver answers."""
    bodies = _bodies(real.__file__)
    offered = {}
    for name, value in vars(real).items():
        if name.startswith("_") or name in _LIBRARY_STATE or inspect.ismodule(value):
            continue
        # An alias (nvmlDeviceGetGpuInstanceProfileInfoV = ...) has its function's body.
        named = inspect.unwrap(value).__name__ if inspect.isfunction(value) else ""
        if named and not _symbols(bodies, named) <= _CALLS.keys():
            continue
        offered[name] = value
    return offered


def _play(
    real,
    machine: _Callable[[], dict],
    contexts: _Callable[[], set[int]],
    own_pid: _Callable[[], int],
) -> None:
    """Make `real` load the played driver: `machine()` is the machine's description,
    `contexts()` the physical GPUs this process made a context on, `own_pid()` this process
    as NVML numbers it."""

    def load(name: str, *args, **kwargs) -> "_Driver":  # ctypes.CDLL("libnvidia-ml.so.1")
        if machine().get("nvml") == "absent":
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return _Driver(real, machine, contexts, own_pid)

    real.CDLL = load


class _Refusal(Exception):
    """A played call's NVML return code, other than success."""

    def __init__(self, code: int) -> None:
        self.code = code


class _Driver:
    """libnvidia-ml.so.1 as the played machine's driver. ctypes finds a C symbol as an attribute
    (a missing one raises AttributeError, which pynvml turns into NVMLError_FunctionNotFound)
    and the call returns an NVML return code, writing its answers through the pointers given."""

    def __init__(
        self,
        real,
        machine: _Callable[[], dict],
        contexts: _Callable[[], set[int]],
        own_pid: _Callable[[], int],
    ) -> None:
        self.real, self.machine, self.contexts, self.own_pid = real, machine, contexts, own_pid
        self.inits = 0  # NVML counts nvmlInit calls; the last nvmlShutdown ends it
        self.loaded = time.perf_counter()
        self.cells = (ctypes.c_char * 256)()  # memory the played handles point into
        self.gpm_samples: dict[int, dict] = {}  # GPM sample buffers allocated, by address

    def __getattr__(self, symbol: str):
        if symbol.startswith("_"):
            raise AttributeError(symbol)
        played = self.machine()
        branch = int(played["driver"].split(".")[0])
        if symbol in played.get("missing_calls", ()) or branch < _SINCE.get(symbol, 0):
            raise AttributeError(f"libnvidia-ml.so.1: undefined symbol: {symbol}")
        if symbol not in _CALLS:
            raise NotImplementedError(f"the NVML stand-in plays no {symbol}: play it in {__file__}")
        if symbol == "nvmlErrorString":  # a code's words (const char *), not a return code
            return lambda code: _WORDS.get(int(code), "Unknown Error").encode()
        return functools.partial(self._call, symbol)

    def _call(self, symbol: str, *args) -> int:
        real = self.real
        if symbol != "nvmlInitWithFlags" and not self.inits:
            return real.NVML_ERROR_UNINITIALIZED
        if symbol in self.machine().get("refused_calls", ()):
            return real.NVML_ERROR_NOT_SUPPORTED
        try:
            _CALLS[symbol](self, symbol, *args)
        except _Refusal as refusal:
            return refusal.code
        return real.NVML_SUCCESS

    def handle(self, physical: int, mig: bool) -> int:
        return ctypes.addressof(self.cells) + 2 * physical + int(mig)

    def device(self, handle, symbol: str) -> tuple[int, bool]:
        """(physical index, whether a MIG slice's) of the played GPU a handle points at."""
        address = ctypes.cast(handle, ctypes.c_void_p).value or 0
        physical, mig = divmod(address - ctypes.addressof(self.cells), 2)
        gpus = self.machine()["gpus"]
        if not 0 <= physical < len(gpus) or (mig and "mig_parent" not in gpus[physical]):
            raise _Refusal(self.real.NVML_ERROR_INVALID_ARGUMENT)
        if mig and symbol not in _MIG_ANSWERS:
            raise _Refusal(self.real.NVML_ERROR_NOT_SUPPORTED)
        return physical, bool(mig)

    def whole(self, handle, symbol: str) -> tuple[dict, dict]:
        """(the board's limits, the live figures) of a whole GPU's handle: a MIG slice's GPU
        keeps its limits in "mig_parent", its live figures beside the slice's."""
        physical, _ = self.device(handle, symbol)
        g = self.machine()["gpus"][physical]
        if physical in _played_cuda().state.quiet:  # its last GEMM on constant inputs
            g = g | g["quiet_data"]
        return g.get("mig_parent", g), g


_CALLS: dict = {}  # C symbol -> its played body, (driver, symbol, *C arguments)


def _plays(symbol: str) -> _Callable:
    """Register a played C function's body under its symbol."""

    def register(body):
        _CALLS[symbol] = body
        return body

    return register


def _put(pointer, value) -> None:
    """Write through a byref() argument, as C writes through a pointer."""
    pointer._obj.value = value


def _put_handle(pointer, address: int) -> None:
    ctypes.c_void_p.from_address(ctypes.addressof(pointer._obj)).value = address


def _put_text(driver: _Driver, buffer, length, text: str) -> None:
    raw = text.encode()
    if len(raw) >= length.value:
        raise _Refusal(driver.real.NVML_ERROR_INSUFFICIENT_SIZE)
    buffer.value = raw


@_plays("nvmlInitWithFlags")
def _init(driver: _Driver, symbol: str, flags: int) -> None:
    driver.inits += 1


@_plays("nvmlShutdown")
def _shutdown(driver: _Driver, symbol: str) -> None:
    driver.inits -= 1


@_plays("nvmlSystemGetDriverVersion")
def _driver_version(driver: _Driver, symbol: str, buffer, length) -> None:
    _put_text(driver, buffer, length, driver.machine()["driver"])


@_plays("nvmlSystemGetCudaDriverVersion")
def _cuda_version(driver: _Driver, symbol: str, version) -> None:
    played = driver.machine()
    branch = int(played["driver"].split(".")[0])
    if "cuda_driver" not in played and branch not in _CUDA_OF_BRANCH:
        raise NotImplementedError(f"say the played machine's cuda_driver (driver {branch})")
    _put(version, played.get("cuda_driver", _CUDA_OF_BRANCH.get(branch)))


@_plays("nvmlSystemGetProcessName")
def _process_name(driver: _Driver, symbol: str, pid, buffer, length) -> None:
    names = {other["pid"]: other["name"] for other in driver.machine().get("others", [])}
    names.setdefault(driver.own_pid(), "python")
    if pid.value not in names:
        raise _Refusal(driver.real.NVML_ERROR_NOT_FOUND)
    _put_text(driver, buffer, length, names[pid.value])


@_plays("nvmlDeviceGetCount_v2")
def _count(driver: _Driver, symbol: str, count) -> None:
    _put(count, len(driver.machine()["gpus"]))  # NVML ignores CUDA_VISIBLE_DEVICES


@_plays("nvmlDeviceGetHandleByIndex_v2")
def _by_index(driver: _Driver, symbol: str, index, device) -> None:
    if index.value >= len(driver.machine()["gpus"]):
        raise _Refusal(driver.real.NVML_ERROR_INVALID_ARGUMENT)
    _put_handle(device, driver.handle(index.value, mig=False))  # a MIG GPU's: the whole GPU


@_plays("nvmlDeviceGetHandleByUUID")
def _by_uuid(driver: _Driver, symbol: str, uuid, device) -> None:
    wanted = (uuid.value or b"").decode()
    for physical, g in enumerate(driver.machine()["gpus"]):
        named = {f"GPU-{g['uuid']}": False}
        if "mig_parent" in g:
            named = {f"MIG-{g['uuid']}": True, f"GPU-{g['mig_parent']['uuid']}": False}
        if wanted in named:
            _put_handle(device, driver.handle(physical, named[wanted]))
            return
    raise _Refusal(driver.real.NVML_ERROR_NOT_FOUND)


@_plays("nvmlDeviceGetName")
def _name(driver: _Driver, symbol: str, handle, buffer, length) -> None:
    physical, mig = driver.device(handle, symbol)
    g = driver.machine()["gpus"][physical]
    _put_text(driver, buffer, length, g["name"] if mig else g.get("mig_parent", g)["name"])


@_plays("nvmlDeviceIsMigDeviceHandle")
def _is_mig(driver: _Driver, symbol: str, handle, answer) -> None:
    _put(answer, int(driver.device(handle, symbol)[1]))


@_plays("nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
def _parent(driver: _Driver, symbol: str, handle, device) -> None:
    physical, mig = driver.device(handle, symbol)
    if not mig:
        raise _Refusal(driver.real.NVML_ERROR_INVALID_ARGUMENT)
    _put_handle(device, driver.handle(physical, mig=False))


@_plays("nvmlDeviceGetGpuInstanceId")
def _gpu_instance(driver: _Driver, symbol: str, handle, answer) -> None:
    """A MIG slice's GPU instance; a whole GPU's handle is none's (nvml.h: INVALID_ARGUMENT)."""
    if not driver.device(handle, symbol)[1]:
        raise _Refusal(driver.real.NVML_ERROR_INVALID_ARGUMENT)
    _put(answer, _PLAYED_GPU_INSTANCE)


@_plays("nvmlDeviceGetEnforcedPowerLimit")
def _power_limit(driver: _Driver, symbol: str, handle, milliwatts) -> None:
    _put(milliwatts, int(driver.whole(handle, symbol)[0]["power_limit_w"] * 1000))


def _clock(driver: _Driver, clock: int, sm: float, mem: float) -> float:
    real = driver.real
    if clock not in (real.NVML_CLOCK_SM, real.NVML_CLOCK_MEM):
        raise NotImplementedError(f"the NVML stand-in plays the SM and memory clocks, not {clock}")
    return sm if clock == real.NVML_CLOCK_SM else mem


@_plays("nvmlDeviceGetMaxClockInfo")
def _max_clock(driver: _Driver, symbol: str, handle, clock, mhz) -> None:
    board, _ = driver.whole(handle, symbol)
    _put(mhz, _clock(driver, clock.value, board["max_sm_mhz"], board["max_mem_mhz"]))


@_plays("nvmlDeviceGetClockInfo")
def _clock_now(driver: _Driver, symbol: str, handle, clock, mhz) -> None:
    board, live = driver.whole(handle, symbol)
    # HBM runs at its one clock under load: the maximum, unless the machine says otherwise.
    mem = live.get("mem_mhz", board["max_mem_mhz"])
    _put(mhz, _clock(driver, clock.value, live["sm_mhz"], mem))


@_plays("nvmlDeviceGetPowerUsage")
def _power(driver: _Driver, symbol: str, handle, milliwatts) -> None:
    _put(milliwatts, int(driver.whole(handle, symbol)[1]["power_w"] * 1000))


@_plays("nvmlDeviceGetTemperature")
def _temperature(driver: _Driver, symbol: str, handle, sensor, celsius) -> None:
    _, live = driver.whole(handle, symbol)
    if sensor.value != driver.real.NVML_TEMPERATURE_GPU:
        raise _Refusal(driver.real.NVML_ERROR_INVALID_ARGUMENT)
    _put(celsius, live["temp_c"])


@_plays("nvmlDeviceGetCurrentClocksEventReasons")
@_plays("nvmlDeviceGetCurrentClocksThrottleReasons")
def _reasons(driver: _Driver, symbol: str, handle, mask) -> None:
    _put(mask, driver.whole(handle, symbol)[1]["reasons"])


@_plays("nvmlDeviceGetTotalEnergyConsumption")
def _energy(driver: _Driver, symbol: str, handle, millijoules) -> None:
    """Millijoules since the driver loaded: the played power over the played time, moving in
    steps of _ENERGY_STEP_S as the real counter does (every 20-100 ms on recent GPUs)."""
    _, live = driver.whole(handle, symbol)
    if not driver.machine().get("energy", True):
        raise _Refusal(driver.real.NVML_ERROR_NOT_SUPPORTED)
    elapsed = (time.perf_counter() - driver.loaded) // _ENERGY_STEP_S * _ENERGY_STEP_S
    _put(millijoules, int(1e9 + live["power_w"] * elapsed * 1000))


@_plays("nvmlDeviceGetComputeRunningProcesses_v3")
def _processes(driver: _Driver, symbol: str, handle, count, infos) -> None:
    """A slice's handle lists its own processes; a MIG GPU's whole handle lists them all only
    to a privileged caller (nvml.h), which a container is not."""
    real = driver.real
    physical, mig = driver.device(handle, symbol)
    if "mig_parent" in driver.machine()["gpus"][physical] and not mig:
        raise _Refusal(real.NVML_ERROR_NO_PERMISSION)
    found = [(o["pid"], o["memory"]) for o in driver.machine().get("others", [])]
    if physical in driver.contexts():
        found.append((driver.own_pid(), 600 << 20))
    room = count._obj.value
    _put(count, len(found))
    if infos is None or room < len(found):
        if found:
            raise _Refusal(real.NVML_ERROR_INSUFFICIENT_SIZE)
        return
    # Instance IDs: a slice's own (its played GPU instance, compute instance 0); else none.
    gpu_instance, compute_instance = (_PLAYED_GPU_INSTANCE, 0) if mig else (0xFFFFFFFF, 0xFFFFFFFF)
    for slot, (pid, memory) in zip(infos, found, strict=False):
        slot.pid, slot.usedGpuMemory = pid, memory
        slot.gpuInstanceId, slot.computeInstanceId = gpu_instance, compute_instance


# nvml.h's words for the codes the played driver returns that nvidia-ml-py's own table lacks
# (it asks nvmlErrorString for those).
_WORDS = {25: "Argument Version Mismatch"}  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
_CALLS["nvmlErrorString"] = None  # answered by _Driver.__getattr__ itself


# GPM (Hopper and newer): the played driver's sample buffers, by address, each with the GPU it
# was read on and when; NVML refreshes GPM's counters every 100 ms (nvmlGpmMetricsGet's note),
# so the stand-in refuses two samples closer than that (what a real driver answers is not
# documented: refusing is the strict side).
_GPM_REFRESH_S = 0.1


@_plays("nvmlGpmQueryDeviceSupport")
def _gpm_support(driver: _Driver, symbol: str, handle, support) -> None:
    asked = support._obj
    if asked.version != driver.real.NVML_GPM_SUPPORT_VERSION:
        raise _Refusal(driver.real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    physical, _ = driver.device(handle, symbol)
    asked.isSupportedDevice = int("gpm" in driver.machine()["gpus"][physical])


@_plays("nvmlGpmSampleAlloc")
def _gpm_alloc(driver: _Driver, symbol: str, sample) -> None:
    buffer = (ctypes.c_char * 64)()  # the opaque buffer the pointer points at, kept alive here
    driver.gpm_samples[ctypes.addressof(buffer)] = {"buffer": buffer}
    _put_handle(sample, ctypes.addressof(buffer))


def _gpm_sample(driver: _Driver, sample) -> dict:
    """A sample buffer the played driver allocated and has not freed."""
    found = driver.gpm_samples.get(ctypes.cast(sample, ctypes.c_void_p).value or 0)
    if found is None:
        raise _Refusal(driver.real.NVML_ERROR_INVALID_ARGUMENT)
    return found


@_plays("nvmlGpmSampleFree")
def _gpm_free(driver: _Driver, symbol: str, sample) -> None:
    _gpm_sample(driver, sample)
    del driver.gpm_samples[ctypes.cast(sample, ctypes.c_void_p).value]


@_plays("nvmlGpmSampleGet")
def _gpm_get(driver: _Driver, symbol: str, handle, sample) -> None:
    physical, _ = driver.device(handle, symbol)  # a MIG slice's handle: NOT_SUPPORTED
    g = driver.machine()["gpus"][physical]
    # A sliced board's own figures are not played (its slices' are): refused, the strict side.
    if "gpm" not in g or "mig_parent" in g:
        raise _Refusal(driver.real.NVML_ERROR_NOT_SUPPORTED)
    if driver.machine().get("container"):  # unprivileged: GPM refused (NVIDIA/DCGM#214)
        raise _Refusal(driver.real.NVML_ERROR_NO_PERMISSION)
    _gpm_sample(driver, sample).update(gpu=physical, instance=None, t=time.perf_counter())


@_plays("nvmlGpmMigSampleGet")
def _gpm_mig_get(driver: _Driver, symbol: str, handle, gpu_instance, sample) -> None:
    """A MIG slice's own sample: asked of its board's handle with its GPU instance (a slice's
    own handle is refused, as every call not in _MIG_ANSWERS is); an instance the board has no
    slice of is NOT_FOUND."""
    physical, _ = driver.device(handle, symbol)
    g = driver.machine()["gpus"][physical]
    if "gpm" not in g:
        raise _Refusal(driver.real.NVML_ERROR_NOT_SUPPORTED)
    instance = getattr(gpu_instance, "value", gpu_instance)  # nvidia-ml-py passes a bare int
    if "mig_parent" not in g or instance != _PLAYED_GPU_INSTANCE:
        raise _Refusal(driver.real.NVML_ERROR_NOT_FOUND)
    if driver.machine().get("container"):
        raise _Refusal(driver.real.NVML_ERROR_NO_PERMISSION)
    _gpm_sample(driver, sample).update(gpu=physical, instance=instance, t=time.perf_counter())


# GPM's tensor-pipe metrics: any tensor pipe, half-precision MMA (NVML_GPM_METRIC_ANY_TENSOR_UTIL,
# NVML_GPM_METRIC_HMMA_TENSOR_UTIL).
_TENSOR_METRICS = (5, 7)


@_plays("nvmlGpmMetricsGet")
def _gpm_metrics(driver: _Driver, symbol: str, asked) -> None:
    """Each metric asked of two samples of one GPU: its played value (the machine's "gpm", by
    metric id), or NOT_SUPPORTED in its own nvmlReturn (one the machine lists in
    "gpm_refused", or one it does not play). Its version is a plain 1
    (NVML_GPM_METRICS_GET_VERSION), not the structure's size: a structure of another size (an
    older binding's NVML_GPM_METRIC_MAX) cannot be told apart, and its numMetrics are read."""
    real, got = driver.real, asked._obj
    if got.version != real.NVML_GPM_METRICS_GET_VERSION:
        raise _Refusal(real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    first, second = _gpm_sample(driver, got.sample1), _gpm_sample(driver, got.sample2)
    if (
        "t" not in first
        or "t" not in second
        or (first["gpu"], first.get("instance")) != (second["gpu"], second.get("instance"))
        or second["t"] - first["t"] < _GPM_REFRESH_S
        or got.numMetrics > real.NVML_GPM_METRIC_MAX
    ):
        raise _Refusal(real.NVML_ERROR_INVALID_ARGUMENT)
    g = driver.machine()["gpus"][first["gpu"]]
    # A window whose GEMMs ran on the CUDA cores (float32 without TF32): its tensor pipes idle.
    idle = _TENSOR_METRICS if first["gpu"] in _played_cuda().state.simt else ()
    for i in range(got.numMetrics):
        slot = got.metrics[i]  # a view of the caller's structure, as C writes into it
        played = 0.0 if slot.metricId in idle else g["gpm"].get(slot.metricId)
        if played is None or slot.metricId in g.get("gpm_refused", ()):
            slot.nvmlReturn, slot.value = real.NVML_ERROR_NOT_SUPPORTED, 0.0
        else:
            slot.nvmlReturn, slot.value = real.NVML_SUCCESS, played


@_plays("nvmlDeviceGetViolationStatus")
def _violation(driver: _Driver, symbol: str, handle, policy, held) -> None:
    """Nanoseconds the clock was held for power (sw_power_cap set) or heat (a thermal reason
    set) since the driver loaded: all of the time where the reason is set, none elsewhere."""
    real = driver.real
    _, live = driver.whole(handle, symbol)
    bits = {real.NVML_PERF_POLICY_POWER: 0x4, real.NVML_PERF_POLICY_THERMAL: 0x20 | 0x40}
    if policy.value not in bits:
        raise NotImplementedError("the NVML stand-in plays the power and thermal policies")
    elapsed = time.perf_counter() - driver.loaded
    held._obj.referenceTime = int(time.time() * 1e6)  # a CPU timestamp, in microseconds
    held._obj.violationTime = int(elapsed * 1e9) if live["reasons"] & bits[policy.value] else 0


def _played_cuda():
    import played_cuda  # beside this file; imported when asked, so old_driver loads this without

    return played_cuda


def _own_pid() -> int:
    """This process as NVML numbers it: a sandbox lists host PIDs."""
    played = _played_cuda()
    offset = played.HOST_PID_OFFSET if played.state.machine.get("host_pids") else 0
    return os.getpid() + offset


_REAL = _load_real(f"{__name__}_real")
_play(
    _REAL,
    machine=lambda: _played_cuda().state.machine,
    contexts=lambda: _played_cuda().state.contexts,
    own_pid=_own_pid,
)
globals().update(_public(_REAL))
