"""Apple's GPU (torch's mps) played on this CPU, as played_cuda plays torch.cuda: torch's own
torch.mps and torch.backends.mps Python runs over played C++ hooks (torch._C._mps_*, which a
Linux build has too, raising "without MPS backend"), and roofline.device.kinds.Mps keeps its
tensors on the CPU. It is meant to be as strict as a Mac, never friendlier:

- float64 does not exist on the device: a tensor made there, or computed from one, refuses to
  become float64 in MPS's words (pytorch#122602) until it is copied to the CPU
  (`.to("cpu", copy=True)`); a float8 tensor is refused too (MPS has no float8 type, #148420),
  and bfloat16 before macOS 14 (MPS's bfloat16 came with macOS 14, PR 119641);
- events are torch.mps.Event's own, over played hooks that keep MPSEvent.mm's checks: timing
  only between two events both made with enable_timing=True and both recorded, the end after
  the start (each records the host clock: the played device's work is synchronous); each
  record commits the command buffer, as MPSEvent.mm's recordLocked does, and its time is taken
  once the commit is done (COMMIT_S: a window of one call holds one commit);
- one stream, the default: torch.mps.Event.record refuses any other, as torch's does;
- torch's build says what a Mac's does: BLAS_INFO=accelerate, no MKL;
- the device is the process's once it makes a roofline.device.kinds.Mps: from then on every
  tensor made is made on it (the CPU's benchmark, a process of its own, makes none).

Selected from outside the process: this folder first on PYTHONPATH and $PLAYED_MPS set to the
macOS version played ("14.5"); sitecustomize.py then plays it in every Python process. In-process,
`install(version, setattr)`, then `uninstall()`."""

import itertools
import os
import sys
import time
import weakref

from played_cuda import install_stand_in, uninstall_stand_in

# MPS's refusals, as torch on a Mac words them.
FLOAT64 = (
    "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
    "Please use float32 instead."
)
FLOAT8 = "Trying to convert {} to the MPS backend but it does not have support for that dtype."
BFLOAT16 = "MPS BFloat16 is only supported on MacOS 14 or newer"
NOT_TIMED = "Events were not created with argument 'enable_timing=True'"
# What one record's commit costs the played device: the GPU waits for the host to commit the
# buffer and encode the next (a real Mac's is tens of microseconds and up; larger here, so that
# a window of one call shows it).
COMMIT_S = 0.001


class State:
    def __init__(self, macos: str) -> None:
        self.macos = tuple(int(x) for x in macos.split("."))
        self.on_device: dict[int, weakref.ref] = {}  # by id: a tensor's == is elementwise
        self.events: dict[int, dict] = {}
        self.commits = 0  # command buffers committed by recording an event
        self.ids = itertools.count(1)
        self.mode = None


state: State | None = None


def _tensors(values: object) -> list:
    import torch

    if isinstance(values, torch.Tensor):
        return [values]
    if isinstance(values, list | tuple):
        return [t for v in values for t in _tensors(v)]
    if isinstance(values, dict):
        return [t for v in values.values() for t in _tensors(v)]
    return []


def _on_device(tensor: object) -> bool:
    held = state.on_device.get(id(tensor))
    return held is not None and held() is tensor


def _put_on_device(tensor: object) -> None:
    key = id(tensor)
    state.on_device[key] = weakref.ref(tensor, lambda _: state and state.on_device.pop(key, None))


def _refuse(dtype: object) -> None:
    import torch

    if dtype == torch.float64:
        raise TypeError(FLOAT64)
    if "float8" in str(dtype):
        raise TypeError(FLOAT8.format(str(dtype).removeprefix("torch.").capitalize()))
    if dtype == torch.bfloat16 and state.macos < (14, 0):
        raise TypeError(BFLOAT16)


