"""A CPU's cache ceilings (issue 25): the working set of each level chosen from the cache sizes
as the cache-aware roofline does, the read kernel on this machine, the ceilings carried through
the manifest, drawn as slopes and said in the appendix. No speed is asserted."""

import json
import math

import pytest

from roofline.device import cache_ceilings, programs
from roofline.device.cache_ceilings import CacheSize, Planned, working_sets
from roofline.device.hardware import cpu_info
from roofline.interpretation.aggregate import aggregate
from roofline.interpretation.ceilings import past_the_cache
from roofline.interpretation.lab_config import load_lab_params
from roofline.interpretation.manifest import CacheCeiling, as_manifest, to_json
from roofline.interpretation.tables import load_table
from roofline.machines.records import knobs_record, sweep_record
from roofline.rendering.appendix import appendix
from roofline.rendering.gap_paragraph import gap_paragraph
from roofline.rendering.plot import draw, draw_sweeps
from tests import golden
from tests.manifests import entry

needs_cc = pytest.mark.skipif(programs.compiler() is None, reason="no C compiler here")

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
# A 2-core VM of a Xeon, as its sysfs reads: L1d and L2 a core's, one L3 for both.
XEON = [CacheSize("L1", 48 * KIB, 1), CacheSize("L2", 2 * MIB, 1), CacheSize("L3", 480 * MIB, 2)]


# --- the working set of each level -------------------------------------------------------------


