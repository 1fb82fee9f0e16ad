"""The config schema (Hydra structured configs) and the checks a schema cannot express.

`conf/` is composed by Hydra (directly, or by `dvc exp run` through DVC's Hydra integration)
into `params.yaml`; stages read `params.yaml` through `load_params`, so both paths go through
this one schema."""

import math
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from roofline.configuration.params import (
    KINDS,
    PARAMS_FILE,
    Recognise,
    load_yaml,
    missing_params,
    pattern_error,
)
from roofline.core.depends import MEASURING_KEYS
from roofline.core.dtypes import NAMES
from roofline.core.errors import ConfigError
from roofline.device.backends import ALLOWED, BUILTIN, import_error, spec_error
from roofline.device.timing import MAX_CALLS, BenchSettings

DEVICE_NAME = re.compile(r"[a-z][a-z0-9_]*")
# The dtype names a config may use: the registry's (roofline/core/dtypes.py); the device kinds.
DType = Enum("DType", {name: name for name in NAMES})
Kind = Enum("Kind", {name: name for name in KINDS})


@dataclass
class DeviceConfig:
    """What a device's measuring stages read of it (MEASURING_KEYS). Its datasheets, price and
    the lab's bands are interpretation (roofline.interpretation.lab_config), so a fix there
    re-renders the
    deliverables and re-measures nothing."""

    kind: Kind = MISSING
    recognise: Recognise = field(default_factory=Recognise)
    dtypes: list[DType] = field(default_factory=list)
    # Any, not int: a dimension that is not an integer (256.5, true) is refused by `check` in
    # the lab's words, where OmegaConf's would reach `dvc exp run -S` users as DVC's
    # "unexpected error".
    shapes: list[list[Any]] = field(default_factory=list)
    # The libraries each point goes through (roofline/device/backends.py): torch; on a CPU also
    # numpy's BLAS, or "module:function" of your own. The fastest is the device's headline.
    backends: list[str] = field(default_factory=lambda: ["torch"])


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
    # roofline/device/timing.py: the sweep, the knobs and the GPU suite time by it too.
    bench: BenchSettings = field(default_factory=BenchSettings)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    knobs: KnobsConfig = field(default_factory=KnobsConfig)
    devices: dict[str, DeviceConfig] = field(default_factory=dict)


@dataclass(frozen=True)
class Bound:
    """The range a count, a duration or a datasheet figure may take, both ends included (the
    low end excluded where `above`), and why it ends there (or its unit)."""

    low: float
    high: float
    why: str
    above: bool = False

    def holds(self, value: float) -> bool:
        """Whether `value` is a finite number in range (NaN and infinity never are, whatever
        the range)."""
        low = self.low < value if self.above else self.low <= value
        return math.isfinite(value) and low and value <= self.high


# Every count and duration a user can set ("*": any key), so that no value makes the work
# unbounded; NaN and inf are outside every range. A test holds this table to the dataclasses.
SECONDS = Bound(0, 600, "ten minutes of one window is a soak test, not a measurement")
BOUNDS: dict[str, Bound] = {
    "bench.warmup": Bound(0, MAX_CALLS, f"a warm-up window holds at most {MAX_CALLS:,} calls"),
    "bench.warmup_seconds": Bound(0, 60, "clocks settle in about a second"),
    "bench.repeats": Bound(1, MAX_CALLS, f"a window keeps at most {MAX_CALLS:,} samples"),
    "bench.check_rows": Bound(1, 1024, "1,024 rows of 8192 is already 1/8 of a float64 matmul"),
    "bench.min_seconds": SECONDS,
    "bench.copy_mib": Bound(1, 32768, "two 32 GiB buffers are far past every cache"),
    "bench.sustained_seconds": SECONDS,
    "sweep.budget_s.*": Bound(0, 3600, "an hour of a device per sweep; `full` takes minutes"),
    "sweep.min_seconds": SECONDS,
    "knobs.rounds": Bound(0, 100, "each round is a warm-up and a window per side"),
    "knobs.min_seconds": SECONDS,
}
# The largest textbook loop the knobs run, as the side of a cube: a call at 512^3 takes about
# a quarter of a second at the loop's GFLOP/s, and Ctrl-C cannot stop a call (it is one C call).
NAIVE_MAX = 512
# Every list whose entries must differ: a repeat would be measured, or drawn, twice under one
# key. The lab's lists (lab_devices, sky_accelerators, published) exist in its view only.
LISTS = (
    "devices.*.dtypes",
    "devices.*.shapes",
    "devices.*.backends",
    "devices.*.sky_accelerators",
    "devices.*.skus.*.published",
    "sweep.square.*",
    "sweep.skinny_m",
    "sweep.best_shape.*",
    "lab_devices",
)


