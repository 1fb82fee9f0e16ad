"""Versions, git revision and the few environment variables that change a measurement, recorded
with each one. Never host names, never credentials: the environment is read by name only."""

import os
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path

from roofline.core.depends import LIBRARY_VARIABLES


def versions() -> dict[str, str | None]:
    import torch

    config = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", config)
    onednn = re.search(r"MKL-DNN v([\w.]+)", config)

    def dist(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mkl": mkl.group(1) if mkl else None,
        "onednn": onednn.group(1) if onednn else None,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,  # ROCm's torch: an AMD GPU through the torch.cuda API
        "cudnn": str(torch.backends.cudnn.version()) if torch.cuda.is_available() else None,
        "dvc": dist("dvc"),
        "hydra-core": dist("hydra-core"),
        "omegaconf": dist("omegaconf"),
        "nvidia-ml-py": dist("nvidia-ml-py"),
        "amdsmi": dist("amdsmi"),
    }


# Variables that change what is measured (roofline.core.depends), read by name; nothing else
# in the environment is.
RECORDED_ENV = (
    *LIBRARY_VARIABLES["cpu"],
    *LIBRARY_VARIABLES["cuda"],
    "CUDA_VISIBLE_DEVICES",
    "ROOFLINE_HARDWARE",
)


# The BLAS libraries' verbose switches: each logs every call, which slows a small one several
# times (MKL_VERBOSE=1: a 256^3 call 4.4 -> 16.0 ms). Unset by quiet_blas before anything is
# timed, and recorded as the user set them.
VERBOSE_ENV = ("MKL_VERBOSE", "ONEDNN_VERBOSE", "DNNL_VERBOSE", "OPENBLAS_VERBOSE")
UNSET_WHILE_TIMING: dict[str, str] = {}


def quiet_blas() -> dict[str, str]:
    """Unset the verbose switches a user set (before the process's first BLAS call, which is
    when each library reads its own); what was set."""
    for name in VERBOSE_ENV:
        if name in os.environ:
            UNSET_WHILE_TIMING[name] = os.environ.pop(name)
    return dict(UNSET_WHILE_TIMING)


def environment() -> dict[str, str]:
    found = {name: os.environ[name] for name in RECORDED_ENV if name in os.environ}
    found |= {name: f"{value} (unset while timing)" for name, value in UNSET_WHILE_TIMING.items()}
    if "ROOFLINE_HARDWARE" in found:  # a path may hold a user name: keep the file's name only
        found["ROOFLINE_HARDWARE"] = Path(found["ROOFLINE_HARDWARE"]).name
    return found


CODE = ("roofline", "stages", "conf", "hydra_plugins", "pyproject.toml", "uv.lock")


def git_revision() -> str | None:
    """HEAD, with "+dirty" when the code differs from it. Lock files and params.yaml are left
    out: DVC rewrites them during a run, and params are recorded with the results anyway."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *CODE],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return rev + ("+dirty" if dirty else "")
