"""amdsmi (ROCm's SMI library) for the machine played_cuda plays, as strict as a real host: it
is the installed `amdsmi` package itself, its Python unchanged, over a played libamd_smi.so in
place of ROCm's. Names, signatures, enums, exception classes and the dicts each call returns
are the real package's (tests/test_rocm.py checks it), and each answer is what the C
library writes through the pointers amdsmi_interface gives it:

- a host without libamd_smi.so (every played NVIDIA machine, or "amdsmi": "absent"): the
  import fails as the real one does, KeyError 'libamd_smi.so' after printing that it could not
  load it;
- before amdsmi_init (or after the last amdsmi_shut_down), AMDSMI_STATUS_NOT_INIT;
- a call the machine lists in "amdsmi_refused" (a VM guest without the energy counter:
  amdsmi_get_energy_count), AMDSMI_STATUS_NOT_SUPPORTED;
- a C function no played host answers raises NotImplementedError, never a made-up figure.

GPU keys read (played_cuda.MACHINES, an AMD GPU's): name, market_name, gfx (the architecture's
number, e.g. 0x942), cu_count, uuid, driver, power_cap_w, max_gfx_mhz, max_mem_mhz, gfx_mhz,
mem_mhz, power_w, temp_c, violations (amdsmi_violation_status_t flags set), xcds (its compute
dies, each clocked on its own; xcd_mhz, each one's clock where they differ), plus the machine's
others (processes) and amdsmi_refused. Optional: pci (its PCI domain, bus and device, else
played_cuda.pci_address's), amdsmi_uuid (amdsmi's UUID where it is not
torch's), a clock of None (not reported: the C library writes UINT32_MAX, which amdsmi's Python
shows as "N/A"), and power_field "average_socket_power" (a GPU before the MI300 series, which
reports that and no current_socket_power)."""

import ctypes
import importlib.machinery
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

_FAKES = Path(__file__).resolve().parents[1]
_CALLS: dict[str, Callable] = {}  # C symbol -> its played body (library, *C arguments)
_GPU_TAG = 0x1000  # played processor handles point here, plus the GPU's index
_SOCKET_TAG = 0x2000


def _plays(symbol: str) -> Callable:
    def register(body: Callable) -> Callable:
        _CALLS[symbol] = body
        return body

    return register