def _device_mode():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    to_copy = torch.ops.aten._to_copy.default

    class Device(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # as played_cuda's: no compiler imported for the played device

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            inputs = _tensors((args, kwargs))
            # A tensor made here (no tensor in) is made on the device; so is what is computed
            # from one there. A copy to the CPU leaves it.
            here = not inputs or any(_on_device(t) for t in inputs)
            leaves = func is to_copy and kwargs.get("device") == torch.device("cpu")
            if here and not leaves and "dtype" in kwargs and kwargs["dtype"] is not None:
                _refuse(kwargs["dtype"])
            out = func(*args, **kwargs)
            if here and not leaves:
                for tensor in _tensors(out):
                    _refuse(tensor.dtype)
                    _put_on_device(tensor)
            return out

    return Device()


# ---- torch._C's MPS hooks, played ------------------------------------------------------------


def _event(event_id: int) -> dict:
    if event_id not in state.events:
        raise RuntimeError(f"Invalid Event ID: {event_id}")
    return state.events[event_id]


def _acquire(enable_timing: bool) -> int:
    event_id = next(state.ids)
    state.events[event_id] = {"timing": enable_timing, "at": 0}
    return event_id


def _record(event_id: int) -> None:
    event = _event(event_id)
    state.commits += 1
    time.sleep(COMMIT_S)
    event["at"] = time.perf_counter_ns()


def _elapsed(start_id: int, end_id: int) -> float:
    start, end = _event(start_id), _event(end_id)
    if not (start["timing"] and end["timing"] and start["at"] and end["at"]):
        raise RuntimeError(NOT_TIMED)
    if end["at"] <= start["at"]:
        raise RuntimeError(f"End event {end_id} was not recorded after start event {start_id}")
    return (end["at"] - start["at"]) * 1e-6


class _Stream:
    """The one stream: torch.mps's Stream wraps a C++ type a Linux build lacks."""

    stream_id = 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Stream)

    __hash__ = object.__hash__


def hooks() -> dict:
    return {
        "_has_mps": True,
        "_mps_is_available": lambda: True,
        "_mps_is_on_macos_or_newer": lambda major, minor: state.macos >= (major, minor),
        "_mps_deviceSynchronize": lambda: None,
        "_mps_acquireEvent": _acquire,
        "_mps_releaseEvent": lambda event_id: state.events.pop(event_id, None),
        "_mps_recordEvent": lambda event_id, *sync: _record(event_id),
        "_mps_waitForEvent": lambda event_id, *sync: _event(event_id) and None,
        "_mps_synchronizeEvent": lambda event_id: _event(event_id) and None,
        "_mps_queryEvent": lambda event_id: bool(_event(event_id)["at"]),
        "_mps_elapsedTimeOfEvents": _elapsed,
        "_mps_emptyCache": lambda: None,
    }


def mac_config(linux: str) -> str:
    """torch.__config__.show() as a Mac's wheel says it: its BLAS and LAPACK are Apple's
    Accelerate (BLAS_INFO=accelerate), and no MKL is built in."""
    lines = [line for line in linux.splitlines() if "Math Kernel Library" not in line]
    text = "\n".join(lines)
    for linux_says, mac_says in (
        ("BLAS_INFO=mkl", "BLAS_INFO=accelerate"),
        ("LAPACK_INFO=mkl", "LAPACK_INFO=accelerate"),
        ("USE_MKL=ON", "USE_MKL=OFF"),
    ):
        text = text.replace(linux_says, mac_says)
    return text


def play_torch(torch, setattr_=setattr) -> None:
    for name, value in hooks().items():
        setattr_(torch._C, name, value)
    said = mac_config(torch.__config__.show())
    setattr_(torch.__config__, "show", lambda: said)
    stream = _Stream()
    setattr_(torch.mps, "current_stream", lambda: stream)
    setattr_(torch.mps, "default_stream", lambda: stream)


def _open() -> None:
    """The device's mode, from the first kinds.Mps made on: tensors made after are the GPU's (a
    CPU benchmark in a process of its own, as on a Mac, makes none)."""
    if state.mode is None:
        state.mode = _device_mode()
        state.mode.__enter__()


def play_kinds(kinds, setattr_=setattr) -> None:
    # The one line of the seam only a real Mac runs: tensors on the device.
    setattr_(kinds.Mps, "tensors", lambda self: "cpu")
    made = kinds.Mps.__init__

    def opened(self) -> None:
        made(self)
        _open()

    setattr_(kinds.Mps, "__init__", opened)


def begin(macos: str | None = None) -> State:
    global state
    state = State(macos or os.environ.get("PLAYED_MPS") or "14.5")
    return state


def install(macos: str = "14.5", setattr_=setattr) -> State:
    """Play a Mac's GPU in this process (pytest's monkeypatch.setattr undoes what is set)."""
    return install_stand_in(sys.modules[__name__], macos, setattr_)


def uninstall() -> None:
    uninstall_stand_in(sys.modules[__name__])