def entries(node: Any, pattern: str, where: str = "") -> Iterator[tuple[str, Any]]:
    """(key, value) of each entry of `node` that the dotted `pattern` names, "*" standing for
    any key or index; a key the node lacks names nothing."""
    head, _, rest = pattern.partition(".")
    if isinstance(node, DictConfig):
        items = list(node.items()) if head == "*" else [(head, node[head])] if head in node else []
    elif isinstance(node, ListConfig) and head == "*":
        items = list(enumerate(node))
    else:
        items = []
    for key, value in items:
        at = f"{where}.{key}" if where else str(key)
        yield from entries(value, rest, at) if rest else [(at, value)]


def plain(value: Any) -> Any:
    """A config value as plain Python, enums by name, for messages and comparison."""
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True, enum_to_str=True)
    return value.name if isinstance(value, Enum) else value


def bound_errors(cfg: DictConfig) -> list[str]:
    """Each count or duration outside its range (BOUNDS), NaN and inf included."""
    errors = []
    for pattern, bound in BOUNDS.items():
        for key, value in entries(cfg, pattern):
            if not bound.holds(value):
                errors.append(
                    f"{key}={value}; allowed: {bound.low:,g} to {bound.high:,g} ({bound.why}); "
                    f"set it within that in conf/ or in the override"
                )
    return errors


def duplicate_errors(cfg: DictConfig) -> list[str]:
    """Each list (LISTS) that names an entry twice."""
    errors = []
    for pattern in LISTS:
        for key, listed in entries(cfg, pattern):
            values = [plain(x) for x in listed]
            twice = [x for i, x in enumerate(values) if x in values[:i]]
            if twice:
                errors.append(
                    f"{key} lists {twice[0]} twice; allowed: each once (a repeat is measured or "
                    "drawn twice under one key); remove the repeat from conf/ or the override"
                )
    return errors


def a_shape(shape: Any) -> bool:
    """Whether `shape` is [M, N, K] of positive integers: a bool is no dimension, though
    Python counts True as 1 (OmegaConf's int nodes let it through)."""
    dims = list(shape)
    return len(dims) == 3 and all(type(d) is int and d >= 1 for d in dims)


