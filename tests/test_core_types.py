"""A hybrid Intel laptop (P- and E-cores), played by its sysfs tree: the probe reads which CPUs
are which kind and each kind's clock, and the computed peak sums each kind's cores x clock x
FLOP per cycle. The laptop played is an i5-1340P (Raptor Lake, CPUID family 6 model 0xBA): 4
P-cores with two threads each, CPUs 0-7, up to 4.6 GHz; 8 E-cores, CPUs 8-15, up to 3.4 GHz
(cpufp measured one P-core at 146.8 GFLOP/s and one E-core at 54: 32 and 16 FLOP per cycle)."""

import pytest

from roofline.configuration.measuring_config import to_plain
from roofline.core.errors import HardwareError
from roofline.core.measurement import empty
from roofline.device import hardware
from roofline.device.core_types import apple_levels, core_types, cpu_list
from roofline.device.description import check_description
from roofline.interpretation.datasheets import judged
from roofline.interpretation.interpret import interpret, peaks
from tests.conftest import device

RAPTOR_LAKE_P = 0xBA
P_CPUS, E_CPUS = range(8), range(8, 16)


def played_sysfs(root, p_ghz=4.6, e_ghz=3.4, cpufreq=True):
    """The files Linux writes for this laptop: the two PMUs' CPU lists, each CPU's topology
    (P-cores' threads in pairs), and cpufreq's maximum clock in kHz."""
    for pmu, cpus in (("cpu_core", "0-7"), ("cpu_atom", "8-15")):
        (root / "devices" / pmu).mkdir(parents=True)
        (root / "devices" / pmu / "cpus").write_text(cpus + "\n")
    for cpu in range(16):
        folder = root / f"devices/system/cpu/cpu{cpu}"
        (folder / "topology").mkdir(parents=True)
        (folder / "topology/physical_package_id").write_text("0\n")
        (folder / "topology/core_id").write_text(f"{cpu // 2 * 4 if cpu < 8 else cpu + 8}\n")
        if cpufreq:
            (folder / "cpufreq").mkdir()
            khz = int((p_ghz if cpu < 8 else e_ghz) * 1e6)
            (folder / "cpufreq/cpuinfo_max_freq").write_text(f"{khz}\n")
    return root


LAPTOP = judged(
    "cpu",
    to_plain(device(kind="cpu", sku="laptop", dtypes=["float32"], shapes=[[64, 64, 64]])),
    None,
)


def facts(kinds) -> dict:
    """The laptop's facts as cpu_facts reads them, its core kinds given."""
    return {
        "system": "Linux",
        "machine": "x86_64",
        "brand": "13th Gen Intel(R) Core(TM) i5-1340P",
        "vendor": "GenuineIntel",
        "family": 6,
        "model_number": RAPTOR_LAKE_P,
        "flags": ["avx2", "fma", "avx_vnni"],
        "caches": [{"level": "L3", "size_bytes": 12 << 20, "shared_by": 16}],
        "caches_from": "sysfs",
        "usable_cores": 16,
        "physical_cores": 12,
        "core_types": kinds,
        "memory_bytes": 16 << 30,
    }


def measured(kinds) -> dict:
    found = hardware.cpu_info(facts(kinds))
    return {"status": "measured", "found": found, "clock": {"ghz": 3.1, "source": "measured"}}


def test_a_sysfs_cpu_list_is_read_as_the_kernel_writes_it():
    assert cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert cpu_list("5") == {5} and cpu_list("\n") == set()


def test_the_probe_reads_each_kind_of_core_its_cores_and_its_clock(tmp_path):
    kinds = core_types(set(range(16)), 6, RAPTOR_LAKE_P, played_sysfs(tmp_path))
    assert kinds == [
        {
            "name": "P-cores",
            "cores": 4,
            "logical_cores": 8,
            "efficiency": False,
            "microarchitecture": None,
            "max_clock_ghz": 4.6,
        },
        {
            "name": "E-cores",
            "cores": 8,
            "logical_cores": 8,
            "efficiency": True,
            "microarchitecture": "gracemont",
            "max_clock_ghz": 3.4,
        },
    ]
    # A run fenced to the P-cores has one kind: the CPU's own figures hold.
    assert core_types(set(P_CPUS), 6, RAPTOR_LAKE_P, tmp_path) is None
    # A CPU of one kind has no such PMUs.
    assert core_types(set(range(16)), 6, RAPTOR_LAKE_P, tmp_path / "elsewhere") is None


