"""A stand-in for NVML (nvidia-ml-py's `pynvml`) on a rented host whose driver is too old for
the locked torch: NVML sees an H100, while torch (a CUDA 13 build, here without any driver)
cannot use it. Put this folder first on PYTHONPATH to play that host."""

NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0


class NVMLError(Exception):
    pass


def nvmlInit():
    pass


def nvmlDeviceGetCount():
    return 1


def nvmlSystemGetDriverVersion():
    return "550.54.15"


def nvmlSystemGetCudaDriverVersion():
    return 12040


def nvmlDeviceGetHandleByIndex(index):
    return index


def nvmlDeviceGetName(handle):
    return "NVIDIA H100 80GB HBM3"