def check(cfg: DictConfig, conf: Path | None = None) -> list[str]:
    """Every value the schema's types let through but is wrong, each naming what is allowed.
    `conf` is the conf/ directory the config was composed from, whose sweeps are the known
    ones."""
    errors = bound_errors(cfg) + duplicate_errors(cfg)
    sweep = cfg.sweep
    kinds = [k.name for k in Kind]
    for table in ("budget_s", "square", "skinny_nk", "best_shape"):
        for key in sweep[table]:
            if key not in kinds:
                errors.append(f"sweep.{table} has key {key!r}; allowed: {', '.join(kinds)}")
    sizes = [n for sizes in sweep.square.values() for n in sizes] + list(sweep.skinny_m)
    sizes += list(sweep.skinny_nk.values()) if sweep.skinny_m else []
    sizes += [d for shapes in sweep.best_shape.values() for shape in shapes for d in shape]
    if any(type(n) is not int or n < 1 for n in sizes):
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
            if not a_shape(shape):
                errors.append(
                    f"knobs.{kind_}.{key}={list(shape)}; allowed: [M, N, K] of positive integers"
                )
    naive = knobs.cpu.get("naive_shape")
    if naive is not None and a_shape(naive) and math.prod(naive) > NAIVE_MAX**3:
        errors.append(
            f"knobs.cpu.naive_shape={list(naive)}; allowed: M x N x K at most {NAIVE_MAX}^3 "
            f"({NAIVE_MAX**3:,}): the textbook loop runs about a GFLOP/s, and one call of it "
            "cannot be interrupted"
        )
    for name, dev in cfg.devices.items():
        where = f"devices.{name}"
        if not DEVICE_NAME.fullmatch(name):
            errors.append(
                f"device name {name!r}; allowed: lower-case letters, digits and _, a letter "
                "first (it names stages, folders and `-S devices.<name>` overrides)"
            )
        wanted = "cpu_model" if dev.kind.name == "cpu" else "gpu_name"
        # An AMD GPU may be recognised by its architecture alone (its name may be generic).
        named = dev.recognise[wanted] or (
            dev.kind.name == "rocm" and dev.recognise.gpu_architecture
        )
        if not named:
            errors.append(
                f"{where}.recognise.{wanted} is not set; allowed: a regular expression for the "
                f"{'CPU model' if wanted == 'cpu_model' else 'GPU name'} it is (without one a "
                "cpu device takes any CPU, and a GPU one is never found)"
                + ("; or gpu_architecture, e.g. '^gfx942$'" if dev.kind.name == "rocm" else "")
            )
        for key in ("cpu_model", "gpu_name", "gpu_architecture"):
            if wrong := pattern_error(f"{where}.recognise.{key}", dev.recognise[key]):
                errors.append(wrong)
        if not dev.dtypes:
            errors.append(f"{where}.dtypes is empty; allowed: a list of {', '.join(NAMES)}")
        if not dev.backends:
            errors.append(f"{where}.backends is empty; allowed: a list of {ALLOWED}")
        for backend in dev.backends:
            wrong = spec_error(backend)
            if not wrong and backend != "torch" and dev.kind.name != "cpu":
                wrong = f"backend {backend!r} on a {dev.kind.name} device; allowed: torch"
            if not wrong and backend not in BUILTIN:  # the user's: found here, or refused
                wrong = import_error(backend)
            if wrong:
                errors.append(f"{where}.backends has {wrong}")
        if not dev.shapes:
            errors.append(f"{where}.shapes is empty; allowed: a list of [M, N, K]")
        for shape in dev.shapes:
            if not a_shape(shape):
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
    never sees, nor depends on, the interpretation (roofline.interpretation.lab_config adds it)."""
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
    """Raise ConfigError listing every wrong value that `check` and `checks` find (a device
    without a kind first: every check reads it)."""
    unset = [
        f"devices.{name}.kind is not set (conf/device/{name}.yaml has no `kind:`); allowed: "
        f"{', '.join(KINDS)}"
        for name in cfg.devices
        if OmegaConf.is_missing(cfg.devices[name], "kind")
    ]
    errors = unset or [error for rule in (check, *checks) for error in rule(cfg, conf)]
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))


def load_params(
    path: Path = PARAMS_FILE, schema: type = Config, checks: tuple[Checks, ...] = ()
) -> DictConfig:
    """params.yaml merged onto the schema and checked; raises ConfigError naming bad values,
    and how to undo them when they came from an override (`dvc exp run -S` leaves a failed
    override in params.yaml)."""
    if not path.exists():
        raise missing_params(path)
    try:
        cfg = parse_params(
            path.read_text(encoding="utf-8"), path.parent / "conf", str(path), schema, checks
        )
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


def bench_settings(cfg: DictConfig) -> BenchSettings:
    """The config's `bench` as the plain dataclass the measuring functions take."""
    return OmegaConf.to_object(cfg.bench)


def to_plain(node: Any) -> Any:
    """A config node as plain Python (enums as their names), for JSON artifacts."""
    return OmegaConf.to_container(node, resolve=True, enum_to_str=True)
