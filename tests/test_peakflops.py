"""The CPU's own microbenchmarks: its clock and its FMA ceiling, compiled where a compiler is,
and said to be unmeasured where none is."""

import json
import shutil
import subprocess

import pytest

from roofline.device import cache_ceilings, peakflops, programs
from roofline.device.hardware import cpu_info

needs_cc = pytest.mark.skipif(programs.compiler() is None, reason="no C compiler here")


@needs_cc
def test_measured_cpu_clock_is_plausible():
    ghz, _ = peakflops.measure_clock_ghz(1)
    if ghz is None:
        pytest.skip("not x86-64: the clock comes from the OS")
    assert 0.5 < ghz < 7.0  # a register-add chain retires one add per cycle


@needs_cc
def test_the_fma_ceiling_runs_every_core_at_the_widest_vector_the_flags_show():
    info = cpu_info()
    fma = peakflops.measure_fma(info["logical_cores"], info["isa"], seconds=0.05)
    if fma["gflops"] is None:  # this machine was busy in every window: said, and kept apart
        assert fma["reason"].startswith("not used: every one of its 5 windows shared the CPUs")
        return
    assert len(fma["per_core_gflops"]) == info["logical_cores"]
    assert fma["gflops"] == pytest.approx(sum(fma["per_core_gflops"]))
    # A vector FMA chain does at least one FLOP a nanosecond, and no core does 2000.
    assert all(1 < g < 2000 for g in fma["per_core_gflops"])
    expected = "AVX-512 (512-bit)" if "avx512f" in info["isa"] else None
    assert expected is None or fma["vector"] == expected


def test_without_a_compiler_nothing_is_measured_and_it_says_why(monkeypatch):
    monkeypatch.setattr(programs, "compiler", lambda: None)
    assert peakflops.measure_fma(2, ["avx2", "fma"]) == {
        "gflops": None,
        "vector": "AVX2 (256-bit)",
        "reason": "not measured: no C compiler (cc, gcc or clang) here",
    }
    assert peakflops.measure_clock_ghz(2) == (None, "")


def test_the_clock_falls_back_to_what_the_os_reports(monkeypatch):
    from collections import namedtuple

    import psutil

    freq = namedtuple("freq", "current min max")
    monkeypatch.setattr(peakflops, "measure_clock_ghz", lambda cores, seconds: (None, ""))
    monkeypatch.setattr(psutil, "cpu_freq", lambda: freq(2400.0, 0.0, 3200.0))
    assert peakflops.cpu_clock(2) == {"ghz": 3.2, "source": "the OS's maximum clock (psutil)"}
    monkeypatch.setattr(psutil, "cpu_freq", lambda: None)
    assert peakflops.cpu_clock(2)["ghz"] is None


# ---- outside programs: bounded, and believed only within physics ----------------------------

posix_only = pytest.mark.posix  # plays a compiler as a shell script


