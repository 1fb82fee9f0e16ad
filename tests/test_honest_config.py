"""Bounded work, and every bad input ends in one clear message before anything is measured:
counts and durations within a range, backends that exist, lists without repeats, recognise
patterns that compile, and a pull whose remote lacks an output that says what it did."""

import math
import subprocess
import sys
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from roofline.configuration.measuring_config import (
    BOUNDS,
    LISTS,
    KnobsConfig,
    SweepConfig,
    validate,
)
from roofline.configuration.params import probe_devices
from roofline.core.errors import ConfigError
from roofline.device import timing
from roofline.device.kinds import Kind
from roofline.device.timing import MAX_CALLS, BenchSettings, calls_to_fill, sample, warmed
from roofline.interpretation import lab_config
from roofline.interpretation.lab_config import LabConfig
from roofline.measuring import knobs as kn
from roofline.measuring.measure import Target, measure_point
from tests.conftest import config, counted, device
from tests.machines import dvc, git, run

ROOT = Path(__file__).resolve().parents[1]


def check(cfg):
    """Every check the composed config goes through, datasheets included."""
    validate(cfg, None, (lab_config.check,))


def cpu(**over):
    fields_ = {
        "kind": "cpu",
        "recognise": {"cpu_model": "Laptop"},
        "sku": "CPU",
        "dtypes": ["float32"],
        "shapes": [[64, 64, 64]],
    } | over
    return device(**fields_)


def composed(*overrides: str) -> tuple[int, str]:
    """The real composition command on this repository's conf/ (--check: it writes nothing)."""
    done = subprocess.run(
        [sys.executable, "-m", "roofline.compose", "--check", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout + done.stderr


def refused(*overrides: str) -> str:
    """The message composition refuses these overrides with: one, no traceback."""
    code, out = composed(*overrides)
    assert code == 1 and out.startswith("error: invalid config:"), out
    assert "Traceback" not in out
    return out


# 1. Bounded work ------------------------------------------------------------------------------

# Numbers a user sets that are neither a count nor a duration: a seed, and a matrix size (sizes are
# held to the device's memory instead: roofline.interpretation.lab_config.memory_errors, the
# stages).
NOT_WORK = {"bench.seed", "sweep.skinny_nk"}


def test_every_count_and_duration_in_the_schema_has_a_bound():
    numeric = set()
    for prefix, schema in (
        ("bench", BenchSettings),
        ("sweep", SweepConfig),
        ("knobs", KnobsConfig),
    ):
        hints = typing.get_type_hints(schema)
        for f in fields(schema):
            hint = hints[f.name]
            if typing.get_origin(hint) is dict:  # a value per key: its values' type
                hint = typing.get_args(hint)[1]
            if hint in (int, float):
                numeric.add(f"{prefix}.{f.name}")
    assert numeric - NOT_WORK == {key.removesuffix(".*") for key in BOUNDS}


def with_value(key: str, value):
    cfg = config({"c": cpu()})
    section, name = key.removesuffix(".*").split(".")
    cfg[section][name] = {"cpu": value} if key.endswith(".*") else value
    return cfg


def out_of_range(key: str) -> list:
    bound, floats = BOUNDS[key], key.endswith("seconds") or key.endswith("budget_s.*")
    if not floats:
        return [bound.low - 1, bound.high + 1]
    return [float(bound.low - 1), float(bound.high + 1), math.nan, math.inf, -math.inf]


@pytest.mark.parametrize(
    ("key", "value"), [(key, value) for key in BOUNDS for value in out_of_range(key)]
)
def test_a_count_or_duration_out_of_its_range_is_refused_naming_it(key, value):
    with pytest.raises(ConfigError) as err:
        check(with_value(key, value))
    bound, shown = BOUNDS[key], key.replace("*", "cpu")
    assert f"{shown}={value}; allowed: {bound.low:,g} to {bound.high:,g} ({bound.why})" in str(
        err.value
    )
    check(with_value(key, bound.high))  # both ends are allowed
    check(with_value(key, bound.low))


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("bench.repeats=100000000", "bench.repeats=100000000; allowed: 1 to 10,000"),
        ("bench.min_seconds=nan", "bench.min_seconds=nan; allowed: 0 to 600"),
        ("bench.warmup_seconds=inf", "bench.warmup_seconds=inf; allowed: 0 to 60"),
        ("sweep.budget_s.cpu=1e9", "sweep.budget_s.cpu=1000000000.0; allowed: 0 to 3,600"),
    ],
)
def test_composition_refuses_unbounded_work_with_one_message(override, said):
    out = refused(override)
    assert said in out and "set it within that in conf/ or in the override" in out


