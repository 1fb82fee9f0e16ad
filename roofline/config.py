"""The config schema (Hydra structured configs) and the checks a schema cannot express.

`conf/` is composed by Hydra (directly, or by `dvc exp run` through DVC's Hydra integration)
into `params.yaml`; stages read `params.yaml` through `load_params`, so both paths go through
this one schema."""

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from roofline.backends import ALLOWED, spec_error
from roofline.dtypes import NAMES
from roofline.errors import ConfigError
from roofline.params import (
    KINDS,
    MEASURING_KEYS,
    PARAMS_FILE,
    Recognise,
    load_yaml,
)

DEVICE_NAME = re.compile(r"[a-z][a-z0-9_]*")
# The dtype names a config may use: the registry's (roofline/dtypes.py); the device kinds.
DType = Enum("DType", {name: name for name in NAMES})
Kind = Enum("Kind", {name: name for name in KINDS})


@dataclass
class DeviceConfig:
    """What a device's measuring stages read of it (MEASURING_KEYS). Its datasheets, price and
    the lab's bands are interpretation (roofline.lab_schema), so a fix there re-renders the
    deliverables and re-measures nothing."""

    kind: Kind = MISSING
    recognise: Recognise = field(default_factory=Recognise)
    dtypes: list[DType] = field(default_factory=list)
    shapes: list[list[int]] = field(default_factory=list)
    # The libraries each point goes through (roofline/backends.py): torch; on a CPU also numpy's
    # BLAS, or "module:function" of your own. The fastest is the device's headline.
    backends: list[str] = field(default_factory=lambda: ["torch"])


@dataclass
class BenchConfig:
    seed: int = 0
    warmup: int = 3
    # ...and warm-up calls back to back until this many seconds ran: clocks settle in about a
    # second, so a count alone leaves a fast GPU kernel's first samples at cold clocks.
    warmup_seconds: float = 1.0
    repeats: int = 10
    # Rows of C checked against a float64 reference before timing.
    check_rows: int = 16
    # Keep timing past `repeats` until this many seconds are covered: a sustained window in
    # which clocks and power settle (a 1 ms GPU kernel x 10 is a burst, not a measurement).
    min_seconds: float = 2.0
    # Size of the buffer copied to measure achievable memory bandwidth.
    copy_mib: int = 1024


@dataclass
class SweepConfig:
    """Shapes that span intensity, per device kind (conf/sweep/<name>.yaml)."""

    name: str = "none"
    budget_s: dict[str, float] = field(default_factory=dict)  # per device, by kind
    min_seconds: float = 0.0
    square: dict[str, list[int]] = field(default_factory=dict)  # M = N = K, by kind
    skinny_m: list[int] = field(default_factory=list)  # M against N = K = skinny_nk[kind]
    skinny_nk: dict[str, int] = field(default_factory=dict)
    best_shape: dict[str, list[list[int]]] = field(default_factory=dict)  # [M, N, K], by kind


@dataclass
class KnobsConfig:
    """The lab's knobs, each a gain measured in one run (conf/knobs/<name>.yaml)."""

    name: str = "none"
    rounds: int = 0  # interleaved rounds of baseline and variant
    min_seconds: float = 0.0  # sustained time per side, over its rounds
    cpu: dict[str, list[int]] = field(default_factory=dict)  # shape, naive_shape
    cuda: dict[str, list[int]] = field(default_factory=dict)  # shape, small_shape, l2_shape


