"""The records at the boundary between aggregate and the plot, report and check: manifest.json
read and checked once into typed entries, the gap breakdown's steps by identifier, a row's
timing mode; and no manifest field read by key past that boundary."""

import ast
import dataclasses
import json
import typing
from pathlib import Path

import pytest

from roofline.core.errors import SchemaError
from roofline.core.measurement import (
    SCHEMA_VERSION,
    KnobMeasurement,
    TimingMode,
    WindowTelemetry,
    measurement,
    measurement_from_dict,
)
from roofline.interpretation import gaps, manifest
from roofline.interpretation import steps as step_types
from roofline.interpretation.aggregate import aggregate
from roofline.interpretation.lab_config import load_lab_params
from roofline.interpretation.manifest import (
    DeviceEntry,
    Manifest,
    as_manifest,
    load_manifest,
    manifest_from_json,
    to_json,
)
from roofline.interpretation.rows import CSV_COLUMNS, row
from roofline.interpretation.steps import STEP_LABELS, Step, StepId, with_factors
from roofline.machines import records
from roofline.machines.records import knobs_record, pending_record, sweep_record
from roofline.rendering import causes, gap_paragraph, report
from tests import golden
from tests.fakes.cuda.played_cuda import SM90_KERNELS
from tests.manifests import entry

ROOT = Path(__file__).resolve().parents[1]
N = 8192


def sweep_of(name: str) -> dict:
    """A measured sweep of a played GPU: a larger shape, a little faster than its lab kernel."""
    rate = golden.GPUS[name][-1]["float16"] * 1.05
    m, n, k = 12288, 12288, 6144
    seconds = 2 * m * n * k / (rate * 1e12)
    point = measurement(name, "float16", [m, n, k], [seconds] * 3, 1e-3, timing="cuda events")
    point.series = "best-shape"
    run = {"started_at": "T2", "wall_s": 300.0, "git_revision": "s" * 40, "threads": None}
    return sweep_record(name, "full", "measured", run=run | {"versions": {}}, rows=[point])


def knobs_of(name: str) -> dict:
    knob = KnobMeasurement(
        name, "float32 -> bfloat16", "float32", "bfloat16", "float32", 2048, 2048, 2048,
        "measured", lab_turns=False, baseline_samples_s=[1.0], variant_samples_s=[0.5],
    )  # fmt: skip
    run = {"started_at": "T3", "wall_s": 9.0, "git_revision": None, "threads": 2, "versions": {}}
    return knobs_record(name, "lab", "measured", run=run, rows=[knob], tunableop_results=None)


@pytest.fixture(scope="module")
def written() -> dict:
    """manifest.json's content as aggregate writes it for the golden records, with a sweep, knobs
    and a stage measured by older code: every kind of field it has."""
    cfg = load_lab_params(ROOT / "params.yaml")
    cfg.devices = {n: cfg.devices[n] for n in ("cpu", "h100", "mps")}
    cpu = json.loads((golden.HERE / "cpu.json").read_text(encoding="utf-8"))
    raw = {
        "cpu": cpu,
        "h100": golden.gpu_record("h100"),
        "mps": pending_record("mps", cfg.devices.mps),
    }
    results = {name: golden.parsed(name, record) for name, record in raw.items()}
    sweeps = {name: sweep_record(name, "none", "measured") for name in results}
    knobs = {name: knobs_record(name, "none", "measured") for name in results}
    sweeps["h100"], knobs["cpu"] = sweep_of("h100"), knobs_of("cpu")
    older = {"h100": {"benchmark": ["code"], "sweep": ["params"]}}
    return json.loads(json.dumps(aggregate(cfg, results, sweeps, knobs, older).manifest))