class CountingTimer:
    """Times nothing: each call takes `seconds`; it fails a test asked for more than the cap."""

    name = "counting"

    def __init__(self, seconds: float):
        self.seconds, self.asked = seconds, []

    def times(self, work, first, count):
        assert count <= MAX_CALLS, f"{count} calls in one window"
        self.asked.append(count)
        return [self.seconds] * count


def test_sample_never_times_more_than_the_cap_whatever_it_is_passed():
    # As the GPU suite calls it, without composition: a count far past the cap is cut and said.
    timer = CountingTimer(1e-3)
    timed = sample(lambda i: None, timer, counted(warmup=10**8, repeats=10**8))
    assert len(timed.samples) == MAX_CALLS
    assert timed.window.cut == "10,000 of the 100,000,000 calls asked: cut by the 10,000-call cap"
    assert len(warmed(timer, lambda i: None, 10**8, math.inf)) == MAX_CALLS
    # NaN and infinite seconds: no error, and never past the cap.
    timed = sample(
        lambda i: None, timer, counted(1, 1, min_seconds=math.nan, warmup_seconds=math.nan)
    )
    assert timed.samples == [1e-3] and timed.window.cut == ""
    timed = sample(lambda i: None, timer, counted(1, 1, min_seconds=math.inf))
    assert len(timed.samples) == MAX_CALLS and "of the inf s asked: cut by" in timed.window.cut
    assert (calls_to_fill(math.nan, 1e-3), calls_to_fill(math.inf, 1e-3, 9_000)) == (0, 1_000)
    assert max(timer.asked) <= MAX_CALLS and timing.MAX_CALLS == MAX_CALLS


