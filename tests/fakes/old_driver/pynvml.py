"""A stand-in for NVML (nvidia-ml-py's `pynvml`) on a rented host whose driver is too old for
the locked torch: NVML sees an H100 on driver 550, while torch (a CUDA 13 build, here without
any driver) cannot use it. Put this folder first on PYTHONPATH to play that host.

It is the CUDA stand-in's NVML (tests/fakes/cuda/pynvml.py: the installed nvidia-ml-py over a
played libnvidia-ml.so.1) playing this one machine, so it is as strict as that one."""

import importlib.util
import os
from pathlib import Path as _Path

# The host as NVML sees it (driver 550.54.15 reports CUDA 12.4); no process computes on it.
_HOST = {
    "driver": "550.54.15",
    "cuda_driver": 12040,
    "gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "8f0e2d6a-0000-4000-8000-0000000000d1",
            "power_limit_w": 700.0,
            "max_sm_mhz": 1980,
            "max_mem_mhz": 2619,
            "sm_mhz": 345,  # idle: nothing here can use it
            "power_w": 72.0,
            "temp_c": 33,
            "reasons": 0x1,  # gpu_idle
        }
    ],
}


def _cuda_standin():
    path = _Path(__file__).resolve().parents[1] / "cuda/pynvml.py"
    spec = importlib.util.spec_from_file_location(f"{__name__}_played", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_base = _cuda_standin()
_base._play(_base._REAL, machine=lambda: _HOST, contexts=set, own_pid=os.getpid)
_CALLS = _base._CALLS  # the C symbols its driver answers
globals().update(_base._public(_base._REAL))