def test_the_manifest_holds_every_field_aggregate_writes_and_writes_them_back(written):
    read = manifest_from_json(written, "manifest.json")
    assert isinstance(read, Manifest) and list(read.devices) == ["cpu", "h100", "mps"]
    assert json.loads(json.dumps(to_json(read))) == written  # nothing dropped, nothing added
    cpu, h100, mps = read.devices.values()
    assert cpu.measured.fma.gflops > 0 and cpu.measured.details.cache_bytes > 0
    assert cpu.measured.counters.readable is False and "ENOENT" in cpu.measured.counters.reason
    assert cpu.knobs.name == "lab" and h100.knobs is None
    assert h100.measured.sweep.name == "full" and h100.measured.memory_copy.gbps == 2910.0
    assert h100.measured.measured_by_older["sweep"].git_revision == "s" * 40
    assert h100.measured.details.cublaslt == 130401 and h100.measured.versions.torch
    assert h100.datasheet.published[0].shape == [N, N, N]
    assert mps.status == "pending" and mps.measured is None and not mps.show_pending
    # A block the measuring stages record in a shape of their own is kept whole.
    assert h100.measured.details.recorded == written["devices"]["h100"]["details"]


def test_the_statuses_it_reads_are_the_records():
    assert manifest.STATUSES == records.KNOWN


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda m: m["devices"]["h100"].pop("lab"), "device h100, field lab: missing"),
        (
            lambda m: m["devices"]["h100"]["datasheet"]["published"][0].update(tflops="fast"),
            "device h100, field datasheet.published[0].tflops: 'fast'; allowed: float",
        ),
        (
            lambda m: m["devices"]["h100"]["memory_copy"].update(gbps=None),
            "device h100, field memory_copy.gbps: None; allowed: float",
        ),
        (
            lambda m: m["devices"]["cpu"]["peaks_used"]["float32"].pop("source"),
            "device cpu, field peaks_used.float32.source: missing",
        ),
        (
            lambda m: m["devices"]["h100"]["details"].update(sm_count="132"),
            "device h100, field details.sm_count: '132'; allowed: int or null",
        ),
        (
            lambda m: m["devices"]["h100"]["measured_by_older"]["sweep"].update(older="params"),
            "device h100, field measured_by_older.sweep.older: 'params'; allowed: a list of str",
        ),
        (lambda m: m["devices"]["cpu"].update(kind="tpu"), "device cpu, field kind: 'tpu'"),
        (lambda m: m["devices"]["h100"].pop("wall_s"), "device h100, field wall_s: missing"),
        (lambda m: m["devices"]["mps"].update(colour="red"), "device mps, field colour: not one"),
        (lambda m: m.update(lab_devices="cpu"), "field lab_devices: 'cpu'; allowed: a list"),
    ],
)
def test_a_malformed_manifest_is_refused_once_naming_file_device_and_field(
    written, tmp_path, edit, said
):
    data = json.loads(json.dumps(written))
    edit(data)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SchemaError) as err:
        load_manifest(path)
    assert str(err.value).startswith(f"{path}"), str(err.value)
    assert said in str(err.value) and "`uv run dvc repro --force -s aggregate`" in str(err.value)


def test_a_recorded_block_keeps_fields_the_deliverables_do_not_read(written):
    data = json.loads(json.dumps(written))
    data["devices"]["h100"]["details"]["a_new_probe_figure"] = 1
    read = manifest_from_json(data, "manifest.json")
    assert read.devices["h100"].measured.details.recorded["a_new_probe_figure"] == 1


def test_the_report_renders_the_same_from_records_and_from_their_json(written):
    table = aggregate_table()
    typed = as_manifest(written)
    assert as_manifest(typed) is typed  # read once: records pass through
    assert report.render(table, typed) == report.render(table, written)


def aggregate_table():
    cfg = load_lab_params(ROOT / "params.yaml")
    cfg.devices = {"mps": cfg.devices.mps}
    results = {"mps": pending_record("mps", cfg.devices.mps)}
    results["mps"]["rows"] = [measurement_from_dict(r, "mps") for r in results["mps"]["rows"]]
    return aggregate(cfg, results, {"mps": None}).table