# 2. Backends ----------------------------------------------------------------------------------


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A module of the user's on the path, with backends that multiply, refuse, or refuse the
    config."""
    name = f"honest_backends_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(
        "from roofline.core.errors import ConfigError\n"
        "def multiplies(a, b):\n    return a @ b\n"
        "def refuses(a, b):\n    raise ValueError('operands not aligned\\nsecond line')\n"
        "def refuses_config(a, b):\n    raise ConfigError('this backend is misconfigured')\n"
        "not_a_function = 3\n"
        "def wrong_shape(a, b):\n    return (a @ b).T\n"
        "def a_list(a, b):\n    return (a @ b).tolist()\n"
        "def float64(a, b):\n    return (a @ b).astype('float64')\n"
        "def off(a, b):\n    return a @ b + 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("backend", "said"),
    [
        ("nosuchmodule_xyz:mm", "module 'nosuchmodule_xyz' does not import (ModuleNotFoundError"),
        ("json:nosuch", "module 'json' has no 'nosuch'"),
        ("math:pi", "math.pi = 3.141592653589793 is not a function"),
    ],
)
def test_composition_refuses_a_backend_that_is_not_a_function_here(backend, said):
    out = refused(f"devices.cpu.backends=[torch,'{backend}']")
    assert f"devices.cpu.backends has backend '{backend}': {said}" in out
    assert f"correct it, or remove '{backend}' from the backends" in out


@pytest.mark.parametrize(
    ("function", "said"),
    [
        ("refuses", "it raised ValueError: operands not aligned;"),
        ("wrong_shape", "it returned a ndarray of shape (6, 8), not an 8x6 array"),
        ("a_list", "it returned a list, not an 8x6 array"),
        ("float64", "it returned float64, not float32"),
        ("off", "its product is wrong (off by up to 1)"),
    ],
)
def test_a_function_of_yours_that_is_no_matmul_is_refused_before_anything_is_measured(
    user_module, function, said
):
    # Importable and callable is not enough (json:dumps, os:system are both): one tiny product
    # against numpy's says whether it multiplies.
    with pytest.raises(ConfigError) as err:
        check(config({"c": cpu(backends=[f"{user_module}:{function}"])}))
    assert (
        f"devices.c.backends has backend '{user_module}:{function}': on an 8x4 and a 4x6 float32 "
        f"array {said}".removesuffix(";")
        + "; allowed: a function of two numpy arrays that returns their product, as numpy does"
    ) in str(err.value)


def test_a_backend_found_here_passes_and_one_missing_at_measure_time_ends_the_stage(user_module):
    check(config({"c": cpu(backends=["torch", f"{user_module}:multiplies"])}))
    with pytest.raises(ConfigError, match="not_a_function = 3 is not a function"):
        check(config({"c": cpu(backends=[f"{user_module}:not_a_function"])}))
    # Gone between composition and measurement: the stage ends naming it, nothing recorded.
    with pytest.raises(ConfigError, match="backend 'nosuchmodule_xyz:mm': module"):
        point("nosuchmodule_xyz:mm")


def point(backend: str):
    bench = BenchSettings(
        seed=0, warmup=1, repeats=2, check_rows=4, min_seconds=0.0, warmup_seconds=0.0
    )
    target = Target(Kind(), None, 1 << 30, {"float32"}, threads=1)
    return measure_point("cpu", "float32", [8, 8, 8], target, bench, {}, backend)


def test_a_backend_raising_valueerror_fails_its_point_and_a_configerror_ends_the_stage(
    user_module,
):
    failed = point(f"{user_module}:refuses")
    assert (failed.status, failed.reason) == (
        "failed",
        "the call raised: ValueError: operands not aligned",
    )
    assert point(f"{user_module}:multiplies").status == "measured"
    with pytest.raises(ConfigError, match="this backend is misconfigured"):
        point(f"{user_module}:refuses_config")


def test_a_knob_raising_valueerror_fails_and_a_configerror_ends_the_ladder():
    settings = kn.Settings(
        BenchSettings(seed=0, warmup=1, check_rows=4, min_seconds=0.01, warmup_seconds=0.0),
        rounds=1,
    )

    def knob(error: Exception) -> kn.Knob:
        def sides():
            raise error

        return kn.Knob("k", "a", "b", "float32", [8, 8, 8], None, sides)

    measured = kn.measure_knob("cpu", knob(ValueError("no such layout")), settings)
    assert (measured.status, measured.reason) == (
        "failed",
        "the call raised: ValueError: no such layout",
    )
    with pytest.raises(ConfigError, match="refused"):
        kn.measure_knob("cpu", knob(ConfigError("refused")), settings)


# 3. Duplicates --------------------------------------------------------------------------------


def list_paths(schema, prefix: str = ""):
    """The dotted path ("*": any key) of every list in a config dataclass, and of every list in
    the dataclasses a list holds."""
    hints = typing.get_type_hints(schema)
    for f in fields(schema):
        yield from typed_paths(hints[f.name], f"{prefix}{f.name}")


def typed_paths(hint, path: str):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if is_dataclass(hint):
        yield from list_paths(hint, f"{path}.")
    elif origin is dict:
        yield from typed_paths(args[1], f"{path}.*")
    elif origin is list:
        yield path
        if is_dataclass(args[0]):
            yield from list_paths(args[0], f"{path}.*.")


# Lists that are tuples, where a repeat means something: [M, N, K] and [low, high].
TUPLES = {
    "knobs.cpu.*",
    "knobs.cuda.*",
    "devices.*.skus.*.lab_band_tflops.*",
    "devices.*.skus.*.published.*.shape",
}


def test_every_list_in_the_schema_is_checked_for_repeats():
    assert set(list_paths(LabConfig)) - TUPLES == set(LISTS)


REPEATS = {
    "devices.*.dtypes": ("dtypes", ["float32", "float32"], "float32"),
    "devices.*.shapes": ("shapes", [[64, 64, 64], [64, 64, 64]], "[64, 64, 64]"),
    "devices.*.backends": ("backends", ["torch", "numpy", "torch"], "torch"),
    "devices.*.sky_accelerators": ("sky_accelerators", ["H100", "H100"], "H100"),
    "devices.*.skus.*.published": (
        "published",
        [{"dtype": "float32", "shape": [8, 8, 8], "tflops": 1.0, "source": "s"}] * 2,
        "{'dtype': 'float32', 'shape': [8, 8, 8], 'tflops': 1.0, 'source': 's', 'window': '', "
        "'best_shape': False}",
    ),
    "sweep.square.*": ("sweep.square", {"cpu": [64, 128, 64]}, "64"),
    "sweep.skinny_m": ("sweep.skinny_m", [1, 1], "1"),
    "sweep.best_shape.*": ("sweep.best_shape", {"cpu": [[8, 8, 8], [8, 8, 8]]}, "[8, 8, 8]"),
    "lab_devices": ("lab_devices", ["c", "c"], "c"),
}


@pytest.mark.parametrize("pattern", LISTS)
def test_a_list_that_names_an_entry_twice_is_refused_naming_both(pattern):
    key, listed, shown = REPEATS[pattern]
    if key == "published":
        cfg = config({"c": OmegaConf.merge(cpu(), {"skus": {"only": {"published": listed}}})})
    elif key.startswith(("sweep.", "lab_")):
        cfg = config({"c": cpu()})
        section, _, name = key.rpartition(".")
        (cfg[section] if section else cfg)[name] = listed
    else:
        cfg = config({"c": cpu(**{key: listed})})
    if key == "sweep.skinny_m":
        cfg.sweep.skinny_nk = {"cpu": 64}
    with pytest.raises(ConfigError) as err:
        check(cfg)
    named = pattern.replace("devices.*", "devices.c").replace("skus.*", "skus.only")
    named = named.replace(".*", ".cpu")
    assert f"{named} lists {shown} twice; allowed: each once" in str(err.value)
    assert "remove the repeat from conf/ or the override" in str(err.value)


def test_composition_refuses_a_backend_listed_twice():
    out = refused("devices.cpu.backends=[torch,numpy,torch]")
    assert "devices.cpu.backends lists torch twice; allowed: each once" in out


# 4. recognise patterns ------------------------------------------------------------------------


def test_composition_refuses_a_recognise_pattern_that_does_not_compile():
    out = refused("devices.h100.recognise.gpu_name='NVIDIA H100 ('")
    assert (
        "devices.h100.recognise.gpu_name='NVIDIA H100 (' is not a regular expression "
        "(missing ), unterminated subpattern at position 12)"
    ) in out
    assert "escape a literal ( [ + * ? with a backslash" in out


def test_a_probe_refuses_a_hand_edited_pattern_before_searching_with_it():
    params = {"devices": {"cpu": {"kind": "cpu", "recognise": {"cpu_model": "[Intel"}}}}
    with pytest.raises(ConfigError) as err:
        probe_devices(params=params)
    assert "devices.cpu.recognise.cpu_model='[Intel' is not a regular expression" in str(err.value)
    assert "unterminated character set at position 0" in str(err.value)
    with pytest.raises(ConfigError, match=r"gpu_name='\*H100'"):
        check(config({"c": cpu(recognise={"cpu_model": "x", "gpu_name": "*H100"})}))


# 5. A pull whose remote lacks an output --------------------------------------------------------


def sync_pull(path: Path) -> tuple[int, str]:
    return run(
        path,
        sys.executable,
        "-m",
        "roofline.sync",
        "pull",
        check=False,
        env={"PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
def test_a_pull_whose_remote_lacks_an_output_says_what_it_lacks_and_what_it_changed(tmp_path):
    origin, remote = tmp_path / "origin", tmp_path / "remote"
    git(tmp_path, "init", "-q", "-b", "main", str(origin))
    dvc(origin, "init", "-q")
    dvc(origin, "remote", "add", "-d", "store", str(remote))
    results = origin / "devices"
    results.mkdir()
    for name, text in (("cpu.json", "cpu v1"), ("h100.json", "h100 v1")):
        (results / name).write_text(text)
    dvc(origin, "add", "-q", "devices/cpu.json", "devices/h100.json")
    dvc(origin, "push", "-q")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "v1")
    laptop = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(origin), str(laptop))
    dvc(laptop, "pull", "-q")
    # The pod measures both again, but only cpu's push reaches the remote.
    (results / "cpu.json").write_text("cpu v2")
    (results / "h100.json").write_text("h100 v2")
    dvc(origin, "add", "-q", "devices/cpu.json", "devices/h100.json")
    dvc(origin, "push", "-q", "devices/cpu.json")
    git(origin, "commit", "-qam", "v2")
    git(laptop, "pull", "-q")

    code, out = sync_pull(laptop)
    assert code == 1 and "Traceback" not in out
    said = out[out.index("error: ") :]
    assert said.startswith(
        f"error: pull with remote 'store' ({remote}) could not check out every output"
    )
    assert "the remote lacks devices/h100.json, and so does this machine's DVC cache" in said
    assert "it checked out: modified devices/cpu.json" in said
    assert "DVC removed devices/h100.json from the workspace" in said
    assert "as it was" not in said  # it is not: cpu.json is v2 and h100.json is gone
    assert "push the missing outputs from the machine that has them" in said
    assert "re-measure them there (`uv run dvc repro`)" in said
    assert (laptop / "devices/cpu.json").read_text() == "cpu v2"
    assert not (laptop / "devices/h100.json").exists()

    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(origin), str(fresh))
    code, out = sync_pull(fresh)
    assert code == 1 and "it checked out: added devices/cpu.json" in out
    assert "DVC removed" not in out and "as it was" not in out
