"""NVML (nvidia-ml-py's `pynvml`) played for the machine played_cuda plays: what the roofline
lab calls, answering as a real driver does, refusals included (NVMLError)."""

import os
import time

import played_cuda

NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    def __str__(self) -> str:
        return "Not Supported"


class NVMLError_NotFound(NVMLError):
    def __str__(self) -> str:
        return "Not Found"


class Handle:
    def __init__(self, physical: int, mig: bool = False) -> None:
        self.physical, self.mig = physical, mig

    def gpu(self) -> dict:
        return played_cuda.gpu(self.physical)

    def whole(self) -> dict:
        """The whole GPU's figures (a MIG slice's parent)."""
        g = self.gpu()
        return g["mig_parent"] if "mig_parent" in g and not self.mig else g


def _machine() -> dict:
    return played_cuda.state.machine


def nvmlInit() -> None:
    pass


def nvmlShutdown() -> None:
    pass


def nvmlSystemGetDriverVersion() -> str:
    return _machine()["driver"]


def nvmlDeviceGetCount() -> int:
    return len(_machine()["gpus"])  # NVML ignores CUDA_VISIBLE_DEVICES


def nvmlDeviceGetHandleByIndex(index: int) -> Handle:
    if not 0 <= index < nvmlDeviceGetCount():
        raise NVMLError("Invalid Argument")
    return Handle(index)  # a MIG slice's index is its parent's: the whole GPU


def nvmlDeviceGetHandleByUUID(uuid: str) -> Handle:
    for physical, g in enumerate(_machine()["gpus"]):
        if "mig_parent" in g:
            if uuid == f"MIG-{g['uuid']}":
                return Handle(physical, mig=True)
            if uuid == f"GPU-{g['mig_parent']['uuid']}":
                return Handle(physical)
        elif uuid == f"GPU-{g['uuid']}":
            return Handle(physical)
    raise NVMLError_NotFound()


def nvmlDeviceIsMigDeviceHandle(handle: Handle) -> int:
    return int(handle.mig)


def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle: Handle) -> Handle:
    return Handle(handle.physical)


def nvmlDeviceGetName(handle: Handle) -> str:
    g = handle.gpu()
    return g["name"] if handle.mig or "mig_parent" not in g else g["mig_parent"]["name"]


def _whole(handle: Handle, key: str):
    if handle.mig:  # a slice answers nothing of the whole board's limits
        raise NVMLError_NotSupported()
    return handle.whole()[key]


def nvmlDeviceGetEnforcedPowerLimit(handle: Handle) -> int:
    return int(_whole(handle, "power_limit_w") * 1000)


def nvmlDeviceGetMaxClockInfo(handle: Handle, clock: int) -> int:
    return _whole(handle, "max_sm_mhz" if clock == NVML_CLOCK_SM else "max_mem_mhz")


def nvmlDeviceGetClockInfo(handle: Handle, clock: int) -> int:
    g = handle.gpu()
    return g["sm_mhz"] if clock == NVML_CLOCK_SM else g.get("mem_mhz", 2619)


def nvmlDeviceGetPowerUsage(handle: Handle) -> int:
    if "power_w" in _machine().get("failing", []):
        raise NVMLError_NotSupported()
    return int(handle.gpu()["power_w"] * 1000)


def nvmlDeviceGetTemperature(handle: Handle, sensor: int) -> int:
    return handle.gpu()["temp_c"]


def nvmlDeviceGetCurrentClocksEventReasons(handle: Handle) -> int:
    return handle.gpu()["reasons"]


def nvmlDeviceGetTotalEnergyConsumption(handle: Handle) -> int:
    """Millijoules since the driver loaded: the played power over the played time."""
    if not _machine().get("energy", True):
        raise NVMLError_NotSupported()
    elapsed = time.perf_counter() - played_cuda.state.started
    return int(1e9 + handle.gpu()["power_w"] * elapsed * 1000)


class Process:
    def __init__(self, pid: int, memory: int) -> None:
        self.pid, self.usedGpuMemory = pid, memory


def own_pid() -> int:
    offset = played_cuda.HOST_PID_OFFSET if _machine().get("host_pids") else 0
    return os.getpid() + offset


def nvmlDeviceGetComputeRunningProcesses(handle: Handle) -> list[Process]:
    found = [Process(o["pid"], o["memory"]) for o in _machine().get("others", [])]
    if handle.physical in played_cuda.state.contexts:
        found.append(Process(own_pid(), 600 << 20))
    return found


def nvmlSystemGetProcessName(pid: int) -> str:
    for other in _machine().get("others", []):
        if other["pid"] == pid:
            return other["name"]
    if pid == own_pid():
        return "python"
    raise NVMLError_NotFound()
