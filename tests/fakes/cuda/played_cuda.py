"""A CUDA stand-in: torch.cuda and NVML played on this CPU, so the GPU path runs end to end in
CI through the same seam a real GPU uses (roofline.kinds). Tensors stay on the CPU; events read
the host clock when recorded (CPU work is synchronous, so that is the work's time); a CUDA graph
records the torch calls made while it is captured and replays them; TunableOp registers only
"Default", as CUDA builds of torch do; NVML answers from the machine described below.

Selected from outside the process, as tests/fakes/old_driver is: put this folder first on
PYTHONPATH (its sitecustomize installs the stand-in in every Python process started so) and
name the machine in $PLAYED_MACHINE (default h100). In-process, `install(machine, setattr)`."""

import contextlib
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

H100_SXM = {
    "name": "NVIDIA H100 80GB HBM3",
    "capability": [9, 0],
    "sm_count": 132,
    "memory_bytes": 85 << 30,
    "l2_bytes": 50 << 20,
    "uuid": "8f0e2d6a-0000-4000-8000-000000000001",
    "power_limit_w": 700.0,
    "max_sm_mhz": 1980,
    "max_mem_mhz": 2619,
    "sm_mhz": 1755,
    "power_w": 690.0,
    "temp_c": 61,
    "reasons": 0x4,  # sw_power_cap
}
H100_PCIE = dict(
    H100_SXM,
    name="NVIDIA H100 PCIe",
    sm_count=114,
    uuid="8f0e2d6a-0000-4000-8000-000000000002",
    power_limit_w=350.0,
    max_sm_mhz=1755,
    sm_mhz=1620,
    power_w=340.0,
)
A100_MIG = {
    "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
    "capability": [8, 0],
    "sm_count": 42,
    "memory_bytes": 40 << 30,
    "l2_bytes": 20 << 20,
    "uuid": "5c1b7e00-0000-4000-8000-00000000000a",
    "mig_parent": {
        "name": "NVIDIA A100-SXM4-80GB",
        "uuid": "5c1b7e00-0000-4000-8000-0000000000ff",
        "power_limit_w": 400.0,
        "max_sm_mhz": 1410,
        "max_mem_mhz": 1593,
    },
    "sm_mhz": 1410,
    "power_w": 250.0,
    "temp_c": 55,
    "reasons": 0,
}

# Machines to play: a list of physical GPUs (NVML's order) and how the host's NVML behaves.
MACHINES = {
    # An H100 SXM pod with a recent driver: every NVML field answers.
    "h100": {"driver": "580.65.06", "gpus": [H100_SXM]},
    # A gVisor-like sandbox: NVML lists host PIDs (this process under another number, beside
    # another tenant's) and has no energy counter.
    "gvisor": {
        "driver": "570.124.06",
        "gpus": [H100_SXM],
        "host_pids": True,
        "energy": False,
        "others": [],
    },
    # A PCIe H100, as SkyPilot's plain "H100" can rent on some clouds.
    "h100_pcie": {"driver": "580.65.06", "gpus": [H100_PCIE]},
    # Two GPUs, the second chosen by CUDA_VISIBLE_DEVICES=1: torch's 0 is NVML's 1.
    "two_gpus": {"driver": "580.65.06", "gpus": [H100_SXM, H100_PCIE]},
    # One MIG slice of an A100: its own UUID; power and clocks are its parent's.
    "mig": {"driver": "580.65.06", "gpus": [A100_MIG]},
    # An H100 with a 1 MiB L2: tiny test shapes rotate over a few operand sets, not 4096.
    "small_l2": {"driver": "580.65.06", "gpus": [dict(H100_SXM, l2_bytes=1 << 20)]},
    # A shared GPU: another process computes on it.
    "shared": {
        "driver": "580.65.06",
        "gpus": [H100_SXM],
        "others": [{"pid": 4242, "name": "python3 train.py", "memory": 30 << 30}],
    },
}