@dataclass
class Config:
    bench: BenchConfig = field(default_factory=BenchConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    knobs: KnobsConfig = field(default_factory=KnobsConfig)
    devices: dict[str, DeviceConfig] = field(default_factory=dict)


def check(cfg: DictConfig, conf: Path | None = None) -> list[str]:
    """Every value the schema's types let through but is wrong, each naming what is allowed.
    `conf` is the conf/ directory the config was composed from, whose sweeps are the known
    ones."""
    errors = []
    if cfg.bench.repeats < 1 or cfg.bench.warmup < 0 or cfg.bench.check_rows < 1:
        errors.append(
            f"bench: repeats={cfg.bench.repeats}, warmup={cfg.bench.warmup}, "
            f"check_rows={cfg.bench.check_rows}; allowed: repeats >= 1, warmup >= 0, "
            "check_rows >= 1"
        )
    for key in ("min_seconds", "warmup_seconds"):
        if cfg.bench[key] < 0:
            errors.append(f"bench.{key}={cfg.bench[key]}; allowed: >= 0")
    if cfg.bench.copy_mib < 1:
        errors.append(f"bench.copy_mib={cfg.bench.copy_mib}; allowed: a positive integer")
    sweep = cfg.sweep
    kinds = [k.name for k in Kind]
    for table in ("budget_s", "square", "skinny_nk", "best_shape"):
        for key in sweep[table]:
            if key not in kinds:
                errors.append(f"sweep.{table} has key {key!r}; allowed: {', '.join(kinds)}")
    sizes = [n for sizes in sweep.square.values() for n in sizes] + list(sweep.skinny_m)
    sizes += list(sweep.skinny_nk.values()) if sweep.skinny_m else []
    sizes += [d for shapes in sweep.best_shape.values() for shape in shapes for d in shape]
    if any(n < 1 for n in sizes):
        errors.append(f"sweep {sweep.name!r} has a size below 1; allowed: positive integers")
    if any(len(shape) != 3 for shapes in sweep.best_shape.values() for shape in shapes):
        errors.append(f"sweep {sweep.name!r}: best_shape entries must be [M, N, K]")
    for group in ("sweep", "knobs"):
        known = sorted(path.stem for path in (conf / group).glob("*.yaml")) if conf else []
        if known and cfg[group].name not in known:
            errors.append(
                f"{group}.name={cfg[group].name!r}; allowed: {', '.join(known)} (conf/{group}/; "
                f"select one with `uv run dvc exp run -S {group}=NAME`)"
            )
    knobs = cfg.knobs
    if knobs.name != "none" and (knobs.rounds < 1 or knobs.min_seconds <= 0):
        errors.append(
            f"knobs: rounds={knobs.rounds}, min_seconds={knobs.min_seconds}; allowed: rounds >= 1, "
            "min_seconds > 0"
        )
    for kind_ in ("cpu", "cuda"):
        for key, shape in knobs[kind_].items():
            if len(shape) != 3 or any(d < 1 for d in shape):
                errors.append(
                    f"knobs.{kind_}.{key}={list(shape)}; allowed: [M, N, K] of positive integers"
                )
    for name, dev in cfg.devices.items():
        where = f"devices.{name}"
        if not DEVICE_NAME.fullmatch(name):
            errors.append(
                f"device name {name!r}; allowed: lower-case letters, digits and _, a letter "
                "first (it names stages, folders and `-S devices.<name>` overrides)"
            )
        wanted = "cpu_model" if dev.kind.name == "cpu" else "gpu_name"
        if not dev.recognise[wanted]:
            errors.append(
                f"{where}.recognise.{wanted} is not set; allowed: a regular expression for the "
                f"{'CPU model' if wanted == 'cpu_model' else 'GPU name'} it is (without one a "
                "cpu device takes any CPU, and a GPU one is never found)"
            )
        shapes = [list(shape) for shape in dev.shapes]
        for key, listed in (("dtypes", [d.name for d in dev.dtypes]), ("shapes", shapes)):
            twice = [x for i, x in enumerate(listed) if x in listed[:i]]
            if twice:
                errors.append(f"{where}.{key} lists {twice[0]} twice; allowed: each once")
        if not dev.dtypes:
            errors.append(f"{where}.dtypes is empty; allowed: a list of {', '.join(NAMES)}")
        if not dev.backends:
            errors.append(f"{where}.backends is empty; allowed: a list of {ALLOWED}")
        for backend in dev.backends:
            wrong = spec_error(backend)
            if not wrong and backend != "torch" and dev.kind.name != "cpu":
                wrong = f"backend {backend!r} on a {dev.kind.name} device; allowed: torch"
            if wrong:
                errors.append(f"{where}.backends has {wrong}")
        if not dev.shapes:
            errors.append(f"{where}.shapes is empty; allowed: a list of [M, N, K]")
        for shape in dev.shapes:
            if len(shape) != 3 or any(d < 1 for d in shape):
                errors.append(
                    f"{where}.shapes has {list(shape)}; allowed: [M, N, K] of positive integers"
                )
    return errors


def differs_from_commit(path: Path) -> bool:
    """Whether git has `path` modified against the last commit (False without git)."""
    try:
        done = subprocess.run(
            ["git", "diff", "--quiet", "HEAD", "--", path.name],
            cwd=path.parent,
            capture_output=True,
        )
    except OSError:
        return False
    return done.returncode == 1


Checks = Callable[[DictConfig, Path | None], list[str]]


def parse_params(
    text: str, conf: Path, where: str, schema: type = Config, checks: tuple[Checks, ...] = ()
) -> DictConfig:
    """Composed params (YAML text) merged onto `schema` and checked against `conf`. The
    measuring schema (`Config`) reads only each device's MEASURING_KEYS, so a measuring stage
    never sees, nor depends on, the interpretation (roofline.lab_schema adds it)."""
    try:
        data = load_yaml(text, where)
        if schema is Config and isinstance(data, dict):  # the measuring view: no interpretation
            data = {f.name: data[f.name] for f in fields(Config) if f.name in data}
            data["devices"] = {
                name: {k: v for k, v in dev.items() if k in MEASURING_KEYS}
                for name, dev in (data.get("devices") or {}).items()
            }
        cfg = OmegaConf.merge(OmegaConf.structured(schema), data)
    except Exception as err:  # omegaconf's validation errors name the key and the value
        raise ConfigError(f"{where}: {err}") from err
    validate(cfg, conf, checks)
    return cfg


def validate(cfg: DictConfig, conf: Path | None = None, checks: tuple[Checks, ...] = ()) -> None:
    """Raise ConfigError listing every wrong value that `check` and `checks` find."""
    errors = [error for rule in (check, *checks) for error in rule(cfg, conf)]
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))


