"""The libraries a matmul can go through ("backends"). Which is fastest is a property of the
machine, so a CPU measures each on the same shape, seed and float64 check:

- "torch": torch.matmul (on a CPU: MKL for float32, oneDNN for bfloat16 and float16);
- "numpy": numpy's BLAS (OpenBLAS on Linux and Windows, Accelerate on macOS);
- "module:function": any function of yours that multiplies two numpy arrays.

GPUs go through torch only (cuBLAS / cuBLASLt)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from roofline.core.depends import OWN_BACKEND
from roofline.core.dtypes import DTYPES
from roofline.core.errors import ConfigError

if TYPE_CHECKING:  # torch is imported where a backend runs, not where a config is checked
    import torch

BUILTIN = ("torch", "numpy")
CUSTOM = OWN_BACKEND  # "module:function"
ALLOWED = 'torch, numpy, or "module:function" (a function of two numpy arrays)'


@dataclass
class Backend:
    """A library's matmul, with its operands converted from torch's and its product back."""

    name: str
    operands: Callable[[torch.Tensor, torch.Tensor], tuple[Any, Any]]
    matmul: Callable[[Any, Any], Any]
    product: Callable[[Any], torch.Tensor]  # as a torch tensor, for the float64 check


def spec_error(name: str) -> str | None:
    """Why a configured backend name is not one (for the config check), or None."""
    if name in BUILTIN or CUSTOM.fullmatch(name):
        return None
    return f"backend {name!r}; allowed: {ALLOWED}"


def unsupported(name: str, dtype: str, device_kind: str) -> str | None:
    """Why this backend cannot multiply this dtype here, or None when it can."""
    if name == "torch":
        return None
    if device_kind != "cpu":
        return f"{name} runs on the CPU only; GPUs go through torch"
    if not DTYPES[dtype].numpy_blas:
        return f"numpy's BLAS has no {dtype} matmul (numpy would loop in C, not call a BLAS)"
    return None


def function(name: str) -> Callable[[Any, Any], Any]:
    """numpy's matmul, or the user's "module:function"; ConfigError naming the backend and
    the way out where there is no such function here."""
    if name == "numpy":
        import numpy as np

        return np.matmul
    module, attribute = name.split(":")
    way_out = (
        f"allowed: {ALLOWED}, its module importable here (a file in the repository root, or a "
        f"package added with `uv add`); correct it, or remove {name!r} from the backends"
    )
    try:
        found = getattr(importlib.import_module(module), attribute, None)
    except Exception as err:  # not found, or its import failed: either way no backend
        raise ConfigError(
            f"backend {name!r}: module {module!r} does not import ({type(err).__name__}: "
            f"{err}); {way_out}"
        ) from err
    if found is None:
        raise ConfigError(f"backend {name!r}: module {module!r} has no {attribute!r}; {way_out}")
    if not callable(found):
        raise ConfigError(
            f"backend {name!r}: {module}.{attribute} = {found!r:.60} is not a function; {way_out}"
        )
    return found


def import_error(name: str) -> str | None:
    """Why the backend `name` cannot be used here (for the config check), or None: not found,
    or, a function of yours, wrong on a tiny product (trial_error)."""
    try:
        found = function(name)
    except ConfigError as err:
        return str(err)
    return None if name in BUILTIN else trial_error(name, found)


def trial_error(name: str, found: Callable[[Any, Any], Any]) -> str | None:
    """Why a function of yours is no matmul, from one tiny product against numpy's: it raised,
    or returned something other than an 8x6 float32 numpy array holding A @ B; None where it is
    one. Checked before anything is measured, so a wrong function replaces no record."""
    import numpy as np

    a = np.arange(32, dtype=np.float32).reshape(8, 4) / 8
    b = np.arange(24, dtype=np.float32).reshape(4, 6) / 6
    trial = f"backend {name!r}: on an 8x4 and a 4x6 float32 array"
    allowed = "allowed: a function of two numpy arrays that returns their product, as numpy does"
    try:
        out = found(a, b)
    except Exception as err:  # whatever it raised, it is no matmul of two arrays
        first = (str(err).splitlines() or [""])[0][:120]
        return f"{trial} it raised {type(err).__name__}: {first}; {allowed}"
    if not isinstance(out, np.ndarray) or out.shape != (8, 6):
        got = f"a {type(out).__name__}" + (
            f" of shape {out.shape}" if hasattr(out, "shape") else ""
        )
        return f"{trial} it returned {got}, not an 8x6 array; {allowed}"
    if out.dtype != np.float32:
        return f"{trial} it returned {out.dtype}, not float32; {allowed}"
    error = float(np.max(np.abs(out - a @ b)))
    if not error <= 1e-4 * float(np.max(np.abs(a @ b))):
        return f"{trial} its product is wrong (off by up to {error:.3g}); {allowed}"
    return None


def backend(
    name: str | Callable[[Any, Any], Any],
    matmul: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> Backend:
    """The backend `name` (or a function of two numpy arrays itself); `matmul` is torch's own
    for the dtype (roofline.measuring.matmul)."""
    if name == "torch":
        return Backend(name, lambda a, b: (a, b), matmul, lambda c: c)
    import torch

    call = name if callable(name) else function(name)
    label = name if isinstance(name, str) else getattr(name, "__name__", "function")
    return Backend(label, lambda a, b: (a.numpy(), b.numpy()), call, torch.from_numpy)


class Library(TypedDict, total=False):
    """What a backend ran on, as its library reports it (libraries)."""

    float32: str  # torch: the library of each dtype
    bfloat16: str | None
    threads: int
    library: str | None  # numpy: its BLAS, its version and the kernel it picked
    version: str | None
    kernel: str | None
    module: str | None  # a function of your own: its module's file


def libraries(names: list[str]) -> dict[str, Library]:
    """What each backend ran on, as its library reports it: torch's MKL and oneDNN builds;
    numpy's BLAS (numpy's build record, and threadpoolctl's view of it at run time: kernel,
    threads); a custom function's module file."""
    import torch

    out: dict[str, Library] = {}
    for name in names:
        if name == "torch":
            config = torch.__config__.show()
            mkl = re.search(r"Math Kernel Library Version ([\w.]+)", config)
            onednn = re.search(r"MKL-DNN v([\w.]+)", config)
            blas = re.search(r"BLAS_INFO=(\w+)", config)  # macOS arm64's wheel: accelerate
            out[name] = {
                "float32": f"MKL {mkl.group(1)}" if mkl else blas_name(blas and blas.group(1)),
                "bfloat16": f"oneDNN {onednn.group(1)}" if onednn else None,
                "threads": torch.get_num_threads(),
            }
        elif name == "numpy":
            out[name] = numpy_blas()
        else:
            module = importlib.import_module(name.split(":")[0])
            out[name] = {"module": getattr(module, "__file__", None)}  # its key: core.depends
    return out