HOST_PID_OFFSET = 700_000  # how far a sandbox's host numbers this process


def machine(name: str | dict | None = None) -> dict:
    """The machine to play: a name of MACHINES, a JSON file of the same form, or the dict; one
    that says `"like": NAME` is that machine with its other keys changed."""
    if not isinstance(name, dict):
        name = name or os.environ.get("PLAYED_MACHINE", "h100")
        if not name.endswith(".json"):
            return MACHINES[name]
        name = json.loads(Path(name).read_text())
    changes = dict(name)
    like = changes.pop("like", None)
    return {**MACHINES[like], **changes} if like else changes


class State:
    """What the played GPUs and this process have done (shared by torch.cuda and NVML)."""

    def __init__(self, played: dict) -> None:
        self.machine = played
        self.contexts: set[int] = set()  # physical GPUs this process made a context on
        self.current = 0  # torch's index
        self.started = time.perf_counter()
        self.captured_on: list = []  # the stream each CUDA graph was captured on
        self.streams_used: list = []  # streams entered with torch.cuda.stream
        self.tunable = {"enabled": False, "tuning": False, "file": "", "on_exit": True}
        self.tuned: list[tuple] = []

    def visible(self) -> list[int]:
        """Physical indices torch sees, in its order (CUDA_VISIBLE_DEVICES)."""
        every = list(range(len(self.machine["gpus"])))
        chosen = os.environ.get("CUDA_VISIBLE_DEVICES")
        if chosen is None:
            return every
        return [int(i) for i in chosen.split(",") if i.strip().isdigit() and int(i) in every]


state: State | None = None


def gpu(physical: int) -> dict:
    return state.machine["gpus"][physical]


# ---- torch.cuda, played ---------------------------------------------------------------------


class Event:
    def __init__(self, enable_timing: bool = False, **_: object) -> None:
        self.at: float | None = None

    def record(self, stream: object = None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: "Event") -> float:
        if self.at is None or end.at is None:
            raise RuntimeError("CUDA error: device not ready (an event was never recorded)")
        return (end.at - self.at) * 1e3  # milliseconds, as torch's


class Stream:
    def wait_stream(self, other: "Stream") -> None:
        pass

    def synchronize(self) -> None:
        pass


DEFAULT_STREAM = Stream()
_current_stream = [DEFAULT_STREAM]


def current_stream(device: object = None) -> Stream:
    return _current_stream[-1]


@contextlib.contextmanager
def stream(s: Stream):
    state.streams_used.append(s)
    _current_stream.append(s)
    try:
        yield
    finally:
        _current_stream.pop()