# --- no manifest field read by key past the boundary ---------------------------------------------


def field_names(cls: type, seen: set[type] | None = None) -> set[str]:
    """Every field name of a record type and of the record types inside it."""
    seen = seen if seen is not None else set()
    if not dataclasses.is_dataclass(cls) or cls in seen:
        return set()
    seen.add(cls)
    names = set()
    for f in dataclasses.fields(cls):
        names.add(f.name)
        for part in [f.type, *typing.get_args(f.type)]:
            for inner in [part, *typing.get_args(part)]:
                names |= field_names(inner, seen)
    return names - {"recorded"}


MANIFEST_FIELDS = field_names(Manifest)


@pytest.mark.parametrize(
    "module",
    [
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "roofline/rendering").glob("*.py")),
        "roofline/interpretation/gaps.py",
        "roofline/check.py",
    ],
)
def test_the_deliverables_read_no_manifest_field_by_key(module):
    """Past load_manifest a field is an attribute: `entry["sku"]` or `entry.get("fma")` would
    be a field read again, unchecked, by its name."""
    assert {"sku", "datasheet", "memory_copy", "fma", "gflops", "measured_by_older"} <= (
        MANIFEST_FIELDS
    )
    keyed = []
    for node in ast.walk(ast.parse((ROOT / module).read_text(encoding="utf-8"))):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            key = node.args[0].value
        if key in MANIFEST_FIELDS:
            keyed.append(f"line {node.lineno}: {key!r}")
    assert not keyed, keyed


def test_a_manifest_entry_is_no_mapping():
    with pytest.raises(TypeError):
        entry()["sku"]  # the records are read by attribute only
    assert isinstance(entry(), DeviceEntry) and entry().sku == "H100 SXM5 80GB"


# --- the breakdown's steps: an identifier apart from their label ---------------------------------


def chain(*steps: tuple) -> list:
    """Hand-made steps, each a rate, with the factors the breakdown gives them."""
    return with_factors([Step(*step) for step in steps])


def test_the_cause_follows_a_step_by_its_identifier_not_its_label(monkeypatch):
    steps = chain(
        (StepId.PEAK, 989.4, "datasheet"),
        (StepId.CLOCK, 900.0, "1650 MHz"),
        (StepId.CEILING, 600.0, "best shape"),
        (StepId.ACHIEVED, 590.0, "what remains"),
    )
    # Every step a loss can be is worded as one, and every step a remainder can be left by.
    every = set(StepId)
    assert set(causes.LOSS) == every - {StepId.PEAK}  # achieved: issue efficiency
    assert set(causes.LEFT) == every - {StepId.ACHIEVED}
    assert set(STEP_LABELS) == set(StepId)
    reworded = {step: label.upper() for step, label in STEP_LABELS.items()}
    monkeypatch.setattr(step_types, "STEP_LABELS", reworded)
    assert steps[1].label == "THE CLOCK UNDER LOAD"  # the page's words changed...
    monkeypatch.setattr(gaps, "device_breakdown", lambda *args: steps)
    head = type("Head", (), {"noisy": "", "peak_tflops": 989.4})()
    # ...the sentences did not. Shares of the gap: log(600/900) / log(590/989.4) = 78%, and
    # log(900/989.4) / the same = 18%; what remains, 3%, is no cause.
    assert causes.cause_sentences("h100", entry(), None, head, None) == (
        [
            "The shape (best shape) costs 78% of the gap.",
            "The SM clock under load (1650 MHz) costs 18% of the gap; the measured steps explain "
            "97% of the gap, 3% is left unexplained.",
        ],
        "",
    )


