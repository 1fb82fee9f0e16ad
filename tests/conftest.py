"""Shared helpers: devices built through the real schema, hardware described in JSON."""

import contextlib
import os
import sys
from pathlib import Path

import pytest

from tests.machines import AMDSMI_INSTALLED, NO_AMDSMI, PLAYED_CACHES, POSIX, untraced

os.environ.setdefault("DVC_NO_ANALYTICS", "1")
# OpenMP's threads (torch's, in the workers and in every stage they start) wait for the next
# call asleep, not spinning: with more workers than CPUs, a spinning thread takes a CPU another
# process is waiting for. A played GPU's 1.2 s window under two busy loops, alone: 5.8 CPU-s
# spinning, 1.3 asleep. Set before torch is first imported, when libgomp reads it; each run
# records it (roofline.measuring.provenance), and nothing here asserts a speed.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _read_once(read):
    """py-cpuinfo reads this CPU in a process of its own (0.7 CPU-s), and a dozen tests, and
    test_knobs's collection, describe this machine live: each worker asks it once, and each
    caller gets its own copy of the answer. A test that plays another CPU replaces the
    function itself (monkeypatch)."""
    import copy
    import functools

    once = functools.cache(read)
    return lambda: copy.deepcopy(once())


with contextlib.suppress(ImportError):  # a bare GPU image has no py-cpuinfo: gpu-check's tests
    import cpuinfo

    cpuinfo.get_cpu_info = _read_once(cpuinfo.get_cpu_info)


LAPTOP = {
    "cpu": {
        "model": "Laptop CPU i5",
        "logical_cores": 2,
        "isa": ["avx2", "avx512f", "fma"],
        "cache_bytes": 1 << 20,
        **PLAYED_CACHES,
        "memory_bytes": 16 << 30,
    },
    "gpus": [],
}
# The fingerprint a run on LAPTOP measures under (stages.probe writes it).
FINGERPRINT = {
    "device": "cpu",
    "status": "recorded",
    "hardware": {"model": "Laptop CPU i5", "logical_cores": 2, "isa": ["avx2", "avx512f", "fma"]},
    "torch": "2.15.0",
}
H100_POD = {
    "cpu": {
        "model": "AMD EPYC Pod",
        "logical_cores": 16,
        "isa": ["avx2", "fma"],
        "cache_bytes": 1 << 25,
        "memory_bytes": 128 << 30,
    },
    "gpus": [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "compute_capability": "9.0",
            "sm_count": 132,
            "memory_bytes": 85 << 30,
            "l2_bytes": 50 << 20,
        }
    ],
}


# A datasheet line's fields (roofline.interpretation.datasheets.Sku), which `device` takes flat for
# brevity.
DATASHEET = (
    "sku",
    "source",
    "peak_tflops",
    "memory_bandwidth_gbps",
    "memory_gb",
    "peak_clock_mhz",
    "sm_count",
    "clock_ghz",
    "cost_per_hour",
    "lab_band_tflops",
    "lab_done_tflops",
)


def device(datasheet_for: str = "*", **fields):
    """A device's conf merged onto the real schema, so enums and types are checked; its
    datasheet fields, given flat, become its one line, for the name `datasheet_for`."""
    from omegaconf import OmegaConf  # imported here: the CUDA tests run without omegaconf

    from roofline.interpretation.lab_config import LabDevice

    line = {key: fields.pop(key) for key in DATASHEET if key in fields}
    if line:
        fields["skus"] = {"only": {"name": datasheet_for, "sku": "a SKU"} | line}
    return OmegaConf.merge(OmegaConf.structured(LabDevice), fields)


def counted(warmup: int = 0, repeats: int = 1, **window: float):
    """Bench settings that time a count of calls: no window by time unless `window` asks."""
    from roofline.device.timing import BenchSettings

    timed = {"min_seconds": 0.0, "warmup_seconds": 0.0} | window
    return BenchSettings(warmup=warmup, repeats=repeats, **timed)


def measuring(dev):
    """The part of a device's conf its measuring stages read (what load_params gives them)."""
    from omegaconf import OmegaConf

    from roofline.core.depends import MEASURING_KEYS

    return OmegaConf.masked_copy(dev, list(MEASURING_KEYS))