class _Refusal(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


class _Function:
    """One C function of the played library: ctypes sets its argtypes and restype, as on a
    real CDLL's function; calling it returns an amdsmi_status_t."""

    def __init__(self, library: "_Library", symbol: str) -> None:
        self.library, self.symbol = library, symbol
        self.argtypes, self.restype = None, None

    def __call__(self, *args):
        return self.library.call(self.symbol, *args)


class _Library:
    """libamd_smi.so as the played machine's: its symbols are found as attributes."""

    def __init__(self, machine: Callable[[], dict], wrapper: Callable[[], object]) -> None:
        self.machine, self.wrapper = machine, wrapper
        self.inits = 0
        self.loaded = time.perf_counter()
        self.functions: dict[str, _Function] = {}

    def __getattr__(self, symbol: str) -> _Function:
        if symbol.startswith("_"):
            raise AttributeError(symbol)
        return self.functions.setdefault(symbol, _Function(self, symbol))

    def call(self, symbol: str, *args) -> int:
        status = self.wrapper()
        if symbol not in _CALLS:
            raise NotImplementedError(
                f"the amdsmi stand-in plays no {symbol}: play it in {__file__}"
            )
        if symbol != "amdsmi_init" and not self.inits:
            return status.AMDSMI_STATUS_NOT_INIT
        if symbol in self.machine().get("amdsmi_refused", ()):
            return status.AMDSMI_STATUS_NOT_SUPPORTED
        try:
            _CALLS[symbol](self, *args)
        except _Refusal as refusal:
            return refusal.code
        return status.AMDSMI_STATUS_SUCCESS

    def gpus(self) -> list[dict]:
        return self.machine()["gpus"]

    def gpu(self, handle) -> dict:
        address = ctypes.cast(handle, ctypes.c_void_p).value or 0
        index = address - _GPU_TAG
        if not 0 <= index < len(self.gpus()):
            raise _Refusal(self.wrapper().AMDSMI_STATUS_INVAL)
        return self.gpus()[index]


def _put(pointer, value) -> None:
    """Write through a byref() argument, as C writes through a pointer."""
    pointer._obj.value = value


def _fill(pointer, **fields) -> None:
    for name, value in fields.items():
        setattr(pointer._obj, name, value)


@_plays("amdsmi_init")
def _init(lib: _Library, flags) -> None:
    lib.inits += 1


@_plays("amdsmi_shut_down")
def _shut_down(lib: _Library) -> None:
    lib.inits -= 1


@_plays("amdsmi_get_socket_handles")
def _sockets(lib: _Library, count, handles) -> None:
    _put(count, 1)  # one socket per played host: its GPUs are on it
    if handles:
        handles[0] = _SOCKET_TAG


@_plays("amdsmi_get_processor_handles")
def _processors(lib: _Library, socket, count, handles) -> None:
    gpus = lib.gpus()
    room = count._obj.value
    _put(count, len(gpus))
    if handles:
        if room < len(gpus):
            raise _Refusal(lib.wrapper().AMDSMI_STATUS_OUT_OF_RESOURCES)
        for i in range(len(gpus)):
            handles[i] = _GPU_TAG + i


@_plays("amdsmi_get_gpu_device_uuid")
def _uuid(lib: _Library, handle, length, buffer) -> None:
    g = lib.gpu(handle)
    raw = g.get("amdsmi_uuid", g["uuid"]).encode()
    if len(raw) >= length._obj.value:
        raise _Refusal(lib.wrapper().AMDSMI_STATUS_INSUFFICIENT_SIZE)
    buffer.value = raw


@_plays("amdsmi_get_gpu_device_bdf")
def _bdf(lib: _Library, handle, bdf) -> None:
    """The GPU's PCI address (domain, bus, device; function 0): played_cuda.pci_address."""
    import played_cuda

    lib.gpu(handle)  # a handle of no played GPU is refused first
    index = (ctypes.cast(handle, ctypes.c_void_p).value or 0) - _GPU_TAG
    domain, bus, device = played_cuda.pci_address(index)
    fields = bdf._obj.struct_amdsmi_bdf_t
    fields.domain_number, fields.bus_number = domain, bus
    fields.device_number, fields.function_number = device, 0


@_plays("amdsmi_get_gpu_asic_info")
def _asic(lib: _Library, handle, info) -> None:
    g = lib.gpu(handle)
    _fill(
        info,
        market_name=g["market_name"].encode(),
        vendor_id=0x1002,  # AMD's PCI vendor id
        vendor_name=b"Advanced Micro Devices Inc. [AMD/ATI]",
        num_of_compute_units=g["cu_count"],
        target_graphics_version=g["gfx"],
    )


@_plays("amdsmi_get_gpu_driver_info")
def _driver(lib: _Library, handle, info) -> None:
    lib.gpu(handle)
    _fill(info, driver_name=b"amdgpu", driver_version=lib.machine()["driver"].encode())


@_plays("amdsmi_get_power_cap_info")
def _power_cap(lib: _Library, handle, sensor, info) -> None:
    microwatts = int(lib.gpu(handle)["power_cap_w"] * 1e6)
    _fill(info, power_cap=microwatts, default_power_cap=microwatts, max_power_cap=microwatts)


@_plays("amdsmi_get_clock_info")
def _clock(lib: _Library, handle, clock, info) -> None:
    g, w = lib.gpu(handle), lib.wrapper()
    kind = getattr(clock, "value", clock)
    if kind == w.AMDSMI_CLK_TYPE_GFX:
        now, top = g["gfx_mhz"], g["max_gfx_mhz"]
    elif kind == w.AMDSMI_CLK_TYPE_MEM:
        now, top = g.get("mem_mhz", g["max_mem_mhz"]), g["max_mem_mhz"]
    else:
        raise NotImplementedError(f"the amdsmi stand-in plays the GFX and MEM clocks, not {kind}")
    unknown = 0xFFFFFFFF  # UINT32_MAX: what the C library writes for a clock it cannot read
    now, top = (unknown if v is None else v for v in (now, top))
    _fill(info, clk=now, min_clk=0, max_clk=top, clk_locked=0, clk_deep_sleep=0)


@_plays("amdsmi_get_power_info")
def _power(lib: _Library, handle, info) -> None:
    g = lib.gpu(handle)
    watts = int(g["power_w"])
    # The MI300 series reports current_socket_power; average_socket_power reads 0xFFFF ("N/A").
    # Earlier GPUs the reverse.
    field = g.get("power_field", "current_socket_power")  # None: neither reported
    unset = {"current_socket_power": 0xFFFF, "average_socket_power": 0xFFFF}
    reported = {field: watts} if field else {}
    _fill(info, socket_power=watts, **{**unset, **reported})


@_plays("amdsmi_get_energy_count")
def _energy(lib: _Library, handle, accumulator, resolution, timestamp) -> None:
    """A count of `resolution` microjoules since the driver loaded: the played power over the
    played time."""
    g = lib.gpu(handle)
    resolution_uj = 15.3
    elapsed = time.perf_counter() - lib.loaded
    _put(accumulator, int((1e9 + g["power_w"] * elapsed * 1e6) / resolution_uj))
    _put(resolution, resolution_uj)
    _put(timestamp, int(time.time() * 1e9))


@_plays("amdsmi_get_temp_metric")
def _temperature(lib: _Library, handle, sensor, metric, value) -> None:
    w = lib.wrapper()
    if getattr(sensor, "value", sensor) != w.AMDSMI_TEMPERATURE_TYPE_HOTSPOT:
        raise _Refusal(w.AMDSMI_STATUS_NOT_SUPPORTED)
    _put(value, lib.gpu(handle)["temp_c"])


# libamd_smi reads the violation counters twice, this far apart, inside each call: the call
# sleeps (amdsmi 7.0.2's amdsmi_get_violation_status).
_VIOLATION_SLEEP_S = 0.1


@_plays("amdsmi_get_violation_status")
def _violations(lib: _Library, handle, status) -> None:
    time.sleep(_VIOLATION_SLEEP_S)
    g = lib.gpu(handle)
    # Every counter this GPU does not report reads as all ones, which amdsmi shows as "N/A".
    struct = status._obj
    for name, kind in struct._fields_:
        if name.startswith("active_") and not hasattr(kind, "_length_"):
            setattr(struct, name, int(name in g.get("violations", ())))
        elif name.startswith(("per_", "acc_", "reference_", "violation_")) and not hasattr(
            kind, "_length_"
        ):
            setattr(struct, name, 0xFFFFFFFFFFFFFFFF)


# The firmware's accumulation period, played: its metrics table's accumulation counter advances
# once a period, and each residency counter once a period its limit held.
_ACCUMULATION_S = 0.001
# Each residency counter of the metrics table, by the violation flag whose time it counts.
_RESIDENCIES = {
    "ppt_residency_acc": "active_ppt_pwr",
    "socket_thm_residency_acc": "active_socket_thrm",
    "prochot_residency_acc": "active_prochot_thrm",
    "vr_thm_residency_acc": "active_vr_thrm",
    "hbm_thm_residency_acc": "active_hbm_thrm",
}


@_plays("amdsmi_get_gpu_metrics_info")
def _metrics(lib: _Library, handle, metrics) -> None:
    """The GPU's metrics table. Every field it does not play reads all ones, which amdsmi's
    Python shows as "N/A", as for a field the firmware does not report; played: each XCD's
    current GFX clock (past its XCDs, "N/A"), the socket power, and the accumulation counter
    beside each limit's residency (every period since the driver loaded while its flag is set,
    none otherwise)."""
    g = lib.gpu(handle)
    table = metrics._obj
    ctypes.memset(ctypes.addressof(table), 0xFF, ctypes.sizeof(table))
    for xcd, mhz in enumerate(g.get("xcd_mhz") or [g["gfx_mhz"]] * g["xcds"]):
        if mhz is not None:
            table.current_gfxclks[xcd] = mhz
    table.current_socket_power = int(g["power_w"])
    periods = int((time.perf_counter() - lib.loaded) / _ACCUMULATION_S)
    table.accumulation_counter = periods
    for counter, flag in _RESIDENCIES.items():
        setattr(table, counter, periods if flag in g.get("violations", ()) else 0)


@_plays("amdsmi_get_gpu_process_list")
def _processes(lib: _Library, handle, count, infos) -> None:
    lib.gpu(handle)
    found = [(o["pid"], o["name"], o["memory"]) for o in lib.machine().get("others", [])]
    found.append((os.getpid(), "python", 600 << 20))  # this process, as amdsmi lists it
    room = count._obj.value
    _put(count, len(found))
    if room < len(found):
        raise _Refusal(lib.wrapper().AMDSMI_STATUS_OUT_OF_RESOURCES)
    for slot, (pid, name, memory) in zip(infos, found, strict=False):
        slot.pid, slot.name, slot.mem = pid, name.encode(), memory


def _machine() -> dict:
    import played_cuda

    return played_cuda.state.machine if played_cuda.state else played_cuda.machine()


def _has_amdsmi(machine: dict) -> bool:
    """A host has libamd_smi.so where it has AMD GPUs, unless it says it lacks it."""
    amd = any("gfx" in g for g in machine["gpus"])
    return amd and machine.get("amdsmi") != "absent"


def _load_real(name: str):
    """The installed amdsmi package, as package `name`, with the played libamd_smi.so loaded by
    its own search (ctypes.CDLL, as its amdsmi_wrapper calls it) in place of ROCm's."""
    outside = [p for p in sys.path if not Path(p or ".").resolve().is_relative_to(_FAKES)]
    found = importlib.machinery.PathFinder.find_spec("amdsmi", outside)
    if found is None or not found.origin:
        raise ImportError("amdsmi is not installed: the amdsmi stand-in plays a host under it")
    for stale in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[stale]
    spec = importlib.util.spec_from_file_location(
        name, found.origin, submodule_search_locations=list(found.submodule_search_locations)
    )
    module = importlib.util.module_from_spec(spec)
    library = _Library(_machine, lambda: sys.modules[f"{name}.amdsmi_wrapper"])
    real_cdll = ctypes.CDLL

    def load(path, *args, **kwargs):
        if str(path).endswith("libamd_smi.so") and _has_amdsmi(_machine()):
            return library
        raise OSError(f"{path}: cannot open shared object file: No such file or directory")

    sys.modules[name] = module
    ctypes.CDLL = load
    try:
        spec.loader.exec_module(module)
    except BaseException:
        for stale in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[stale]
        raise
    finally:
        ctypes.CDLL = real_cdll
    return module


_REAL = _load_real(f"{__name__}_real")
globals().update({k: v for k, v in vars(_REAL).items() if not k.startswith("_")})