def test_a_gap_mostly_past_the_measured_steps_is_not_concrete_and_says_what_to_measure(
    monkeypatch,
):
    # The Definition of Done's "concrete" can fail: what remains holds most of the gap.
    steps = chain(
        (StepId.PEAK, 989.4, "datasheet"),
        (StepId.CLOCK, 950.0, "1900 MHz"),
        (StepId.CEILING, None, "not measured apart from this kernel"),
        (StepId.ACHIEVED, 600.0, "what remains"),
    )
    monkeypatch.setattr(gaps, "device_breakdown", lambda *args: steps)
    head = type("Head", (), {"noisy": "", "peak_tflops": 989.4})()
    said, unexplained = causes.cause_sentences("h100", entry(), None, head, None)
    assert unexplained == "92% of its gap unexplained"
    assert said == [
        "The SM clock under load (1900 MHz) costs 8% of the gap.",
        "92% of the gap is not explained by a measured step; measure next: measured compute "
        "ceiling.",  # its note names no command
    ]
    steps[:] = chain(
        (StepId.PEAK, 989.4, "datasheet"),
        (StepId.CLOCK, 950.0, "1900 MHz"),
        (StepId.CEILING, 960.0, "best shape"),
        (StepId.ACHIEVED, 600.0, "what remains"),
    )
    said, unexplained = causes.cause_sentences("h100", entry(), None, head, None)
    assert unexplained and said[-1].endswith(f"measure next: {gaps.BEYOND['cuda']}.")


def test_a_cpu_whose_counters_are_unreadable_says_so_where_its_kernel_is_the_loss(monkeypatch):
    # Every step measured, what remains the largest share: what would split it, and the run's
    # own refusal by name where it could not read the counters that would.
    steps = chain(
        (StepId.PEAK, 0.46, "computed"),
        (StepId.FMA, 0.41, "measured"),
        (StepId.THREADS, 0.40, "every thread against one"),
        (StepId.MICRO_KERNEL, 0.38, "in L2"),
        (StepId.PACKING, 0.36, "at the breakdown's shape"),
        (StepId.ACHIEVED, 0.20, "what remains"),
    )
    monkeypatch.setattr(gaps, "device_breakdown", lambda *args: steps)
    head = type("Head", (), {"noisy": "", "peak_tflops": 0.46})()
    refused = "perf_event_open refused: ENOENT, no PMU (perf_event_paranoid 2)"
    unread = f" (its own counters (its FP instructions per cycle) were not read: {refused})"
    for counters, said_unread in (
        ({"readable": False, "reason": refused}, True),
        ({"readable": True, "reason": "counted"}, False),
        (None, False),  # a record from before counters were asked
    ):
        said, unexplained = causes.cause_sentences(
            "cpu", entry(kind="cpu", counters=counters), None, head, None
        )
        assert unexplained == "71% of its gap unexplained", said
        assert said[-1] == (
            f"71% of the gap is not explained by a measured step; measure next: "
            f"{gaps.BEYOND['cpu']}{unread if said_unread else ''}."
        )
    # A step too noisy to tell explains nothing; it is named as such where it could hold a
    # loss worth naming (3% of the gap here: named only past a share of 1%).
    steps[2] = dataclasses.replace(steps[2], tflops=None, too_noisy=True, spread=0.3)
    said, _ = causes.cause_sentences("cpu", entry(kind="cpu"), None, head, None)
    assert said[-1].startswith("74% of the gap is not explained by a measured step; measure")
    monkeypatch.setattr(causes, "MIN_SHARE", 0.01)
    said, _ = causes.cause_sentences("cpu", entry(kind="cpu"), None, head, None)
    assert said[-1].startswith(
        "74% of the gap is not explained by a measured step (threading across the cores: too "
        "noisy to tell)"
    )