def config(devices: dict, **bench):
    from omegaconf import OmegaConf

    from roofline.interpretation.lab_config import LabConfig

    return OmegaConf.merge(OmegaConf.structured(LabConfig), {"bench": bench, "devices": devices})


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: `-p no:xdist` has none
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the CPUs this process may use. The end-to-end tests wait
    on their DVC and stage processes, and on played GPUs' device time, and another worker's test
    fills those waits (2-core CI, fresh clone, with coverage: 444 s of tests on 2 workers, 407 s
    on 3)."""
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return (len(usable) if usable else os.cpu_count() or 1) + 1


# The test modules that run the GPU-side code pyproject.toml's coverage measures: with
# `--cov-context=test`, these cover every line of it that the whole suite covers. The others'
# tests run with the tracer stopped: under Python 3.11 it slows every line a test runs in
# pytest's own process (Hydra, DVC's API, pandas, matplotlib), for no line of that code.
GPU_SIDE_TESTS = frozenset(
    {
        "test_caches",
        "test_core_types",
        "test_cores",
        "test_cuda",
        "test_gpm",
        "test_gpu_paths",
        "test_gpu_steps",
        "test_hardware",
        "test_honest_config",
        "test_kernel_names",
        "test_knobs",
        "test_lab",
        "test_measure",
        "test_mps",
        "test_node",
        "test_noise",
        "test_platforms",
        "test_records",
        "test_rocm",
        "test_standin",
        "test_standin_nvml",
        "test_standin_torch",
        "test_telemetry",
        "test_timing",
    }
)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    """Collection with coverage's tracer stopped, as the tests outside GPU_SIDE_TESTS run: the
    test modules import torch, SkyPilot, DVC and pandas (2.8 CPU-s more each worker, traced).
    First, traced, the modules coverage measures (pyproject.toml): their module-level lines are
    lines it counts, and run only when a module is first imported."""
    import importlib

    measuring = sys.modules.get("coverage")
    tracer = measuring.Coverage.current() if measuring else None
    if tracer is not None and sys.gettrace() is not None:
        with untraced():
            import torch  # noqa: F401  what they import, untraced: its import is no line of theirs
        for path in tracer.config.run_include:
            importlib.import_module(path.removesuffix(".py").replace("/", "."))
    with untraced():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test outside GPU_SIDE_TESTS runs, set-up to tear-down, with coverage's tracer stopped
    (where pytest-cov started one)."""
    with contextlib.nullcontext() if item.path.stem in GPU_SIDE_TESTS else untraced():
        yield


