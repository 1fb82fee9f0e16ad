"""What a device's measurement depends on, declared once.

A measurement depends on three things:

- code: the lab's files a measuring stage runs, and the files of your own kernels (a
  "module:function" backend that lives in this repository);
- settings: the params that change what is measured, each left out while it holds its
  schema default, so adding a setting stales no record; and the variables that pick a
  library's kernel or threads (a run under MKL_ENABLE_INSTRUCTIONS is measured again without);
- hardware: what the probe finds, and the environment variables that change which hardware
  or which code a process sees.

Everything that decides whether a record is stale derives from here: the stage keys
(roofline/machines/keys.py), the probe's fast path (stages/probe.py) and the hardware cache
(roofline.device.hardware.boot). It is in `core` because every layer reads it."""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofline.core.code import OUR_PACKAGES, code_deps, file_closure, module_file, ours

# params.yaml as plain data (roofline.configuration.params.Params, a layer above this one).
Params = Mapping[str, Any]

# A backend of your own: "module:function" (roofline/device/backends.py).
OWN_BACKEND = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
# What a probe reads of a device: which hardware is the device.
PROBE_KEYS = ("kind", "recognise")
# What a device's measuring stages read of it.
MEASURING_KEYS = (*PROBE_KEYS, "dtypes", "shapes", "backends")
# The measuring stages, and the top-level settings each reads besides the device's keys.
STAGE_SETTINGS = {
    "benchmark": ("bench",),
    "sweep": ("bench", "sweep"),
    "knobs": ("bench", "knobs"),
}
# The variables that choose and renumber the GPUs torch sees: CUDA's, and ROCm's two (HIP's,
# and the runtime's below it, which ROCm's torch honours too).
GPU_VISIBILITY = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
# Variables that change which hardware a process sees, or which code it runs: a description
# that replaces the machine, a path that puts other modules first (the stand-ins, your own
# backends), the GPUs torch may see, and the cores joblib counts.
HARDWARE_VARIABLES = ("ROOFLINE_HARDWARE", "PYTHONPATH", *GPU_VISIBILITY, "LOKY_MAX_CPU_COUNT")


# Variables that change which kernel a device's libraries run, or on how many threads: a run
# under another value measured something else. A CPU's libraries read the first; cuBLAS the
# second.
LIBRARY_VARIABLES = {
    "cpu": (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "OMP_WAIT_POLICY",  # PASSIVE: OpenMP's threads sleep between calls, slowing small ones
        "OPENBLAS_CORETYPE",  # forces OpenBLAS's kernel
        "OPENBLAS_L2_SIZE",
        "MKL_ENABLE_INSTRUCTIONS",  # caps MKL's instruction set (Intel CPUs)
        "MKL_DEBUG_CPU_TYPE",
        "ONEDNN_MAX_CPU_ISA",  # caps oneDNN's (bfloat16, float16)
        "DNNL_MAX_CPU_ISA",
        "VECLIB_MAXIMUM_THREADS",  # Accelerate
    ),
    "cuda": ("NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG"),
}