def test_a_machine_noisier_than_every_step_names_its_noise_as_the_cause(monkeypatch):
    steps = chain(
        (StepId.PEAK, 0.46, "computed"),
        (StepId.ACHIEVED, 0.40, "what remains"),
    )
    steps[1:1] = [
        Step(StepId.THREADS, None, "noisy", factor=0.95, spread=0.4, too_noisy=True),
        Step(StepId.PACKING, None, "noisy", factor=0.97, spread=0.2, too_noisy=True),
    ]
    monkeypatch.setattr(gaps, "device_breakdown", lambda *args: steps)
    head = type("Head", (), {"noisy": "", "peak_tflops": 0.46})()
    said, unexplained = causes.cause_sentences("cpu", entry(kind="cpu"), None, head, None)
    assert said == [
        "Its steps were too noisy to split the gap (spreads up to 40%): the machine's noise is "
        "the largest cause here; measure again on a quiet machine."
    ]
    assert unexplained == "all of its gap unexplained: its steps were too noisy"


# A real cuBLAS name (cited in tests/fakes/cuda/played_cuda.py): Hopper float16, 128x128 tiles.
SM90_F16 = SM90_KERNELS["float16"]


def test_quantisation_is_a_measured_cause_only_at_the_tile_of_the_kernel_that_ran(monkeypatch):
    note = "4096 tiles of 128x128 (the tile of the kernel that ran) on 132 SMs"
    steps = chain(
        (StepId.PEAK, 989.4, "datasheet"),
        (StepId.CLOCK, 950.0, "1900 MHz"),
        (StepId.CEILING, None, "not measured apart from this kernel"),
        (StepId.QUANTISATION, 700.0, note),
        (StepId.ACHIEVED, 690.0, "what remains"),
    )
    monkeypatch.setattr(gaps, "device_breakdown", lambda *args: steps)
    ran = type("Head", (), {"noisy": "", "peak_tflops": 989.4, "kernel": SM90_F16})()
    assert causes.cause_sentences("h100", entry(), None, ran, None) == (
        [
            f"Tile and wave quantisation ({note}) costs 85% of the gap.",
            "The SM clock under load (1900 MHz) costs 11% of the gap; the measured steps explain "
            "96% of the gap, 4% is left unexplained.",
        ],
        "",
    )
    for kernel in ("", float("nan")):  # none recorded (results.csv's empty cell): assumed
        head = type("Head", (), {"noisy": "", "peak_tflops": 989.4, "kernel": kernel})()
        assert causes.cause_sentences("h100", entry(), None, head, None)[1]
    # Every step measured and what remains the largest share: what to measure next is past
    # the tile, which is known.
    steps[:] = chain(
        (StepId.PEAK, 989.4, "datasheet"),
        (StepId.CLOCK, 950.0, "1900 MHz"),
        (StepId.CEILING, 940.0, "best shape"),
        (StepId.QUANTISATION, 920.0, note),
        (StepId.ACHIEVED, 600.0, "what remains"),
    )
    said, unexplained = causes.cause_sentences("h100", entry(), None, ran, None)
    assert unexplained and said[-1].endswith(f"measure next: {gaps.BEYOND_RAN}.")


def test_the_appendix_names_the_kernel_that_ran_and_what_its_name_says():
    def head(kernel):
        return type("Head", (), {"kernel": kernel})()

    assert gap_paragraph.kernel_sentence(head(SM90_F16)) == (
        f"The kernel that ran: {SM90_F16} (WGMMA, tile 128x128)."
    )
    cpu = "oneMKL 2024.0 Update 2 SGEMM (AVX-512 with AMX dispatch), 2 threads"
    assert gap_paragraph.kernel_sentence(head(cpu)) == f"The kernel that ran: {cpu}."
    assert (
        gap_paragraph.kernel_sentence(head(float("nan")))
        == gap_paragraph.kernel_sentence(head(""))
        == ""
    )