def test_each_level_gets_half_of_what_one_copy_has_of_it_and_dram_four_times_the_largest():
    planned = working_sets(XEON, copies=2, memory_bytes=20 * GIB, block=768)
    assert [(p.level, p.working_set_bytes, p.reason) for p in planned] == [
        ("L1", 24 * KIB, ""),
        ("L2", 1 * MIB // 768 * 768, ""),  # a whole number of the kernel's steps
        ("L3", 120 * MIB, ""),  # 480 MiB over the 2 CPUs sharing it, halved
        ("DRAM", 4 * 240 * MIB, ""),
    ]
    assert planned[2].size == XEON[2] and planned[3].size is None


def test_a_cache_shared_by_smt_siblings_is_halved_again():
    sizes = [CacheSize("L1", 48 * KIB, 2), CacheSize("L2", 2 * MIB, 2)]
    planned = working_sets(sizes, copies=4, memory_bytes=64 * GIB)
    assert [p.working_set_bytes for p in planned] == [12 * KIB, 512 * KIB, 64 * MIB]


def test_a_level_whose_half_fits_the_level_below_is_measured_between_them():
    # Skylake-SP: 1 MiB of L2 a core, 1.375 MiB of L3 a core (28 share 38.5 MiB).
    sizes = [CacheSize("L2", 1 * MIB, 1), CacheSize("L3", 28 * 1408 * KIB, 28)]
    l2, l3, _ = working_sets(sizes, copies=28, memory_bytes=64 * GIB)
    assert l2.working_set_bytes == 512 * KIB
    assert l3.working_set_bytes == (1 * MIB + 1408 * KIB) // 2  # above L2's 1 MiB, below 1.375


def test_a_level_giving_a_copy_no_more_than_the_one_below_is_said_unmeasured():
    sizes = [CacheSize("L2", 2 * MIB, 1), CacheSize("L3", 16 * MIB, 16)]
    _, l3, dram = working_sets(sizes, copies=16, memory_bytes=64 * GIB)
    assert l3.working_set_bytes is None and l3.reason.startswith("not measured: each copy's")
    assert dram.working_set_bytes == 64 * MIB  # four times L2's 2 MiB is below the floor


def test_dram_is_capped_by_the_free_memory_or_said_unmeasured_where_nothing_fits():
    roomy = working_sets(XEON, copies=2, memory_bytes=4 * GIB)[-1]
    assert roomy.working_set_bytes == 4 * GIB // 4 // 2  # a quarter of the memory free, halved
    cramped = working_sets(XEON, copies=2, memory_bytes=1 * GIB)[-1]
    assert cramped.working_set_bytes is None
    assert cramped.reason == (
        "not measured: 2 buffers larger than the caches would not fit in 25% of the memory free"
    )


def test_with_no_cache_size_known_each_level_says_so_and_dram_takes_the_floor():
    planned = working_sets([], copies=8, memory_bytes=64 * GIB)
    assert planned[:3] == [
        Planned(level, None, "not measured: the cache sizes are unknown here", None)
        for level in ("L1", "L2", "L3")
    ]
    assert planned[3] == Planned("DRAM", 64 * MIB, "", None)


def test_sysfs_gives_each_data_or_unified_level_and_the_cpus_measured_that_share_it(tmp_path):
    caches = {
        "index0": ("Data", "1", "48K", "0,4"),
        "index1": ("Instruction", "1", "32K", "0,4"),
        "index2": ("Unified", "2", "2048K", "0,4"),
        "index3": ("Unified", "3", "36864K", "0-7"),
    }
    for index, values in caches.items():
        folder = tmp_path / "cpu2" / "cache" / index  # the first CPU measured: cpu2
        folder.mkdir(parents=True)
        for name, value in zip(("type", "level", "size", "shared_cpu_list"), values, strict=True):
            (folder / name).write_text(value + "\n", encoding="utf-8")
    found = cache_ceilings.sysfs_cache_sizes({2, 3, 4}, tmp_path)  # a taskset of 3 CPUs
    assert found == [
        CacheSize("L1", 48 * KIB, 1),  # cpu0 and cpu4 share it; only cpu4 is measured
        CacheSize("L2", 2 * MIB, 1),
        CacheSize("L3", 36 * MIB, 3),
    ]
    assert cache_ceilings.sysfs_cache_sizes({0}, tmp_path / "nowhere") == []


def test_py_cpuinfo_sizes_are_a_core_s_on_macos_and_totals_on_linux():
    info = {"l1_data_cache_size": 65536, "l2_cache_size": "4 MiB", "l3_cache_size": None}
    assert cache_ceilings.cpuinfo_cache_sizes(info, 8, "Darwin") == [
        CacheSize("L1", 64 * KIB, 1),
        CacheSize("L2", 4 * MIB, 1),
    ]
    assert cache_ceilings.cpuinfo_cache_sizes(info, 8, "Linux")[1] == CacheSize("L2", 4 * MIB, 8)


@pytest.mark.parametrize(
    ("text", "value"),
    [("48K", 48 * KIB), ("2048K", 2 * MIB), ("1 MiB", MIB), ("256 KB", 256 * KIB), (512, 512)],
)
def test_cache_sizes_are_read_as_sysfs_and_py_cpuinfo_write_them(text, value):
    assert cache_ceilings.size_bytes(text) == value


@pytest.mark.parametrize(
    ("nbytes", "said"),
    [(48 * KIB, "48 KiB"), (MIB - 256, "1024 KiB"), (MIB, "1 MiB"), (1536 * MIB, "1.5 GiB")],
)
def test_a_working_set_is_said_in_the_binary_unit_that_reads_best(nbytes, said):
    assert cache_ceilings.binary_size(nbytes) == said


@pytest.mark.parametrize("text", ["", "lots", None, 0, True])
def test_a_size_that_says_nothing_is_none(text):
    assert cache_ceilings.size_bytes(text) is None


# --- the kernel --------------------------------------------------------------------------------


@needs_cc
def test_the_read_kernel_measures_each_level_on_every_core_or_says_why_not(monkeypatch):
    monkeypatch.setattr(cache_ceilings, "DRAM_LEAST", 4 * MIB)  # tiny: a test, not a measurement
    info = cpu_info()
    cores = info["logical_cores"]
    sizes = [CacheSize("L1", 32 * KIB, 1), CacheSize("L2", 256 * KIB, 1)]
    caches = cache_ceilings.measure_cache_bandwidth(
        cores, info["isa"], sizes, "given", seconds=0.01, memory_bytes=16 * GIB
    )
    assert [c["level"] for c in caches] == ["L1", "L2", "DRAM"]
    l1, l2, dram = (c["working_set_bytes"] for c in caches)
    assert 0 < l1 <= 16 * KIB < l2 <= 128 * KIB < 256 * KIB < dram <= 4 * MIB
    for c in caches:
        assert c["working_set_bytes"] > 0 and c["vector"]
        if c["gbps"] is None:  # this machine was busy in every window: said, and kept apart
            assert c["reason"].startswith("not used: every one of its 5 windows shared the CPUs")
            assert c["shared_gbps"] > 0
            continue
        assert isinstance(c["gbps"], float) and math.isfinite(c["gbps"]) and c["gbps"] > 0
        assert len(c["per_core_gbps"]) == len(c["cpu_shares"]) == cores
        assert c["gbps"] == pytest.approx(sum(c["per_core_gbps"]))
        assert all(share >= programs.OWN_CPU for share in c["cpu_shares"])
    assert caches[0]["cache_bytes"] == 32 * KIB and caches[0]["sizes_from"] == "given"


def test_a_level_read_no_faster_than_dram_is_not_drawn_and_says_why():
    # This project's VM: sysfs says 480 MiB of L3 shared by its 2 CPUs; its 120 MiB working
    # set reads at 36 GB/s beside DRAM's 30: past the cache, not an L3 ceiling.
    levels = [
        {"level": "L2", "gbps": 294.0, "cache_bytes": 2 * MIB, "sizes_from": "sysfs"},
        {"level": "L3", "gbps": 36.0, "cache_bytes": 480 * MIB, "sizes_from": "sysfs"},
        {"level": "DRAM", "gbps": 30.0},
    ]
    l2, l3, dram = past_the_cache(levels)
    assert l2 == levels[0] and dram == levels[2]
    assert l3["gbps"] is None and l3["reason"] == (
        "not used: 36 GB/s, no faster than DRAM's 30 GB/s, so its working set went past the "
        "cache: the 480 MiB read from sysfs may not be what this CPU has (a VM's)"
    )
    # A level 26% over DRAM is told apart and kept; without DRAM's figure nothing is judged.
    kept = [{"level": "L3", "gbps": 37.8}, {"level": "DRAM", "gbps": 30.0}]
    assert past_the_cache(kept) == kept
    unjudged = [levels[1], {"level": "DRAM", "gbps": None}]
    assert past_the_cache(unjudged) == unjudged


def test_without_a_compiler_each_level_says_why_it_was_not_measured(monkeypatch):
    monkeypatch.setattr(programs, "compiler", lambda: None)
    sizes = [CacheSize("L1", 32 * KIB, 1)]
    caches = cache_ceilings.measure_cache_bandwidth(
        2, ["avx2"], sizes, "given", memory_bytes=16 * GIB
    )
    why = "not measured: no C compiler (cc, gcc or clang) here"
    assert caches == [
        {
            "level": "L1",
            "working_set_bytes": 16 * KIB // 320 * 320,  # AVX2: 10 accumulators of 32 bytes
            "gbps": None,
            "vector": "AVX2 (256-bit)",
            "cache_bytes": 32 * KIB,
            "shared_by": 1,
            "sizes_from": "given",
            "reason": why,
        },
        {
            "level": "DRAM",
            "working_set_bytes": 64 * MIB // 320 * 320,
            "gbps": None,
            "vector": "AVX2 (256-bit)",
            "reason": why,
        },
    ]


def test_a_cpu_benchmark_records_its_cache_ceilings_and_logs_them(monkeypatch):
    from roofline.configuration.measuring_config import bench_settings
    from roofline.measuring import benchmark
    from tests.conftest import FINGERPRINT, LAPTOP, config, device, measuring

    asked = []

    def played(cores, isa, sizes, sizes_from, seconds, clock_ghz):
        asked.append((cores, isa, sizes, sizes_from))
        return CACHES

    monkeypatch.setattr(benchmark, "measure_cache_bandwidth", played)
    monkeypatch.setattr(
        benchmark, "measure_fma", lambda cores, isa, seconds, clock: {"gflops": 1.0, "vector": ""}
    )
    monkeypatch.setattr(
        benchmark, "cpu_clock", lambda cores, seconds: {"ghz": None, "source": "played"}
    )
    bench = bench_settings(config({}, repeats=1, warmup=0, copy_mib=1, min_seconds=0.0))
    cpu = device(kind="cpu", sku="laptop", clock_ghz=3.0, dtypes=["float32"], shapes=[[8, 8, 8]])
    said: list[str] = []
    record = benchmark.measure_device(
        "cpu", measuring(cpu), bench, LAPTOP["cpu"], FINGERPRINT, log=said.append
    )
    # The levels the probe described, not this machine's read again.
    levels = [CacheSize(**level) for level in LAPTOP["cpu"]["caches"]]
    assert record["caches"] == CACHES and asked == [(2, LAPTOP["cpu"]["isa"], levels, "sysfs")]
    assert (
        "cpu read bandwidth, every core: L1 617 GB/s (24 KiB a core); L2 344 GB/s (1 MiB a "
        "core); L3 not measured: the cache sizes are unknown here; DRAM 31 GB/s (960 MiB a "
        "core)" in said
    )


# --- the manifest, the plot and the report ------------------------------------------------------

CACHES = [
    {"level": "L1", "working_set_bytes": 24 * KIB, "gbps": 617.3, "vector": "AVX-512 (512-bit)"},
    {"level": "L2", "working_set_bytes": MIB, "gbps": 343.8, "vector": "AVX-512 (512-bit)"},
    {
        "level": "L3",
        "working_set_bytes": None,
        "gbps": None,
        "vector": "AVX-512 (512-bit)",
        "reason": "not measured: the cache sizes are unknown here",
    },
    {"level": "DRAM", "working_set_bytes": 960 * MIB, "gbps": 31.4, "vector": "AVX-512 (512-bit)"},
]


def aggregated(tmp_path, caches=None):
    """(results table as the plot reads it, manifest.json's content) of the golden CPU record,
    with these cache ceilings recorded (none: a record from before them)."""
    cfg = load_lab_params(golden.PARAMS)
    cfg.devices = {"cpu": cfg.devices.cpu}
    record = json.loads((golden.HERE / "cpu.json").read_text(encoding="utf-8"))
    record.pop("caches", None)  # the golden record's own: these tests set theirs
    if caches is not None:
        record["caches"] = caches
    results = {"cpu": golden.parsed("cpu", record)}
    sweeps = {"cpu": sweep_record("cpu", "none", "measured")}
    knobs = {"cpu": knobs_record("cpu", "none", "measured")}
    table, _, manifest, _ = aggregate(cfg, results, sweeps, knobs)
    table.to_csv(tmp_path / "results.csv", index=False)
    return load_table(tmp_path / "results.csv"), json.loads(json.dumps(manifest))


def test_the_manifest_carries_the_cache_ceilings_and_writes_them_back(tmp_path):
    _, written = aggregated(tmp_path, CACHES)
    assert written["devices"]["cpu"]["caches"] == CACHES  # as recorded
    read = as_manifest(written)
    caches = read.devices["cpu"].measured.caches
    assert [c.level for c in caches] == ["L1", "L2", "L3", "DRAM"]
    assert caches[0] == CacheCeiling("L1", 24 * KIB, 617.3, recorded=CACHES[0])
    assert caches[2].gbps is None and caches[2].reason.startswith("not measured")
    assert json.loads(json.dumps(to_json(read))) == written


def test_a_record_from_before_the_cache_ceilings_still_aggregates(tmp_path):
    _, written = aggregated(tmp_path)
    assert "caches" not in written["devices"]["cpu"]
    assert as_manifest(written).devices["cpu"].measured.caches is None
    plain = entry(kind="cpu")
    assert plain.measured.caches is None and "caches" not in to_json(plain)
    assert entry(kind="cpu", caches=CACHES).measured.caches[3].gbps == 31.4


def slopes(ax):
    """The cache slopes drawn: {label: (linestyle, vertices)}."""
    return {
        line.get_label(): (line.get_linestyle(), line.get_xydata().tolist())
        for line in ax.lines
        if str(line.get_label()).startswith("cpu ") and "GB/s" in str(line.get_label())
    }


def test_each_measured_level_is_a_dotted_slope_up_to_the_fma_ceiling(tmp_path):
    rows, written = aggregated(tmp_path, CACHES)
    fma = as_manifest(written).devices["cpu"].measured.fma.gflops / 1e3
    fig = draw(rows, written)
    drawn = slopes(fig.axes[0])
    assert list(drawn) == ["cpu L1 617 GB/s", "cpu L2 344 GB/s", "cpu DRAM 31 GB/s"]  # no L3
    for style, ((x0, _), (_, y1)) in drawn.values():
        assert style == ":" and x0 == pytest.approx(0.1)
        assert y1 == pytest.approx(fma)  # it stops where it meets the FMA ceiling
    (_, ((_, y0), (x1, _))) = drawn["cpu DRAM 31 GB/s"]
    assert y0 == pytest.approx(0.1 * 31.4 / 1e3) and x1 == pytest.approx(fma * 1e3 / 31.4)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert {"cpu L1 617 GB/s", "cpu L2 344 GB/s", "cpu DRAM 31 GB/s"} <= set(texts)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "a CPU's read bandwidth per cache" in legend
    panel = draw_sweeps(rows, written).axes[0]
    assert list(slopes(panel)) == list(drawn)
    assert all(style == ":" for style, _ in slopes(panel).values())
    fig.savefig(tmp_path / "roofline.png")


def test_without_cache_ceilings_no_slope_is_drawn(tmp_path):
    rows, written = aggregated(tmp_path)
    assert not slopes(draw(rows, written).axes[0])
    assert not slopes(draw_sweeps(rows, written).axes[0])


def test_the_appendix_lists_each_level_with_its_working_set(tmp_path):
    rows, written = aggregated(tmp_path, CACHES)
    manifest = as_manifest(written)
    said = gap_paragraph("cpu", manifest.devices["cpu"], rows[rows.device == "cpu"])
    assert (
        "Read bandwidth, every core at once, each over a working set of its own (its size per "
        "core): L1 617.3 GB/s (24 KiB); L2 343.8 GB/s (1 MiB); L3 not measured: the cache sizes "
        "are unknown here; DRAM 31.4 GB/s (960 MiB)." in said
    )
    assert "Read bandwidth, every core" in appendix(rows, written)
    rows, written = aggregated(tmp_path)
    assert "Read bandwidth" not in appendix(rows, written)


def test_the_compiled_kernels_windows_follow_the_bench_window():
    from roofline.device.timing import BenchSettings
    from roofline.measuring.benchmark import CACHE_WINDOW_S, FMA_WINDOW_S, compiled_window_s

    lab = BenchSettings()  # the lab's 2 s timed window: the kernels' own windows in full
    assert (compiled_window_s(lab, FMA_WINDOW_S), compiled_window_s(lab, CACHE_WINDOW_S)) == (
        0.3,
        0.1,
    )
    assert compiled_window_s(BenchSettings(min_seconds=0.2), FMA_WINDOW_S) == pytest.approx(0.03)
    assert compiled_window_s(BenchSettings(min_seconds=0.0), CACHE_WINDOW_S) == 0.01  # a floor
    assert compiled_window_s(BenchSettings(min_seconds=60.0), FMA_WINDOW_S) == 0.3  # a ceiling


def test_a_described_cache_larger_than_the_memory_is_not_asked_for():
    # A described 1 TiB L3 on a 16 GiB machine: half of it a copy would be 512 GiB.
    sizes = [CacheSize("L2", 1 << 20, 1), CacheSize("L3", 1 << 40, 1)]
    l2, l3, dram = working_sets(sizes, copies=1, memory_bytes=16 * GIB)
    assert l2.working_set_bytes == 512 << 10
    assert l3.working_set_bytes is None
    assert l3.reason == (
        "not measured: each copy's working set, 549,755,813,888 bytes, would not fit in 25% "
        "of the memory free"
    )
    assert dram.working_set_bytes is not None and dram.working_set_bytes <= 4 * GIB