def pytest_collection_modifyitems(config, items):
    # The two-machine story (tests/test_pipeline.py's `story`) is told by its first test, run
    # first, while the other workers run the other slow tests; the tests that read it come
    # after those, so no worker sits waiting for it to be told.
    # The slow end-to-end tests next, the quick ones last: they fill in behind the long ones,
    # so that no worker is left alone with a minute-long test at the end.
    story = [item for item in items if "story" in getattr(item, "fixturenames", ())]
    slow = [item for item in items if "slow" in item.keywords and item not in story]
    rest = [item for item in items if item not in story and item not in slow]
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items[:] = dealt(story[:1] + slow, story[1:], rest, workers)
    if os.name == "nt":  # a test marked posix needs bash, /proc or POSIX permissions
        for item in items:
            if item.get_closest_marker("posix"):
                item.add_marker(pytest.mark.skip(reason=POSIX))
    import torch  # here: imported after OMP_WAIT_POLICY is set

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (CUDA); run scripts/gpu-check on one")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def dealt(long: list, reading: list, quick: list, workers: int) -> list:
    """The order to run in: with pytest-xdist, each worker starts with an even share of the long
    tests, then of the story's readers, then quick tests. Work-stealing hands each worker a run
    of the list (its first third, of three), and takes from the queues' ends: with every long
    test in the first third, one worker ran them all while the others stole its last ones
    late, and the run ended on one worker alone for 20 s of a 290 s run. One worker: in order."""
    shares = [long[w::workers] + reading[w::workers] for w in range(workers)]
    left, quick = len(long) + len(reading) + len(quick), list(quick)
    for w, share in enumerate(shares):  # xdist's split: a worker's run is what is left / those left
        take = max(0, left // (workers - w) - len(share))
        share += quick[:take]
        del quick[:take]
        left -= len(share)
    return [item for share in shares for item in share] + quick


def measured_row(device, dtype, shape, samples, peak, source, check_error, telemetry=None):
    """A results.csv row for a measured point, interpreted against `peak`."""
    from roofline.core.measurement import measurement
    from roofline.interpretation.rows import row

    return row(measurement(device, dtype, shape, samples, check_error, telemetry), peak, source)


def empty_row(device, dtype, shape, status, reason):
    from roofline.core.measurement import empty
    from roofline.interpretation.rows import row

    return row(empty(device, dtype, shape, status, reason))


# The checkout's own caches of what this machine is (roofline.device.hardware.BOOT_CACHE) and
# of what its probe decided (stages.probe.PROBE_CACHE): the user's next `dvc repro` here reads
# them, so a played GPU a test left in one would be "here".
CHECKOUT_CACHES = [
    Path(__file__).resolve().parents[1] / ".dvc/tmp" / name
    for name in ("hardware.json", "probe.json")
]


def _written(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_mtime_ns, found.st_size


@pytest.fixture(autouse=True)
def checkout_caches_untouched():
    """No test writes the checkout's machine caches (one measuring in-process runs in tmp_path)."""
    before = [_written(path) for path in CHECKOUT_CACHES]
    yield
    for path, was in zip(CHECKOUT_CACHES, before, strict=True):
        assert _written(path) == was, (
            f"this test wrote {path}: run it in tmp_path (monkeypatch.chdir)"
        )


@pytest.fixture(autouse=True)
def tracebacks_kept():
    """Each test starts with Python's tracebacks whole: SkyPilot's print_exception_no_traceback
    sets sys.tracebacklimit to 0 and leaves it so where the error it wraps is raised, which hid
    the next test's traceback in the same worker."""
    yield
    if hasattr(sys, "tracebacklimit"):
        del sys.tracebacklimit


@pytest.fixture(scope="session")
def shared(tmp_path_factory, worker_id) -> Path:
    """The temporary folder every pytest-xdist worker of this run sees (each worker's own
    basetemp is beneath it): where what is made once for the run is made (tests.machines)."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


@pytest.fixture(scope="session")
def rendered_project(shared) -> Path:
    """The project rendered once on a machine with none of its devices (tests.machines), shared
    by every pytest-xdist worker: copy it (`rendered`) before changing it."""
    from tests.machines import rendered_once

    return rendered_once(shared)


@pytest.fixture
def rendered(rendered_project, tmp_path) -> Path:
    """A test's own copy of the rendered project: every record pending, nothing measured."""
    from tests.machines import copied

    return copied(rendered_project, tmp_path / "rendered")


@pytest.fixture
def played(monkeypatch):
    """Play a machine's GPUs in this process through the CUDA stand-in (tests/fakes/cuda):
    `played("gvisor")` installs it and returns its state; everything is undone after the test."""
    import importlib.util
    import sys
    from pathlib import Path

    fakes = Path(__file__).parent / "fakes/cuda"
    monkeypatch.syspath_prepend(str(fakes))
    spec = importlib.util.spec_from_file_location("pynvml", fakes / "pynvml.py")
    nvml = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nvml)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    import played_cuda

    from roofline.device import amd_telemetry

    def play(machine: str = "h100", **changes):
        if machine.startswith("mi") and not AMDSMI_INSTALLED:
            pytest.skip(NO_AMDSMI)
        state = played_cuda.install({"like": machine, **changes}, monkeypatch.setattr)
        # amdsmi loads its library when imported: the played one (tests/fakes/cuda/amdsmi.py,
        # first on the path) is imported afresh per machine, and fails where it has none.
        monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
        monkeypatch.setattr(amd_telemetry, "_loaded", [])
        return state

    yield play
    played_cuda.uninstall()  # the played device's dispatch mode, before monkeypatch undoes