def test_the_timing_mode_is_set_where_measured_and_written_with_the_row():
    host = measurement("cpu", "float32", [64] * 3, [0.1], 0.0, timing="host clock")
    graph = measurement("h100", "float16", [64] * 3, [1e-5], 0.0, timing="CUDA graph of 4 calls")
    events = measurement("h100", "float16", [64] * 3, [1e-5], 0.0, timing="mps events, calls")
    modes = [p.timing_mode for p in (host, graph, events)]
    assert modes == [TimingMode.HOST, TimingMode.GRAPH, TimingMode.EVENTS]
    written = json.loads(json.dumps(dataclasses.asdict(host)))
    assert written["timing_mode"] == "host"
    assert measurement_from_dict(written, "results.json, row 1").timing_mode is TimingMode.HOST
    assert "timing_mode" not in CSV_COLUMNS  # results.csv keeps its columns: the text says it
    assert SCHEMA_VERSION >= 3


def test_a_row_from_before_clock_reasons_and_power_limits_loads_without_them():
    tele = WindowTelemetry(
        sm_clock_mhz=1755.0,
        sm_clock_max_mhz=1980.0,
        power_w=690.0,
        temperature_max_c=61,
        throttle_reasons="sw_power_cap",
    )
    older = dataclasses.asdict(measurement("h100", "float16", [64] * 3, [1e-5], 0.0, tele))
    for field in ("clock_reason", "clock_reason_share", "clock_reason_shares", "power_limit_w"):
        older.pop(field)
    point = measurement_from_dict(older, "results.json, row 1")
    assert (point.clock_reason, point.clock_reason_share, point.power_limit_w) == ("", None, None)
    assert point.throttle_reasons == "sw_power_cap" and point.series == "lab"
    assert SCHEMA_VERSION >= 4  # 4: the reason's share and the power limit; sustained rows
    with pytest.raises(SchemaError, match=r"field power_limit_w: -1.0; allowed: a finite num"):
        measurement_from_dict(older | {"power_limit_w": -1.0}, "results.json, row 1")


def test_a_record_from_before_the_mode_has_it_derived_from_its_text_once_at_load():
    older = dataclasses.asdict(measurement("cpu", "float32", [64] * 3, [0.1], 0.0))
    older.pop("timing_mode")
    older["timing"] = "host clock"
    assert measurement_from_dict(older, "results.json, row 1").timing_mode is TimingMode.HOST
    with pytest.raises(SchemaError, match=r"row 1, field timing_mode: 'wall'; allowed: host, "):
        measurement_from_dict(older | {"timing_mode": "wall"}, "results.json, row 1")


def test_only_a_host_clock_window_can_be_shared_whatever_its_text_says():
    busy = dict(window_s=10.0, cpu_share=0.48, cpu_idle=0.0, other_runnable=2, steal=0.0)
    point = measurement("cpu", "float32", [N] * 3, [1.0, 1.01, 1.02], 1e-7, timing="host clock")
    assert "a shared window" in row(dataclasses.replace(point, **busy)).noisy
    # The mode decides, not the words: reworded text with the host mode is still the host's.
    reworded = dataclasses.replace(point, timing="the host's own clock", **busy)
    assert reworded.timing_mode is TimingMode.HOST and "a shared window" in row(reworded).noisy
    events = dataclasses.replace(point, timing_mode=TimingMode.EVENTS, **busy)
    assert row(events).noisy == ""


def test_a_blas_verbose_switch_the_user_set_is_recorded_and_unset_while_timing(monkeypatch):
    from roofline.measuring import provenance

    monkeypatch.setattr(provenance, "UNSET_WHILE_TIMING", {})
    monkeypatch.setenv("MKL_VERBOSE", "1")
    monkeypatch.setenv("ONEDNN_VERBOSE", "2")
    assert provenance.quiet_blas() == {"MKL_VERBOSE": "1", "ONEDNN_VERBOSE": "2"}
    assert "MKL_VERBOSE" not in __import__("os").environ
    recorded = provenance.environment()
    assert recorded["MKL_VERBOSE"] == "1 (unset while timing)"
    assert recorded["ONEDNN_VERBOSE"] == "2 (unset while timing)"