def blas_name(info: str | None) -> str:
    """torch's BLAS_INFO as the record names it: "Accelerate" for Apple's."""
    return "Accelerate" if info == "accelerate" else info or "torch's CPU BLAS"


def runs_on_accelerate(library: Library | None, dtype: str) -> bool:
    """Whether a row of `dtype` went through Apple's Accelerate (its SGEMM runs on the matrix
    units, not the cores' NEON): torch's float32 on a Mac, numpy's macOS 14 wheel."""
    library = library or {}
    if dtype != "float32":
        return False
    return library.get("float32") == "Accelerate" or library.get("library") == "accelerate"


def numpy_blas() -> Library:
    import numpy as np
    from threadpoolctl import threadpool_info

    build = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    info: Library = {"library": build.get("name"), "version": build.get("version")}
    loaded = [
        pool
        for pool in threadpool_info()
        if pool["user_api"] == "blas" and "numpy" in (pool.get("filepath") or "")
    ]
    if loaded:  # what was loaded, at run time: the kernel it picked and its threads
        pool = loaded[0]
        info |= {
            "library": pool["internal_api"],
            "version": pool["version"],
            "kernel": pool.get("architecture"),
            "threads": pool["num_threads"],
        }
    return info


def label(name: str, library: Library | None, dtype: str = "float32") -> str:
    """A backend as the report names it, e.g. "numpy (openblas 0.3.31, SkylakeX kernel)"."""
    library = library or {}
    if name == "torch":
        lib = library.get(dtype) or library.get("float32")
        return f"torch ({lib})" if lib else "torch"
    if name == "numpy":
        what = " ".join(
            str(part) for part in (library.get("library"), library.get("version")) if part
        )
        kernel = f", {library['kernel']} kernel" if library.get("kernel") else ""
        return f"numpy ({what}{kernel})" if what else "numpy"
    return name