def played_cc(tmp_path, monkeypatch, program: str, compiles: str = "") -> None:
    """A `cc` first on PATH: it runs `compiles` (shell), then writes `program` (a shell script,
    executable) where -o says, unless `program` is empty."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    write = (
        f'cat > "$out" <<\'PROGRAM\'\n#!/bin/sh\n{program}\nPROGRAM\nchmod +x "$out"\n'
        if program
        else ""
    )
    cc = bin_dir / "cc"
    cc.write_text(
        '#!/bin/sh\nout=\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
        f"{compiles}\n{write}exit 0\n",
        encoding="utf-8",
    )
    cc.chmod(0o755)
    monkeypatch.setenv(
        "PATH", __import__("os").pathsep.join([str(bin_dir), __import__("os").environ["PATH"]])
    )
    monkeypatch.setattr(peakflops.platform, "machine", lambda: "x86_64")


SIZES = [cache_ceilings.CacheSize("L1", 48 << 10, 1), cache_ceilings.CacheSize("L2", 1 << 20, 1)]


def every_ceiling(cores: int = 2) -> dict:
    """What the clock, FMA and cache kernels each say, run as the benchmark runs them."""
    clock, why = peakflops.measure_clock_ghz(cores)
    fma = peakflops.measure_fma(cores, ["avx512f"], seconds=0.01)
    caches = cache_ceilings.measure_cache_bandwidth(
        cores, ["avx512f"], SIZES, "given", 0.01, memory_bytes=1 << 30
    )
    under_fma = peakflops.measure_fma_clock(cores, ["avx512f"], seconds=0.01)
    return {"clock": (clock, why), "fma": fma, "caches": caches, "fma_clock": under_fma}


@posix_only
@pytest.mark.parametrize(
    ("program", "compiles", "said"),
    [
        ("", "sleep 30", "cc did not finish compiling in 1 s"),
        ("", "", "cc exited 0 but wrote no program"),
        ("echo abc", "", "it printed 'abc', not its figures"),
        ("echo 'nan 1.0 0.0'", "", "it printed 'nan 1.0 0.0', not its figures"),
        ("exit 3", "", "it exited with code 3"),
        ("echo '-1.0 1.0 0.0'", "", "it printed '-1.0 1.0 0.0', not its figures"),
        ("echo '3.0 5.0 0.0'", "", "it printed '3.0 5.0 0.0', not its figures"),
        ("true", "", "it printed nothing"),
        ("sleep 30", "", "it did not finish in 1 s"),
    ],
)
def test_a_kernel_that_hangs_fails_or_prints_nonsense_is_not_measured_and_says_why(
    tmp_path, monkeypatch, program, compiles, said
):
    played_cc(tmp_path, monkeypatch, program, compiles)
    monkeypatch.setattr(programs, "COMPILE_TIMEOUT_S", 1.0)
    monkeypatch.setattr(programs, "RUN_TIMEOUT_S", 1.0)
    seen = every_ceiling()
    assert seen["clock"] == (None, f"the clock program was not measured: {said}")
    assert seen["fma"]["gflops"] is None and seen["fma"]["reason"] == f"not measured: {said}"
    for level in seen["caches"]:
        assert level["gbps"] is None and level["reason"] == f"not measured: {said}", level
    under = seen["fma_clock"]
    assert under["ghz"] is None and under["reason"] == f"not measured: {said}"


@posix_only
def test_a_temporary_folder_that_runs_no_program_is_not_measured_and_says_which(
    tmp_path, monkeypatch
):
    # What a noexec mount does to exec (EACCES), played by a program without its execute bit.
    played_cc(tmp_path, monkeypatch, "echo '3.0 1.0 0.0'")
    (tmp_path / "bin" / "cc").write_text(
        (tmp_path / "bin" / "cc").read_text().replace('chmod +x "$out"', 'chmod -x "$out"')
    )
    fma = every_ceiling()["fma"]
    assert fma["gflops"] is None
    assert fma["reason"].startswith("not measured: it could not be run (Permission denied")
    assert "set TMPDIR to one that allows programs" in fma["reason"]


@posix_only
def test_a_kernel_printing_well_formed_lies_is_refused_with_both_figures(tmp_path, monkeypatch):
    played_cc(tmp_path, monkeypatch, "for w in 1 2 3 4 5; do echo '999999.0 1.0 0.0'; done")
    seen = every_ceiling()
    clock, why = seen["clock"]
    assert clock == 999999.0  # kept as it read, beside why it is not used
    assert why == "refused: 1e+06 GHz is not a clock any CPU runs at (0.2 to 7)"
    assert peakflops.cpu_clock(2)["source"].endswith(
        "the measured clock (999999.00 GHz) was not used: " + why
    )
    assert seen["fma"]["gflops"] is None
    # Two copies, each lying 999,999 GFLOP/s, against 2 cores x 7 GHz x 64 FLOP/cycle + 25%.
    assert seen["fma"]["reason"] == (
        "refused: 2e+06 GFLOP/s is above what these cores can do, 1120 "
        "(2 cores x 7 GHz x 64 FLOP/cycle + 25%)"
    )
    assert seen["fma_clock"] == {
        "ghz": None,
        "vector": "AVX-512 (512-bit)",
        "reason": "refused: 1e+06 GHz is not a clock any CPU runs at (0.2 to 7)",
    }
    bounds = {"L1": "3584 (2 cores x 7 GHz x 256", "L2": "1792 (2 cores x 7 GHz x 128"}
    bounds |= {"DRAM": "896 (2 cores x 7 GHz x 64"}
    for level in seen["caches"]:
        assert level["gbps"] is None
        assert level["reason"] == (
            "refused: 2e+06 GB/s is above what these cores can load, "
            f"{bounds[level['level']]} bytes a cycle)"
        )


def test_each_levels_read_bound_is_its_bytes_a_cycle_per_core_at_the_measured_clock():
    assert cache_ceilings.read_bound_gbps("L3", 8, 4.0) == (
        8 * 4.0 * 64,
        "8 cores x 4 GHz x 64 bytes a cycle",
    )
    # Measured figures pass: two AMD EPYC cores at 3.65 GHz read L1 at 326 GB/s, L2 at 228, L3
    # at 181 and DRAM at 34 (2026-12), with an FMA ceiling of 232 GFLOP/s.
    for level, gbps in {"L1": 326, "L2": 228, "L3": 181, "DRAM": 34}.items():
        assert cache_ceilings.read_bound_gbps(level, 2, 3.65)[0] > gbps
    assert peakflops.fma_bound_gflops(2, ["avx512f", "avx2", "fma"], 3.65)[0] > 232


def test_the_fma_bound_is_the_computed_peak_at_the_measured_clock_with_its_margin():
    assert peakflops.fma_bound_gflops(4, ["avx2", "fma"], 3.0) == (
        4 * 3.0 * 32 * 1.25,
        "4 cores x 3 GHz x 32 FLOP/cycle + 25%",
    )
    # No flag the table knows (an arm64 laptop): the most any core does.
    assert peakflops.fma_bound_gflops(1, [], None)[0] == 7.0 * 64 * 1.25


@posix_only
def test_a_lying_kernels_figures_never_reach_the_results_as_measured(tmp_path, monkeypatch):
    """A CPU benchmark with a compiler whose every program prints 999,999 (GHz, GFLOP/s,
    GB/s): the matmul is measured, each lie refused, and aggregate's peak is the OS clock's,
    not the 63,999.9 TFLOP/s it once built from them."""
    from collections import namedtuple

    import psutil

    from roofline.configuration.measuring_config import bench_settings
    from roofline.interpretation.aggregate import aggregate
    from roofline.interpretation.lab_config import load_lab_params
    from roofline.measuring import benchmark
    from tests import golden
    from tests.conftest import FINGERPRINT, LAPTOP, config, device, measuring
    from tests.test_caches import knobs_record, sweep_record

    played_cc(tmp_path, monkeypatch, "for w in 1 2 3 4 5; do echo '999999.0 1.0 0.0'; done")
    monkeypatch.setattr(
        psutil, "cpu_freq", lambda: namedtuple("f", "current min max")(0, 0, 3000.0)
    )
    bench = bench_settings(config({}, repeats=1, warmup=0, copy_mib=1, min_seconds=0.0))
    cpu = device(kind="cpu", sku="laptop", dtypes=["float32"], shapes=[[64, 64, 64]])
    record = benchmark.measure_device("cpu", measuring(cpu), bench, LAPTOP["cpu"], FINGERPRINT)
    assert record["rows"][0]["status"] == "measured"  # the work kept
    assert record["clock"] == {
        "ghz": 3.0,
        "source": "the OS's maximum clock (psutil); the measured clock (999999.00 GHz) was not "
        "used: refused: 1e+06 GHz is not a clock any CPU runs at (0.2 to 7)",
    }
    assert record["fma"]["gflops"] is None and record["fma"]["reason"].startswith("refused: ")
    assert all(c["gbps"] is None and c["reason"].startswith("refused: ") for c in record["caches"])

    cfg = load_lab_params(golden.PARAMS)
    cfg.devices = {"cpu": cfg.devices.cpu}
    results = {"cpu": golden.parsed("cpu", json.loads(json.dumps(record)))}
    sweeps = {"cpu": sweep_record("cpu", "none", "measured")}
    knobs = {"cpu": knobs_record("cpu", "none", "measured")}
    table = aggregate(cfg, results, sweeps, knobs)[0]
    row = table[table.status == "measured"].iloc[0]
    physical = LAPTOP["cpu"].get("physical_cores") or LAPTOP["cpu"]["logical_cores"]
    assert row.peak_tflops == pytest.approx(physical * 3.0 * 64 / 1e3)  # AVX-512 FP32 FMA
    assert "the OS's maximum clock (psutil)" in row.peak_source


# ---- a clock we know, or none (psutil's answer only where it is the clock a kernel runs at) --


@pytest.fixture
def no_clock_program(monkeypatch):
    """No compiler here, so no measured clock: what the OS says is all there is."""
    monkeypatch.setattr(programs, "compiler", lambda: None)
    monkeypatch.setattr(peakflops, "measure_clock_ghz", lambda cores, seconds: (None, ""))


def play_os(monkeypatch, system: str, machine: str, freq=None) -> None:
    import psutil

    monkeypatch.setattr(peakflops.platform, "system", lambda: system)
    monkeypatch.setattr(peakflops.platform, "machine", lambda: machine)
    if freq is None:  # psutil defines no cpu_freq where the OS has none (arm64 Macs)
        monkeypatch.delattr(psutil, "cpu_freq", raising=False)
    else:
        monkeypatch.setattr(psutil, "cpu_freq", freq, raising=False)


def test_windows_base_clock_is_never_a_peak_clock_and_it_says_how_to_get_a_compiler(
    monkeypatch, no_clock_program
):
    from collections import namedtuple

    # psutil on Windows: (current, max) from CallNtPowerInformation, the base clock (3.5 GHz on
    # a laptop that runs at 4.4): an MFU against it would read above 100%.
    freq = namedtuple("scpufreq", "current min max")(3500.0, 0.0, 3500.0)
    play_os(monkeypatch, "Windows", "AMD64", lambda: freq)
    clock = peakflops.cpu_clock(8)
    assert clock["ghz"] is None
    assert clock["source"].startswith("Windows reports its base clock, not the boost clock")
    # No compiler would build the POSIX kernels there: the conf key is the way to a peak, or
    # WSL2's Linux, whose gcc builds them.
    assert clock["source"].endswith(
        "; set clock_ghz in conf/device/cpu.yaml's datasheet line for a peak, or run the lab "
        "under WSL2 (`wsl --install`, then `sudo apt install gcc` in it), where they build"
    )


@posix_only
def test_on_windows_the_kernels_are_not_built_whatever_compiler_is_there(tmp_path, monkeypatch):
    played_cc(tmp_path, monkeypatch, "echo '3.0 1.0 0.0'")  # a compiler that would work
    monkeypatch.setattr(programs.platform, "system", lambda: "Windows")
    seen = every_ceiling()
    said = programs.NOT_ON_WINDOWS
    assert seen["clock"] == (None, f"the clock program was not measured: {said}")
    assert seen["fma"]["reason"] == f"not measured: {said}"
    assert all(level["reason"] == f"not measured: {said}" for level in seen["caches"])
    assert seen["fma_clock"]["ghz"] is None  # its asm is POSIX C's too: never built there
    assert seen["fma_clock"]["reason"] == f"not measured: {said}"
    assert peakflops.naive_matmul() is None  # the textbook knob: not measured either


def test_apple_silicon_has_no_clock_from_psutil_whether_it_has_one_or_not(
    monkeypatch, no_clock_program
):
    play_os(monkeypatch, "Darwin", "arm64")  # cpu_freq absent, as on many arm64 Macs
    clock = peakflops.cpu_clock(10)
    assert clock["ghz"] is None and clock["source"].startswith("Apple silicon reports no clock")
    assert clock["source"].endswith("xcode-select --install")
    from collections import namedtuple

    m4 = namedtuple("scpufreq", "current min max")(4.0, 4.0, 4.0)  # 1000x low (psutil #2642)
    play_os(monkeypatch, "Darwin", "arm64", lambda: m4)
    assert peakflops.cpu_clock(10)["ghz"] is None


def test_psutils_own_failure_is_said_never_a_traceback(monkeypatch, no_clock_program):
    def raises():
        raise SystemError("<built-in function cpu_freq> returned a result with an exception set")

    play_os(monkeypatch, "Linux", "aarch64", raises)
    clock = peakflops.cpu_clock(4)
    assert clock == {
        "ghz": None,
        "source": "psutil's cpu_freq failed (SystemError: <built-in function cpu_freq> returned "
        "a result with an exception set); no C compiler here to measure the clock: sudo apt "
        "install gcc (Debian, Ubuntu) or sudo dnf install gcc (Fedora)",
    }
    play_os(monkeypatch, "Linux", "x86_64", lambda: None)  # a VM whose OS reports no clock
    assert peakflops.cpu_clock(4)["source"] == (
        "the clock program did not run here, and the OS reports no clock; no C compiler here to "
        "measure the clock: sudo apt install gcc (Debian, Ubuntu) or sudo dnf install gcc (Fedora)"
    )


# ---- the compiled kernels on every target ------------------------------------------------

CROSS = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64")


@pytest.mark.skipif(CROSS is None, reason="no aarch64 cross compiler (gcc-aarch64-linux-gnu)")
@pytest.mark.parametrize(
    ("program", "defines", "args"),
    [
        (peakflops.CLOCK_PROGRAM, {}, []),
        (peakflops.FMA_PROGRAM, {"VECTOR_BYTES": 16, "ACC": 12}, ["200000"]),
        (
            peakflops.FMA_PROGRAM,
            {"VECTOR_BYTES": 16, "ACC": 12, "CHAIN": peakflops.CHAIN},
            ["200000"],
        ),
        (
            cache_ceilings.READ_PROGRAM,
            {"VECTOR_BYTES": 16, "ACC": 12},
            [str(64 << 10), "0.01", "2"],
        ),
    ],
    ids=["clock", "fma", "clock under fma", "read"],
)
def test_the_clock_fma_and_cache_programs_compile_and_run_for_arm64(
    tmp_path, program, defines, args
):
    """As on an arm64 laptop or pod: each program built for aarch64 with the flags the lab
    uses there (no -march: the cross compiler's own target), then run under qemu-user where it
    is installed, printing its figures as on x86."""
    source = tmp_path / "program.c"
    source.write_text(program, encoding="utf-8")
    binary = tmp_path / "program"
    macros = [f"-D{key}={value}" for key, value in defines.items()]
    built = subprocess.run(
        [CROSS, *programs.FLAGS, "-static", *macros, "-o", binary, source],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    if QEMU is None:
        pytest.skip("built for aarch64; no qemu-aarch64 here to run it")
    ran = subprocess.run([QEMU, binary, *args], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.strip().splitlines()
    assert lines and all(float(line.split()[0]) > 0 for line in lines), ran.stdout


def test_an_os_clock_no_cpu_runs_at_is_not_a_peak_clock_and_says_how_to_measure_one(
    monkeypatch, no_clock_program
):
    from collections import namedtuple

    m4 = namedtuple("scpufreq", "current min max")(4.0, 4.0, 4.0)  # an M4's 4 MHz, on Linux
    play_os(monkeypatch, "Linux", "aarch64", lambda: m4)
    assert peakflops.cpu_clock(2) == {
        "ghz": None,
        "source": "the OS's maximum clock (psutil): 0.004 GHz is not a clock any CPU runs at "
        "(0.2 to 7); no C compiler here to measure the clock: sudo apt install gcc (Debian, "
        "Ubuntu) or sudo dnf install gcc (Fedora)",
    }


@posix_only
def test_a_compiler_that_never_returns_leaves_the_os_clock_and_says_why(tmp_path, monkeypatch):
    # The measured clock is None and its program's failure is said: never formatted as a clock.
    played_cc(tmp_path, monkeypatch, "", "sleep 30")
    monkeypatch.setattr(programs, "COMPILE_TIMEOUT_S", 1.0)
    play_os(monkeypatch, "Linux", "x86_64", lambda: None)
    assert peakflops.cpu_clock(2, 0.01) == {
        "ghz": None,
        "source": "the clock program was not measured: cc did not finish compiling in 1 s",
    }