def library_variables(kind: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The library variables of a device of this kind set in `environ` (this process's, or
    what a record was measured under)."""
    return {name: environ[name] for name in LIBRARY_VARIABLES.get(kind, ()) if name in environ}


def every_library_variable() -> dict[str, str]:
    """Every library variable set here, whatever its kind: what the probe's cache holds for."""
    return {k: v for kind in LIBRARY_VARIABLES for k, v in library_variables(kind).items()}


def hardware_variables() -> dict[str, str | None]:
    """Each hardware variable as this process sees it (None: unset)."""
    return {name: os.environ.get(name) for name in HARDWARE_VARIABLES}


def lab_files(root: Path = Path(".")) -> list[Path]:
    """Every file of the lab's code. A stage runs a part of them (lab_code)."""
    return sorted(p.relative_to(root) for part in OUR_PACKAGES for p in (root / part).rglob("*.py"))


def conf_files(conf: Path = Path("conf")) -> list[Path]:
    """Every file of conf/, which params.yaml is composed from (params.conf_drift)."""
    return sorted(conf.rglob("*.yaml"))


def lab_code(stage: str, root: Path = Path(".")) -> list[str]:
    """The lab's files a measuring stage runs: its module and what that imports."""
    return code_deps(f"stages.{stage}", root)


def own_backends(params: Params, name: str, stage: str) -> list[str]:
    """The backends of your own ("module:function") that a device's stage runs. The benchmark
    runs every backend; the sweep too, when one is selected; the knobs run only the lab's."""
    listed = (params["devices"][name] or {}).get("backends") or []
    backends = [b for b in listed if isinstance(b, str) and OWN_BACKEND.fullmatch(b)]
    swept = ((params.get("sweep") or {}).get("name") or "none") != "none"
    return backends if stage == "benchmark" or (stage == "sweep" and swept) else []


def own_roots(root: Path = Path(".")) -> list[Path]:
    """Where a module of yours is found, as Python finds it: the repository, then $PYTHONPATH's
    folders (never site-packages: an installed package is known by its version)."""
    extra = [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [root, *(p for p in extra if p.is_dir())]


def own_code(backend: str, root: Path = Path(".")) -> list[str]:
    """The files a backend of yours runs: its module and the modules beside it that it imports
    (not the lab's: those are lab code), each as a path from the folder it was found in. []
    for a module installed as a package (installed_version keys it)."""
    module = backend.split(":")[0]
    if ours(module):
        return []
    for where in own_roots(root):
        if module_file(module, where) is None:
            continue

        def beside(name: str, where: Path = where) -> bool:
            return not ours(name) and module_file(name, where) is not None

        found = file_closure(module, where, beside)
        return found if where == root else [str(where / f) for f in found]
    return []


@functools.cache  # packages_distributions reads every installed package's metadata
def installed_version(backend: str) -> str:
    """The installed distribution (and version) a backend's module comes from, or "" where
    none does: what keys a kernel of yours installed as a package."""
    from importlib import metadata

    top = backend.split(":")[0].split(".")[0]
    names = metadata.packages_distributions().get(top, [])
    return ", ".join(f"{n}=={metadata.version(n)}" for n in sorted(names))


def own_files(params: Params, root: Path = Path(".")) -> list[Path]:
    """Every file of your own kernels that any device's stage runs, and where a module of
    yours has none yet, the files it would be: what the caches watch."""
    files: set[str] = set()
    for name in params["devices"]:
        for stage in STAGE_SETTINGS:
            for backend in own_backends(params, name, stage):
                found = own_code(backend, root)
                base = Path(*backend.split(":")[0].split("."))
                files |= set(found) or {str(base.with_suffix(".py")), str(base / "__init__.py")}
    return sorted(map(Path, files))


def settings(
    params: Params,
    name: str,
    stage: str,
    defaults: Mapping[str, object],
    environment: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The settings a device's stage is measured under: its top-level sections and the
    device's measuring keys, each without the entries that hold their schema default.
    `defaults`: each section's schema, and "device"'s, made with its defaults (the schema is
    roofline.configuration.measuring_config's, a layer above this one). `environment`: the
    variables a record was measured under, in place of this process's."""
    dev = params["devices"][name]
    out = {
        section: beside_defaults(params.get(section) or {}, defaults[section])
        for section in STAGE_SETTINGS[stage]
    }
    device = {key: dev.get(key) for key in MEASURING_KEYS}
    out[f"devices.{name}"] = beside_defaults(device, defaults["device"])
    variables = library_variables(
        str(dev.get("kind")), os.environ if environment is None else environment
    )
    if variables:  # none set: no entry
        out["environment"] = variables
    return out


def beside_defaults(values: Mapping[str, Any], default: object) -> dict[str, Any]:
    """`values` without the entries equal to the same field of `default` (a dataclass), in
    nested sections too: a setting at its default measures what its absence measured."""
    out = {}
    for key, value in values.items():
        if not hasattr(default, key):
            out[key] = value
            continue
        field = getattr(default, key)
        if dataclasses.is_dataclass(field) and isinstance(value, Mapping):
            value = beside_defaults(value, field)
            if value:
                out[key] = value
        elif value != plain(field):
            out[key] = value
    return out


def plain(value: Any) -> Any:
    """A schema default as params.yaml holds it: enums by name, dataclasses as mappings."""
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