class CUDAGraph:
    """A graph as the torch calls made while it was captured, replayed in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def replay(self) -> None:
        for func, args, kwargs in self.calls:
            func(*args, **kwargs)


def _recorder(calls: list):
    from torch.overrides import TorchFunctionMode

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append((func, args, kwargs or {}))
            return func(*args, **(kwargs or {}))

    return Record()


class graph:
    def __init__(self, cuda_graph: CUDAGraph, pool: object = None, stream: object = None, **_):
        self.cuda_graph, self.stream = cuda_graph, stream

    def __enter__(self):
        state.captured_on.append(self.stream)
        self.mode = _recorder(self.cuda_graph.calls)
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.mode.__exit__(*exc)


def _tunable() -> SimpleNamespace:
    t = state.tunable

    def get_results() -> list[tuple]:
        return list(state.tuned)

    def enable(on: bool = True) -> None:
        t["enabled"] = on
        if on and t["tuning"]:
            _tune()

    def tuning_enable(on: bool = True) -> None:
        t["tuning"] = on
        if on and t["enabled"]:
            _tune()

    def _tune() -> None:
        # CUDA builds register cuBLAS's own call only; a played ROCm box may offer more.
        for solution in state.machine.get("tunable_solutions", ["Default"]):
            state.tuned.append(("GemmTunableOp_Half_TN", "tn_played", solution, 0.01))

    def write_file(filename: str | None = None) -> bool:
        path = Path(filename or t["file"])
        path.write_text("".join(f"{','.join(map(str, r))}\n" for r in state.tuned))
        return True

    return SimpleNamespace(
        enable=enable,
        is_enabled=lambda: t["enabled"],
        tuning_enable=tuning_enable,
        tuning_is_enabled=lambda: t["tuning"],
        set_filename=lambda name, insert_device_ordinal=False: t.update(file=name),
        get_filename=lambda: t["file"],
        write_file=write_file,
        write_file_on_exit=lambda on: t.update(on_exit=on),
        get_results=get_results,
    )


def _props(index: int) -> SimpleNamespace:
    g = gpu(state.visible()[index])
    return SimpleNamespace(
        name=g["name"],
        major=g["capability"][0],
        minor=g["capability"][1],
        multi_processor_count=g["sm_count"],
        total_memory=g["memory_bytes"],
        L2_cache_size=g["l2_bytes"],
        uuid=g["uuid"],
    )


def _index(device: object) -> int:
    if device is None:
        return state.current
    if isinstance(device, int):
        return device
    text = str(device)
    return int(text.split(":")[1]) if ":" in text else state.current


def _set_device(device: object) -> None:
    index = _index(device)
    if index >= len(state.visible()):
        raise RuntimeError(f"CUDA error: invalid device ordinal {index}")
    state.current = index
    state.contexts.add(state.visible()[index])


def torch_cuda() -> dict:
    """The attributes of torch.cuda the stand-in replaces."""
    return {
        "is_available": lambda: bool(state.visible()),
        "device_count": lambda: len(state.visible()),
        "get_device_properties": lambda device=None: _props(_index(device)),
        "get_device_name": lambda device=None: _props(_index(device)).name,
        "get_device_capability": lambda device=None: (
            _props(_index(device)).major,
            _props(_index(device)).minor,
        ),
        "set_device": _set_device,
        "current_device": lambda: state.current,
        "init": lambda: None,
        "is_initialized": lambda: True,
        "synchronize": lambda device=None: state.contexts.add(state.visible()[state.current]),
        "Event": Event,
        "Stream": lambda *a, **k: Stream(),
        "current_stream": current_stream,
        "stream": stream,
        "CUDAGraph": CUDAGraph,
        "graph": graph,
        "tunable": _tunable(),
        "mem_get_info": lambda device=None: (_props(_index(device)).total_memory,) * 2,
        "_sleep": lambda cycles: time.sleep(
            cycles / (gpu(state.visible()[state.current])["sm_mhz"] * 1e6)
        ),
    }


def begin(name: str | dict | None = None) -> State:
    """Start playing a machine (no import of torch or roofline: cheap in every process)."""
    global state
    state = State(machine(name))
    return state


def play_torch(torch, setattr_=setattr) -> None:
    for attribute, value in torch_cuda().items():
        setattr_(torch.cuda, attribute, value)
    said = state.machine.get("float8_raises")
    if said:  # a library that refuses float8 here (cuBLASLt, a scaled-matmul API that differs)

        def refuses(*args, **kwargs):
            raise RuntimeError(said)

        setattr_(torch.nn.functional, "scaled_mm", refuses)
        setattr_(torch, "_scaled_mm", refuses)


def play_kinds(kinds, setattr_=setattr) -> None:
    # The one line of the seam only a real GPU runs: tensors on the device.
    setattr_(kinds.Cuda, "tensors", lambda self: "cpu")


def install(name: str | dict | None = None, setattr_=setattr) -> State:
    """Play the machine in this process: torch.cuda's attributes and roofline.kinds' tensor
    placement replaced through `setattr_` (pytest's monkeypatch.setattr undoes them)."""
    import torch

    import roofline.kinds

    played = begin(name)
    play_torch(torch, setattr_)
    play_kinds(roofline.kinds, setattr_)
    return played