def test_a_hybrid_laptops_peak_sums_its_p_and_e_cores(tmp_path):
    kinds = core_types(set(range(16)), 6, RAPTOR_LAKE_P, played_sysfs(tmp_path))
    record = measured(kinds)
    check_description({"cpu": record["found"], "gpus": []}, "played")  # as the probe keeps it
    peak, source = peaks(LAPTOP, record)["float32"]
    # 4 x 4.6 GHz x 32 + 8 x 3.4 GHz x 16 = 588.8 + 435.2 GFLOP/s: never 12 cores at one figure.
    assert peak == pytest.approx(1.024)
    assert source.startswith("4 P-cores x 4.60 GHz x 32 FLOP/cycle (AVX2 FMA, 2 units assumed)")
    assert "+ 8 E-cores x 3.40 GHz x 16 FLOP/cycle (AVX2 FMA at half rate: gracemont's" in source
    assert source.endswith("clocks: each kind's maximum, sysfs cpuinfo_max_freq")
    # A clock set in conf is each kind's.
    set_clock = judged("cpu", to_plain(device(kind="cpu", clock_ghz=2.0)), None)
    assert peaks(set_clock, record)["float32"][0] == pytest.approx((4 * 32 + 8 * 16) * 2.0 / 1e3)


def test_an_e_core_or_a_clock_not_known_gives_no_peak_and_says_how_to_add_it(tmp_path):
    unknown = core_types(set(range(16)), 6, 0xC6, played_sysfs(tmp_path))  # not in the table
    assert unknown[1]["microarchitecture"] is None
    assert "float32" not in peaks(LAPTOP, measured(unknown))
    (row,) = interpret(
        [empty("cpu", "float32", [64] * 3, "skipped", "x")], LAPTOP, measured(unknown)
    )
    assert row.peak_source.startswith(
        "no computed peak: its E-cores' FLOP per cycle is not known for this chip: add its CPUID "
        "model to roofline/device/core_types.py's E_CORES"
    )
    no_clock = core_types(
        set(range(16)), 6, RAPTOR_LAKE_P, played_sysfs(tmp_path / "vm", cpufreq=False)
    )
    assert no_clock[0]["max_clock_ghz"] is None
    (row,) = interpret(
        [empty("cpu", "float32", [64] * 3, "skipped", "x")], LAPTOP, measured(no_clock)
    )
    assert "no clock known for its P-cores (sysfs has no cpuinfo_max_freq" in row.peak_source


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"cores": 0}, "cpu.core_types[0].cores=0; allowed: a positive integer"),
        ({"max_clock_ghz": "fast"}, "max_clock_ghz='fast'; allowed: a positive number or null"),
        ({"logical_cores": 4}, "cpu.core_types have 12 logical cores in all; allowed: the CPU's"),
        ({"efficiency": "no"}, "cpu.core_types[0].efficiency='no'; allowed: true or false"),
        ({"microarchitecture": 7}, "microarchitecture=7; allowed: a name or null"),
    ],
)
def test_a_described_core_kind_that_cannot_be_is_refused_by_name(tmp_path, change, said):
    kinds = core_types(set(range(16)), 6, RAPTOR_LAKE_P, played_sysfs(tmp_path))
    found = measured([kinds[0] | change, kinds[1]])["found"]
    with pytest.raises(HardwareError, match="played: ") as refused:
        check_description({"cpu": found, "gpus": []}, "played")
    assert said in str(refused.value)


# An M1 Max as macOS's sysctl answers (Apple's "Determining system capabilities" names): two
# performance levels; 8 P-cores in two clusters of 4 (cpusperl2), 2 E-cores in one.
M1_MAX_SYSCTL = {
    "hw.nperflevels": "2",
    "hw.perflevel0.name": "Performance",
    "hw.perflevel0.physicalcpu": "8",
    "hw.perflevel0.logicalcpu": "8",
    "hw.perflevel0.cpusperl2": "4",
    "hw.perflevel1.name": "Efficiency",
    "hw.perflevel1.physicalcpu": "2",
    "hw.perflevel1.logicalcpu": "2",
    "hw.perflevel1.cpusperl2": "2",
}