def load_params(
    path: Path = PARAMS_FILE, schema: type = Config, checks: tuple[Checks, ...] = ()
) -> DictConfig:
    """params.yaml merged onto the schema and checked; raises ConfigError naming bad values,
    and how to undo them when they came from an override (`dvc exp run -S` leaves a failed
    override in params.yaml)."""
    if not path.exists():
        raise ConfigError(f"{path} not found: run from the repository root")
    try:
        cfg = parse_params(path.read_text(), path.parent / "conf", str(path), schema, checks)
    except ConfigError as err:
        raise with_override_hint(err, path) from err
    return cfg


def with_override_hint(err: ConfigError, path: Path = PARAMS_FILE) -> ConfigError:
    """A config error, saying how to undo the override that caused it where params.yaml
    differs from the last commit (a failed `dvc exp run -S` leaves its override there)."""
    if "differs from the last commit" in str(err) or not differs_from_commit(path):
        return err
    return ConfigError(
        f"{err}\n{path} differs from the last commit (a failed `dvc exp run -S` leaves "
        f"its override there): `git checkout {path.name}` restores it, or "
        "`uv run python -m roofline.compose` recomposes it from conf/"
    )


def device_config(cfg: DictConfig, name: str) -> DictConfig:
    if name not in cfg.devices:
        raise ConfigError(f"unknown device {name!r}; allowed: {', '.join(cfg.devices)}")
    return cfg.devices[name]


def to_plain(node: Any) -> Any:
    """A config node as plain Python (enums as their names), for JSON artifacts."""
    return OmegaConf.to_container(node, resolve=True, enum_to_str=True)
