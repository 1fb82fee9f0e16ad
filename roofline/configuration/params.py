"""params.yaml as plain data, read with libyaml: every stage reads it and the probes run on
every `dvc repro`, so reading it must cost next to nothing. What a probe reads of a device (`kind`,
`recognise`) is checked here; the rest by the schema (roofline/configuration/config.py), which
measuring stages build and which costs a probe more than its own work."""

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from roofline.core.errors import ConfigError

PARAMS_FILE = Path("params.yaml")
KINDS = ("cpu", "cuda", "mps")  # a CPU, an NVIDIA GPU, Apple silicon's GPU

# What changes a measurement: a device's measuring stages depend on these keys of it (the
# pipeline files list them as params) and read nothing else of it.
PROBE_KEYS = ("kind", "recognise")
MEASURING_KEYS = (*PROBE_KEYS, "dtypes", "shapes", "backends")
# A device's measuring stages, and the top-level params (besides its measuring keys) each reads.
STAGE_PARAMS = {"benchmark": ("bench",), "sweep": ("bench", "sweep"), "knobs": ("bench", "knobs")}


@dataclass
class Recognise:
    # Regular expressions searched in the CPU model name / GPU name the probe finds.
    cpu_model: str | None = None
    gpu_name: str | None = None
    # kind cpu: also count as present on a machine with a GPU (a pod's host CPU). Off by
    # default so a pod never measures its host CPU as "the cpu".
    with_gpu_present: bool = False


def pattern_error(key: str, pattern: str | None) -> str | None:
    """Why a `recognise` pattern is not a regular expression (re's error), or None."""
    try:
        re.compile(pattern or "")
    except re.error as err:
        return (
            f"{key}={pattern!r} is not a regular expression ({err}); allowed: a Python regular "
            "expression searched in the name the probe finds, e.g. '^NVIDIA H100'; escape a "
            "literal ( [ + * ? with a backslash"
        )
    return None


def load_yaml(text: str, where: str) -> Any:
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as err:
        raise ConfigError(f"{where} is not valid YAML: {err}") from err


def read_params(path: Path = PARAMS_FILE) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"{path} not found: run from the repository root")
    data = load_yaml(path.read_text(encoding="utf-8"), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("devices"), dict):
        raise ConfigError(f"{path}: no devices; `uv run python -m roofline.compose` writes it")
    return data


def probe_devices(
    path: Path = PARAMS_FILE, params: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """Each device's kind and recognise, as a probe reads them, checked."""
    out = {}
    for name, dev in (params or read_params(path))["devices"].items():
        where = f"{path}: devices.{name}"
        kind, recognise = (dev or {}).get("kind"), (dev or {}).get("recognise") or {}
        if kind not in KINDS:
            raise ConfigError(f"{where}.kind={kind!r}; allowed: {', '.join(KINDS)}")
        allowed = {f.name: f.type for f in fields(Recognise)}
        for key, value in recognise.items():
            wanted = bool if key == "with_gpu_present" else str
            if key not in allowed or not (isinstance(value, wanted) or value is None):
                raise ConfigError(
                    f"{where}.recognise.{key}={value!r}; allowed: "
                    + ", ".join(f"{k} ({t})" for k, t in allowed.items())
                )
            if wanted is str and (wrong := pattern_error(f"{where}.recognise.{key}", value)):
                raise ConfigError(wrong)
        out[name] = {"kind": kind, "recognise": recognise}
    return out