def test_a_macs_kinds_of_core_and_clusters_are_read_from_its_performance_levels():
    kinds = apple_levels(M1_MAX_SYSCTL.get)
    assert [(k["name"], k["cores"], k["clusters"], k["efficiency"]) for k in kinds] == [
        ("Performance cores", 8, 2, False),
        ("Efficiency cores", 2, 1, True),
    ]
    assert all(k["max_clock_ghz"] is None for k in kinds)  # macOS gives no clock
    # A Mac whose sysctl lacks a level's name, or answers nonsense: no kinds, never a guess.
    assert apple_levels({**M1_MAX_SYSCTL, "hw.perflevel1.name": None}.get) is None
    assert apple_levels({**M1_MAX_SYSCTL, "hw.nperflevels": "two"}.get) is None
    assert apple_levels({}.get) is None


def test_a_macs_accelerate_rows_are_never_held_to_its_cores_peak():
    from roofline.core.measurement import measurement

    found = hardware.cpu_info(
        facts(None)
        | {
            "system": "Darwin",
            "machine": "arm64",
            "brand": "Apple M1 Max",
            "vendor": None,
            "family": None,
            "model_number": None,
            "flags": [],
            "usable_cores": 10,
            "physical_cores": 10,
            "core_types": apple_levels(M1_MAX_SYSCTL.get),
        }
    )
    record = {
        "status": "measured",
        "found": found,
        "clock": {"ghz": None, "source": "none"},
        "libraries": {"torch": {"float32": "Accelerate"}, "numpy": {"library": "accelerate"}},
    }
    points = [
        measurement("cpu", "float32", [512] * 3, [0.001], 1e-6, backend=backend)
        for backend in ("torch", "numpy")
    ]
    for row in interpret(points, LAPTOP, record):
        assert row.peak_tflops is None and row.mfu is None and not row.flag
        assert row.peak_source.startswith(
            "no computed peak: Accelerate runs float32 on Apple M1 Max's matrix units (AMX, or "
            "SME from M4), one per CPU cluster (2 of Performance cores, 1 of Efficiency cores)"
        )
    # A peak set in conf for it stands.
    set_peak = judged("cpu", to_plain(device(kind="cpu", peak_tflops={"float32": 3.0})), None)
    (row, _) = interpret(points, set_peak, record)
    assert row.peak_tflops == 3.0 and row.peak_source == "set in conf"


@pytest.mark.parametrize("system", ["Darwin", "Windows"])
def test_a_mac_reads_its_levels_from_sysctl_and_a_windows_pc_reads_no_kinds(monkeypatch, system):
    """Where Linux's /sys/devices is not: a Mac asks sysctl (played), a Windows PC says none; and
    neither reads sysfs (neither core_types nor physical_cores_of is asked), even where a
    Windows PC's affinity leaves it fewer CPUs than the machine has."""
    import platform

    import cpuinfo

    from roofline.device import core_types as kinds_module

    def no_sysfs(*args):
        raise AssertionError(f"sysfs read on {system}")

    import joblib
    import psutil

    played = {"brand_raw": "a played CPU", "flags": [], "l3_cache_size": 8 << 20}
    monkeypatch.setattr(cpuinfo, "get_cpu_info", lambda: played)
    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(kinds_module, "core_types", no_sysfs)
    monkeypatch.setattr(hardware, "physical_cores_of", no_sysfs)
    monkeypatch.setattr(kinds_module, "apple_levels", lambda: apple_levels(M1_MAX_SYSCTL.get))
    # 8 CPUs on 4 cores. A Windows PC started with an affinity of 2 (psutil's cpu_affinity);
    # macOS has no affinity to give (None).
    cpus = {0, 1} if system == "Windows" else None
    monkeypatch.setattr(hardware, "usable_cpus", lambda: cpus)
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 8 if logical else 4)
    monkeypatch.setattr(joblib, "cpu_count", lambda: len(cpus or range(8)))
    found = hardware.cpu_facts()
    if system == "Darwin":
        assert [k["clusters"] for k in found["core_types"]] == [2, 1]
        assert found["physical_cores"] == 4
    else:
        assert found["core_types"] is None
        assert found["physical_cores"] == 2  # no more than the CPUs it may use
