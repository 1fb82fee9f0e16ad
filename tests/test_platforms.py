"""Laptops this machine is not (macOS on Apple silicon and on Intel, Windows, Linux on AMD and
Intel), each played by faking the facts the maintained libraries report (py-cpuinfo, psutil,
platform). What the probe records and decides, which dtypes run natively, the computed peaks
and the messages are the real code's."""

import json
import shutil
from pathlib import Path

import pytest

from roofline.configuration.measuring_config import to_plain
from roofline.core import paths
from roofline.core.errors import HardwareError
from roofline.core.measurement import empty, measurement
from roofline.device import hardware
from roofline.device.timing import EventTimer
from roofline.interpretation.datasheets import judged
from roofline.interpretation.interpret import interpret, peaks
from roofline.measuring.measure import native_cpu_dtypes
from stages import probe
from tests.conftest import device

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30


def l3(size_bytes: int) -> dict:
    """A last-level cache shared by every core, as the probe records it."""
    return {"level": "L3", "size_bytes": size_bytes, "shared_by": 2}


FACTS = {
    "macos-arm64": {
        "system": "Darwin",
        "machine": "arm64",
        "brand": "Apple M2 Pro",
        "vendor": None,
        "family": None,
        "model_number": None,
        "flags": [],
        "caches": [l3(16 << 20)],
        "caches_from": "py-cpuinfo",
        "usable_cores": 10,
        "physical_cores": 10,
        "memory_bytes": 32 * GIB,
    },
    "macos-intel": {
        "system": "Darwin",
        "machine": "x86_64",
        "brand": "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz",
        "vendor": "GenuineIntel",
        "family": 6,
        "model_number": 158,
        "flags": ["sse2", "avx", "avx2", "fma"],
        "caches": [l3(16 << 20)],
        "caches_from": "py-cpuinfo",
        "usable_cores": 16,
        "physical_cores": 8,
        "memory_bytes": 32 * GIB,
    },
    "windows-intel": {
        "system": "Windows",
        "machine": "AMD64",
        "brand": "12th Gen Intel(R) Core(TM) i7-1260P",
        "vendor": "GenuineIntel",
        "family": 6,
        "model_number": 154,
        "flags": ["sse2", "avx2", "fma"],
        "caches": [l3(18 << 20)],
        "caches_from": "py-cpuinfo",
        "usable_cores": 16,
        "physical_cores": 12,
        "memory_bytes": 16 * GIB,
    },
    "linux-amd-zen4": {
        "system": "Linux",
        "machine": "x86_64",
        "brand": "AMD Ryzen 7 7840U w/ Radeon 780M Graphics",
        "vendor": "AuthenticAMD",
        "family": 25,
        "model_number": 116,
        "flags": ["sse2", "avx2", "fma", "avx512f", "avx512_bf16"],
        "caches": [l3(16 << 20)],
        "caches_from": "py-cpuinfo",
        "usable_cores": 16,
        "physical_cores": 8,
        "memory_bytes": 32 * GIB,
    },
    "linux-intel-sapphire-rapids": {
        "system": "Linux",
        "machine": "x86_64",
        "brand": "Intel(R) Xeon(R) Platinum 8480+",
        "vendor": "GenuineIntel",
        "family": 6,
        "model_number": 143,
        "flags": ["sse2", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16"],
        "caches": [l3(105 << 20)],
        "caches_from": "py-cpuinfo",
        "usable_cores": 8,
        "physical_cores": 4,
        "memory_bytes": 64 * GIB,
    },
}
CPU = judged(
    "cpu",
    to_plain(
        device(
            kind="cpu",
            sku="laptop",
            recognise={"cpu_model": ".*"},
            dtypes=["float32", "bfloat16", "float16"],
            shapes=[[64, 64, 64]],
        )
    ),
    None,
)


def record(facts: dict, ghz: float | None = 3.0) -> dict:
    """A measured CPU record as this laptop's run would write it (its clock given)."""
    found = hardware.cpu_info(facts)
    return {"status": "measured", "found": found, "clock": {"ghz": ghz, "source": "measured"}}


@pytest.mark.parametrize(
    ("laptop", "microarchitecture", "native"),
    [
        ("macos-arm64", None, {"float32"}),
        ("macos-intel", None, {"float32"}),
        ("windows-intel", None, {"float32"}),
        ("linux-amd-zen4", "zen4", {"float32", "bfloat16"}),
        ("linux-intel-sapphire-rapids", None, {"float32", "bfloat16", "float16"}),
    ],
)
def test_each_laptop_is_described_from_its_libraries_facts(laptop, microarchitecture, native):
    facts = FACTS[laptop]
    found = hardware.cpu_info(facts)
    assert found["model"] == facts["brand"] and found["system"] == facts["system"]
    assert found["logical_cores"] == facts["usable_cores"]
    assert found["physical_cores"] == facts["physical_cores"]
    assert found["microarchitecture"] == microarchitecture
    assert found["caches"] == facts["caches"] and found["caches_from"] == "py-cpuinfo"
    assert found["cache_bytes"] == facts["caches"][0]["size_bytes"]  # the rotation's
    assert native_cpu_dtypes(set(found["isa"])) == native


def test_computed_peaks_use_physical_cores_and_each_cores_vector_units():
    # 8 physical Zen 4 cores x 3 GHz x 32 FLOP/cycle: AVX-512 on 256-bit units.
    zen4 = peaks(CPU, record(FACTS["linux-amd-zen4"]))
    assert zen4["float32"][0] == pytest.approx(8 * 3.0 * 32 / 1e3)
    assert "8 cores x 3.00 GHz" in zen4["float32"][1] and "half rate" in zen4["float32"][1]
    assert zen4["bfloat16"][0] == pytest.approx(8 * 3.0 * 64 / 1e3)
    # 4 physical Sapphire Rapids cores (8 threads): AVX-512 at 64, AMX-BF16 at 1024.
    spr = peaks(CPU, record(FACTS["linux-intel-sapphire-rapids"]))
    assert spr["float32"][0] == pytest.approx(4 * 3.0 * 64 / 1e3)
    assert spr["bfloat16"][0] == pytest.approx(4 * 3.0 * 1024 / 1e3)
    # 12 physical cores on Windows, AVX2 with two FMA units: 32 FLOP/cycle.
    windows = peaks(CPU, record(FACTS["windows-intel"]))
    assert windows["float32"][0] == pytest.approx(12 * 3.0 * 32 / 1e3)


# This project's CI machine, as one session recorded it: 2 cores of an AMD EPYC with AVX-512 on
# full-width units (64 FLOP/cycle), a measured all-core clock of 4.00 GHz (so 0.512 TFLOP/s
# computed), and an FMA kernel that measured 0.543 TFLOP/s on the same cores.
EPYC = {
    "system": "Linux",
    "machine": "x86_64",
    "brand": "AMD EPYC",
    "vendor": "AuthenticAMD",
    "family": 0x1A,
    "model_number": 0x02,
    "flags": ["avx2", "fma", "avx512f", "avx512_bf16"],
    "caches": [l3(32 << 20)],
    "caches_from": "py-cpuinfo",
    "usable_cores": 2,
    "physical_cores": 2,
    "memory_bytes": 24 * GIB,
}


def test_a_cpu_that_beats_its_computed_peak_is_held_to_the_clock_its_fma_ceiling_implies():
    beaten = record(EPYC, ghz=4.0) | {"fma": {"gflops": 543.0, "vector": "AVX-512 (512-bit)"}}
    peak, source = peaks(CPU, beaten)["float32"]
    assert peak == pytest.approx(0.543)  # never the 0.512 the machine has beaten
    assert "implied by the measured FMA ceiling, 0.543 TFLOP/s" in source
    assert "4.24 GHz" in source and "read 4.00 GHz" in source  # 0.543e12 / (2 x 64) Hz
    # The BLAS at 0.50 TFLOP/s: MFU 92%, not 98% against the beaten peak.
    seconds = 2 * 4096**3 / 0.50e12
    (row,) = interpret([measurement("cpu", "float32", [4096] * 3, [seconds], 1e-6)], CPU, beaten)
    assert row.mfu == pytest.approx(0.50 / 0.543) and not row.flag
    # A peak set in conf below the ceiling gives way too, and says so.
    low = judged("cpu", to_plain(device(kind="cpu", peak_tflops={"float32": 0.4})), None)
    peak, source = peaks(low, beaten)["float32"]
    assert peak == pytest.approx(0.543) and source.startswith("the measured FMA ceiling, above")
    # Held to the clock it implies, whatever the rounding of that clock's peak: still the
    # computed peak (a fenced run's test once failed so, 1 in 20 ceilings).
    for gflops in (543.0 + i * 0.731 for i in range(200)):
        implied = record(EPYC, ghz=4.0) | {"fma": {"gflops": gflops, "vector": "AVX-512"}}
        assert peaks(CPU, implied)["float32"][1].startswith("2 cores x "), gflops
    # A clock the ceiling does not beat stands.
    unbeaten = record(EPYC, ghz=4.0) | {"fma": {"gflops": 480.0, "vector": "AVX-512 (512-bit)"}}
    assert peaks(CPU, unbeaten)["float32"][0] == pytest.approx(0.512)


def test_apple_silicon_gets_no_invented_peak_and_says_why():
    mac = record(FACTS["macos-arm64"], ghz=None)
    assert peaks(CPU, mac) == {}
    (row,) = interpret([empty("cpu", "float32", [64, 64, 64], "skipped", "x")], CPU, mac)
    assert row.peak_source.startswith("no clock known")
    (row,) = interpret(
        [empty("cpu", "float32", [64, 64, 64], "skipped", "x")],
        CPU,
        record(FACTS["macos-arm64"]),
    )
    assert row.peak_source.startswith(
        "no computed peak: no FLOP per cycle is known for float32 on Apple M2 Pro (flags: none known)"
    )


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    shutil.copy(ROOT / "params.yaml", tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROOFLINE_HARDWARE", raising=False)
    monkeypatch.setattr(hardware, "gpu_info", lambda: [])  # no NVIDIA GPU on a laptop
    return tmp_path


def play(monkeypatch, laptop: str, mps: bool = False) -> None:
    import torch

    monkeypatch.setattr(hardware, "cpu_facts", lambda: FACTS[laptop])
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


def test_a_mac_probes_its_cpu_and_its_gpu(workspace, monkeypatch, capsys):
    play(monkeypatch, "macos-arm64", mps=True)
    probe.main(["cpu"])
    probe.main(["mps"])
    out = capsys.readouterr().out
    assert "cpu: here (Apple M2 Pro (10 cores))" in out
    assert "mps: here (Apple M2 Pro GPU (32 GiB shared))" in out
    fingerprint = json.loads(paths.fingerprint_path("mps").read_text())
    assert fingerprint["hardware"] == {"name": "Apple M2 Pro GPU", "memory_gib": 32}


@pytest.mark.parametrize("laptop", ["windows-intel", "macos-intel", "linux-amd-zen4"])
def test_a_laptop_without_apples_gpu_pends_mps_and_measures_its_cpu(
    workspace, monkeypatch, capsys, laptop
):
    play(monkeypatch, laptop)
    probe.main(["cpu"])
    probe.main(["mps"])
    out = capsys.readouterr().out
    assert f"cpu: here ({FACTS[laptop]['brand']} ({FACTS[laptop]['usable_cores']} cores))" in out
    assert "mps: not on this machine, never measured: pending" in out
    from roofline.configuration.measuring_config import device_config, load_params
    from roofline.machines.records import decide

    dev = device_config(load_params(), "cpu")
    assert decide("cpu", dev, "benchmark", paths.results_path("cpu")).action == "measure"
    assert (
        decide(
            "mps",
            device_config(load_params(), "mps"),
            "benchmark",
            paths.results_path("mps"),
        ).action
        == "pending"
    )


def play_nvidia_without_cuda(monkeypatch, system: str) -> None:
    """NVML sees an NVIDIA GPU, and this torch is a CPU-only build (Windows' from the package
    index: `torch.version.cuda` is None and torch.cuda is not available)."""
    import platform

    import torch

    from roofline.device import kinds

    monkeypatch.setattr(hardware, "gpu_count", lambda: 1)
    monkeypatch.setattr(hardware, "nvidia_gpu_count", lambda: 1)
    monkeypatch.setattr(hardware, "nvml_driver", lambda: "581.15")
    monkeypatch.setattr(kinds, "cuda_available", lambda: (False, "Torch not compiled with CUDA"))
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(platform, "system", lambda: system)


def test_a_windows_pc_with_an_nvidia_gpu_and_no_cuda_torch_measures_its_cpu_and_says_how_once(
    tmp_path, monkeypatch, capsys
):
    import torch

    shutil.copy(ROOT / "params.yaml", tmp_path)  # the workspace, with gpu_info as it is
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROOFLINE_HARDWARE", raising=False)
    play(monkeypatch, "windows-intel")
    play_nvidia_without_cuda(monkeypatch, "Windows")
    probe.main([])
    out = capsys.readouterr().out
    laptop = FACTS["windows-intel"]
    assert f"cpu: here ({laptop['brand']} ({laptop['usable_cores']} cores))" in out, out
    (note,) = [line for line in out.splitlines() if line.startswith("note: NVML sees")]
    assert note == (
        f"note: NVML sees 1 NVIDIA GPU (driver 581.15), but this torch ({torch.__version__}) is the package "
        "index's build for Windows, which has no CUDA: the CPU is measured, the GPU is not. To "
        "measure the GPU too, install the same torch built for this driver from PyTorch's index: "
        "`uv pip install --reinstall-package torch --torch-backend=auto torch==2.15.0`, then "
        "`$env:UV_NO_SYNC=1; uv run "
        "dvc repro` (PowerShell; docs/several-machines.md)"
    )
    probe.main(["cpu"])  # a device's own probe does not say it again
    assert "note: NVML sees" not in capsys.readouterr().out
    # On Linux the lock's torch is CUDA's: a CPU-only one there is a broken set-up, and stops.
    play_nvidia_without_cuda(monkeypatch, "Linux")
    with pytest.raises(HardwareError, match=r"is a CPU-only build: `uv sync --locked` installs"):
        hardware.live_hardware()


def test_apples_gpu_is_timed_by_its_own_events():
    from tests.test_timing import FakeDevice

    mps = FakeDevice()

    def work(i):
        mps.now += 0.25

    assert EventTimer(mps, "mps events").times(work, 0, 2) == [0.25, 0.25]
    assert mps.log == ["synchronize", "record", "record", "record", "record", "synchronize"]


def test_numpy_on_a_mac_is_named_by_its_accelerate_build(monkeypatch):
    import numpy as np

    from roofline.device import backends

    config = {"Build Dependencies": {"blas": {"name": "accelerate", "version": "unknown"}}}
    monkeypatch.setattr(np, "show_config", lambda mode: config)
    monkeypatch.setattr("threadpoolctl.threadpool_info", lambda: [])
    library = backends.numpy_blas()
    assert library == {"library": "accelerate", "version": "unknown"}
    assert backends.label("numpy", library) == "numpy (accelerate unknown)"


NO_CACHE = ("-p", "no:cacheprovider", "tests")


@pytest.mark.slow  # the whole suite collected in a process of its own: first, not last
@pytest.mark.parametrize(
    ("played_os", "absent"),
    [("macos", "sky"), ("windows", "")],
    ids=["macos-without-the-cloud-group", "windows-with-it"],
)
def test_the_tests_are_collected_on_a_mac_and_a_windows_pc_without_amdsmi(played_os, absent):
    """amdsmi is installed on Linux only: collection must not need it (find_spec finds
    nothing), nor anything else only one OS has, at import (tests/fakes/played_os.py). Nor
    SkyPilot: the README's `uv run pytest` alone does not install the `cloud` group (the Mac
    here), which a pod's launcher adds (the Windows PC)."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.fakes.played_os",
            "--collect-only",
            "-q",
            "-n",
            "0",
            *NO_CACHE,
        ],
        cwd=ROOT,
        # The plugin by its module path from the checkout (python -m puts it first on sys.path):
        # with tests/fakes itself on the path, its folders were top-level packages, and where
        # SkyPilot is not installed (plain `uv run pytest`) `import sky` found tests/fakes/sky.
        env=os.environ | {"PLAYED_OS": played_os, "PLAYED_ABSENT": absent},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert " tests collected in " in last and "error" not in last, last


def test_the_test_workers_are_the_usable_cpus_plus_one_on_linux_a_mac_and_windows(monkeypatch):
    # Linux: the CPUs this process may use; macOS and Windows have no sched_getaffinity, so
    # every CPU the OS counts (tests/conftest.py's pytest-xdist hook).
    import os

    from tests.conftest import pytest_xdist_auto_num_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert pytest_xdist_auto_num_workers(None) == 4
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert pytest_xdist_auto_num_workers(None) == 9
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # the OS could not tell
    assert pytest_xdist_auto_num_workers(None) == 2
