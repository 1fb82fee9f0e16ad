"""params.yaml as plain data, read with libyaml: every stage reads it and the probes run on
every `dvc repro`, so reading it must cost next to nothing. What a probe reads of a device (`kind`,
`recognise`) is checked here; the rest by the schema (roofline/configuration/measuring_config.py), which
measuring stages build and which costs a probe more than its own work."""

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

import yaml

from roofline.core.code import files_digest
from roofline.core.depends import conf_files
from roofline.core.errors import ConfigError

PARAMS_FILE = Path("params.yaml")
# A CPU, an NVIDIA GPU, an AMD GPU (through ROCm's torch, which keeps the torch.cuda API),
# Apple silicon's GPU.
KINDS = ("cpu", "cuda", "rocm", "mps")
# The rented GPUs' kinds: judged against a vendor datasheet, measured on a pod, with telemetry
# from the vendor's library (NVML, amdsmi).
RENTED_KINDS = {"cuda": "NVML", "rocm": "amdsmi"}


class RecogniseParams(TypedDict, total=False):
    """A device's `recognise` as params.yaml holds it (composed: every key; see Recognise)."""

    cpu_model: str | None
    gpu_name: str | None
    gpu_architecture: str | None
    with_gpu_present: bool


class ProbeDevice(TypedDict):
    """What a probe reads of a device (depends.PROBE_KEYS), checked by probe_devices."""

    kind: str  # one of KINDS
    recognise: RecogniseParams


class MeasuringDevice(ProbeDevice):
    """What a device's measuring stages read of it (depends.MEASURING_KEYS)."""

    dtypes: list[str]
    shapes: list[list[int]]  # [M, N, K] each
    backends: list[str]


class PublishedParams(TypedDict):
    """A published figure of a datasheet line (roofline.interpretation.lab_config.Published)."""

    dtype: str
    shape: list[int]  # [M, N, K]
    tflops: float
    source: str
    window: NotRequired[str]  # burst, sustained, or "": not said (a conf from before it)
    best_shape: NotRequired[bool]  # its source's best shape, never compared as the lab's


class SkuParams(TypedDict):
    """One datasheet line of a device (roofline.interpretation.lab_config.Sku)."""

    name: str
    sku: str
    source: str
    peak_tflops: dict[str, float | None]
    memory_bandwidth_gbps: float | None
    memory_gb: float | None
    peak_clock_mhz: float | None
    sm_count: int | None
    clock_ghz: float | None
    cost_per_hour: float | None
    lab_band_tflops: dict[str, list[float]]
    lab_done_tflops: dict[str, float]
    published: list[PublishedParams]


class DeviceParams(MeasuringDevice):
    """A device's entry in params.yaml, whole (roofline.interpretation.lab_config.LabDevice)."""

    skus: dict[str, SkuParams]
    show_pending: bool
    sky_accelerators: list[str]


# params.yaml's `bench`, as plain data: roofline.device.timing.BenchSettings's fields by name
# (that dataclass is the one bench settings type; this names no field twice).
BenchParams = dict[str, float | int | bool]


class SweepParams(TypedDict):
    """params.yaml's `sweep` (roofline.configuration.measuring_config.SweepConfig)."""

    name: str
    budget_s: dict[str, float]
    min_seconds: float
    square: dict[str, list[int]]
    skinny_m: list[int]
    skinny_nk: dict[str, int]
    best_shape: dict[str, list[list[int]]]


class KnobsParams(TypedDict):
    """params.yaml's `knobs` (roofline.configuration.measuring_config.KnobsConfig)."""

    name: str
    rounds: int
    min_seconds: float
    cpu: dict[str, list[int]]
    cuda: dict[str, list[int]]


class Params(TypedDict):
    """params.yaml as composed, read as plain data (read_params); its schema is
    roofline.interpretation.lab_config.LabConfig."""

    bench: BenchParams
    sweep: SweepParams
    knobs: KnobsParams
    devices: dict[str, DeviceParams]
    lab_devices: list[str]


@dataclass
class Recognise:
    # Regular expressions searched in the CPU model name / GPU name the probe finds.
    cpu_model: str | None = None
    gpu_name: str | None = None
    # An AMD GPU's architecture (torch's gcnArchName without its feature flags, e.g. "gfx942"):
    # some ROCm builds name every AMD GPU "AMD Radeon Graphics", so the architecture is what
    # identifies it. A GPU is recognised by either.
    gpu_architecture: str | None = None
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


# The first line `roofline.compose` writes in params.yaml: the digest of the conf/ it composed
# it from. Plain `dvc repro` reads params.yaml, not conf/, so a conf/ edited since is said.
COMPOSED = (
    "# Composed from conf/ (digest {}) by `uv run python -m roofline.compose`: edit conf/, "
    "then run it again.\n"
)


def conf_digest(conf: Path = Path("conf")) -> str:
    """The digest of every file of conf/, by path and content (CRLF read as LF)."""
    return files_digest([path.relative_to(conf) for path in conf_files(conf)], conf)


def conf_drift(path: Path = PARAMS_FILE) -> str | None:
    """Why params.yaml is not what conf/ composes now: conf/ was edited after it was composed
    (its first line says from which); None where it is, or where params.yaml does not say (a
    `dvc exp run -S` wrote it)."""
    try:
        first = path.read_text(encoding="utf-8").split("\n", 1)[0] + "\n"
    except OSError:
        return None
    prefix, _, rest = COMPOSED.partition("{}")
    if not first.startswith(prefix) or not first.endswith(rest):
        return None
    composed = first.removeprefix(prefix).removesuffix(rest)
    if composed == conf_digest(path.parent / "conf"):
        return None
    return (
        "conf/ was edited after params.yaml was composed from it, and `dvc repro` reads "
        "params.yaml: `uv run python -m roofline.compose` applies the edit"
    )


def load_yaml(text: str, where: str) -> Any:
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as err:
        raise ConfigError(f"{where} is not valid YAML: {err}") from err


def missing_params(path: Path) -> ConfigError:
    """params.yaml is not here: from the repository root (its conf/ beside), it was deleted and
    compose writes it again; elsewhere, the command ran from another folder."""
    if (path.parent / "conf").is_dir():
        return ConfigError(
            f"{path} not found beside conf/: `uv run python -m roofline.compose` writes it again "
            "from conf/ (or `git checkout -- params.yaml` restores the committed one)"
        )
    return ConfigError(f"{path} not found: run from the repository root")


def read_params(path: Path = PARAMS_FILE) -> Params:
    if not path.exists():
        raise missing_params(path)
    data = load_yaml(path.read_text(encoding="utf-8"), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("devices"), dict):
        raise ConfigError(f"{path}: no devices; `uv run python -m roofline.compose` writes it")
    return cast(Params, data)


def probe_devices(path: Path = PARAMS_FILE, params: Params | None = None) -> dict[str, ProbeDevice]:
    """Each device's kind and recognise, as a probe reads them, checked."""
    out: dict[str, ProbeDevice] = {}
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
