"""The rules that keep one machine from measuring or overwriting another machine's results."""

import pytest

from roofline.core.errors import RecordError
from roofline.core.files import write_json_atomic
from roofline.core.measurement import SCHEMA_VERSION
from roofline.core.paths import fingerprint_path, results_path
from roofline.machines import records
from roofline.machines.records import (
    NEVER,
    decide,
    fingerprint,
    never_measured,
    on_record,
    probe_decision,
)

LAPTOP = {"model": "Laptop CPU", "logical_cores": 8, "isa": ["avx2"]}
OTHER = {"model": "Other CPU", "logical_cores": 4, "isa": ["avx2"]}
H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "compute_capability": "9.0",
    "sm_count": 132,
    "memory_gib": 79,
}
KEYS = {stage: {"code": "c0", "params": "p0"} for stage in ("benchmark", "sweep", "knobs")}
PENDING = {"benchmark": "points", "sweep": NEVER, "knobs": NEVER}
NEVER_FP = never_measured("dev", PENDING)


def fp(hw, measures=KEYS):
    return fingerprint("dev", hw, "2.9.0", measures)


def measured(hw, measures=KEYS):
    return {"device": "dev", "status": "measured", "hardware": hw, "fingerprint": fp(hw, measures)}


def on(results, **others):
    return on_record("dev", {"benchmark": results} | others, PENDING)


def test_the_record_is_the_results_not_a_fingerprint_alone():
    assert on(None) == NEVER_FP
    assert on({"device": "dev", "status": "pending", "rows": []}) == NEVER_FP
    mine = measured(H100)
    assert on(mine, sweep=mine, knobs=mine) == fp(H100)


def test_each_stage_keeps_the_key_its_own_record_was_measured_by():
    newer = {stage: {"code": "c1", "params": "p0"} for stage in KEYS}
    sweep = measured(H100, newer)  # re-measured by newer code than the benchmark
    got = on(measured(H100), sweep=sweep, knobs=None)
    assert got["measures"] == {
        "benchmark": KEYS["benchmark"],
        "sweep": newer["sweep"],
        "knobs": "unrecorded",
    }
    # A record from before keys were recorded: each stage's key is "unrecorded", never today's.
    old = {
        "device": "dev",
        "status": "measured",
        "hardware": H100,
        "run": {"versions": {"torch": "2.8"}},
    }
    assert on(old)["measures"] == dict.fromkeys(KEYS, "unrecorded")
    assert on(old)["torch"] == "2.8"


def test_probe_records_the_device_when_it_is_here_and_nothing_is_recorded():
    assert probe_decision("dev", NEVER_FP, LAPTOP, fp(LAPTOP))[0] == fp(LAPTOP)


def test_probe_refreshes_the_same_hardware_and_keeps_other_hardware():
    newer = fingerprint("dev", LAPTOP, "2.10.0", KEYS)
    assert probe_decision("dev", fp(LAPTOP), LAPTOP, newer)[0] == newer
    kept, message = probe_decision("dev", fp(OTHER), LAPTOP, fp(LAPTOP))
    assert kept == fp(OTHER)
    assert "Other CPU" in message and "--replace" in message


def test_probe_writes_the_record_for_a_device_that_is_not_here():
    assert probe_decision("dev", fp(H100), None, None)[0] == fp(H100)
    assert probe_decision("dev", NEVER_FP, None, None) == (
        NEVER_FP,
        "dev: not on this machine, never measured: pending",
    )


def test_a_failed_run_leaves_no_claim_once_the_probe_runs_again():
    # A run probed an H100 here, then failed: the fingerprint file says H100, results.json is
    # still pending. Without the H100, the probe writes what is on record: never measured.
    record = on({"device": "dev", "status": "pending", "rows": []})
    assert probe_decision("dev", record, None, None)[0] == NEVER_FP


def test_replace_takes_over_only_from_a_machine_that_has_the_device():
    assert probe_decision("dev", fp(OTHER), LAPTOP, fp(LAPTOP), replace=True)[0] == fp(LAPTOP)
    # On the hardware already on record there is nothing to replace, and it says how to re-measure.
    same, said = probe_decision("dev", fp(LAPTOP), LAPTOP, fp(LAPTOP), replace=True)
    assert same == fp(LAPTOP) and said.startswith("dev: nothing to replace: its results were")
    assert "uv run dvc repro --force experiments/x4-roofline/devices/dev/dvc.yaml" in said
    with pytest.raises(RecordError, match="cannot replace"):
        probe_decision("dev", fp(OTHER), None, None, replace=True)


@pytest.fixture
def device_here(tmp_path, monkeypatch):
    """A workspace with device `dev`'s fingerprint file; `here(hw)` plays what this machine has."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(records, "live_hardware", lambda cache: {})

    def here(hw, recorded):
        monkeypatch.setattr(records, "locate", lambda dev, hardware: ({"x": 1}, hw))
        write_json_atomic(fingerprint_path("dev"), recorded)

    return here


def test_benchmark_measures_only_the_recorded_hardware_and_pends_the_unmeasured(device_here):
    for hw in (None, LAPTOP):
        device_here(hw, NEVER_FP)
        assert decide("dev", None, "benchmark", results_path("dev")).action == "pending"
    device_here(LAPTOP, fp(LAPTOP))
    assert decide("dev", None, "benchmark", results_path("dev")).action == "measure"


@pytest.mark.parametrize("here", [None, OTHER])
def test_a_device_measured_elsewhere_keeps_its_record_whatever_changed_here(device_here, here):
    # Its stage runs only when its lock and fingerprint disagree (a lock from before keys, a
    # lost lock): it keeps the record as it is, and DVC locks the record's own keys.
    device_here(here, fp(H100))
    write_json_atomic(results_path("dev"), measured(H100))
    decision = decide("dev", None, "benchmark", results_path("dev"))
    assert decision.action == "keep"
    assert "keeping its benchmark record, measured on NVIDIA H100 80GB HBM3" in decision.why


def test_a_record_missing_here_is_named_for_where_its_data_is(device_here, monkeypatch):
    device_here(None, fp(H100))
    monkeypatch.setattr(records, "locked_md5", lambda name, stage, path: "0" * 32)  # locked
    for where, said in [
        ("cache", "is in DVC's cache, not in this workspace: run `uv run dvc checkout"),
        ("remote", "is not in this workspace: run `uv run dvc pull` first"),
        ("nowhere", "it is lost"),
    ]:
        monkeypatch.setattr(records, "data_location", lambda md5, where=where: where)
        with pytest.raises(RecordError, match=said) as err:
            decide("dev", None, "benchmark", results_path("dev"))
        assert "stale" not in str(err.value)
    assert "`uv run python -m stages.probe dev --lost`" in str(err.value)


def test_two_machines_of_one_model_name_are_told_apart_in_the_message():
    vm = dict(LAPTOP, isa=["avx2", "avx512f"])
    _, message = probe_decision("dev", fp(vm), LAPTOP, fp(LAPTOP))
    assert "this machine has Laptop CPU (8 cores) [isa: ['avx2']]" in message
    assert "measured on Laptop CPU (8 cores) [isa: ['avx2', 'avx512f']]" in message


def test_a_takeover_with_replace_holds_until_it_is_measured():
    # --replace wrote this laptop's fingerprint; the record is still the old laptop's results.
    new, message = probe_decision("dev", fp(OTHER), LAPTOP, fp(LAPTOP), claimed=fp(LAPTOP))
    assert new == fp(LAPTOP) and "taken over from Other CPU (4 cores): measuring it" in message
    # Without the claim, the record stands.
    assert probe_decision("dev", fp(OTHER), LAPTOP, fp(LAPTOP))[0] == fp(OTHER)


@pytest.mark.parametrize("results", [{"status": "measured-v2"}, {"rows": []}, ["measured"]])
def test_a_record_in_a_state_this_code_does_not_know_is_refused_not_overwritten(results):
    with pytest.raises(
        RecordError, match=r"devices/cpu/results.json: status .*; allowed: measured"
    ):
        on_record("cpu", {"benchmark": results}, PENDING)
    assert on_record("cpu", {"benchmark": None}, PENDING)["status"] == NEVER
    assert on_record("cpu", {"benchmark": {"status": "pending"}}, PENDING)["status"] == NEVER


def test_a_record_from_a_newer_version_is_refused_by_the_probe_not_read_as_this_ones():
    from roofline.core.errors import SchemaError

    newer = measured(H100) | {"schema": SCHEMA_VERSION + 1}
    said = f"schema version {SCHEMA_VERSION + 1}, and this code reads up to {SCHEMA_VERSION}"
    for stage in ("benchmark", "sweep", "knobs"):
        records = {"benchmark": measured(H100)} | {stage: newer}
        with pytest.raises(SchemaError, match=said):
            on_record("dev", records, PENDING)


def test_lost_records_are_written_only_for_what_is_nowhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(records, "locked_md5", lambda name, stage, path: f"md5-{stage}")
    monkeypatch.setattr(records, "data_location", lambda md5: "nowhere")
    lost = records.lost_records("dev")
    assert {p.name for p in lost} == {"results.json", "sweep.json", "knobs.json"}
    assert all(r["status"] == "lost" and r["rows"] == [] for r in lost.values())
    # Somewhere after all: refused, naming where.
    monkeypatch.setattr(records, "data_location", lambda md5: "remote")
    with pytest.raises(RecordError, match="run `uv run dvc pull` first"):
        records.lost_records("dev")
    # A lost record is a state on record: never measured for the probe, kept by the stages.
    assert on({"device": "dev", "status": "lost", "rows": []})["status"] == "lost"
    assert probe_decision("dev", records.lost_fingerprint("dev"), LAPTOP, fp(LAPTOP))[0] == fp(
        LAPTOP
    )


def test_an_edited_record_of_a_device_here_is_refused_not_re_measured(device_here):
    import yaml

    device_here(LAPTOP, fp(LAPTOP))
    write_json_atomic(results_path("dev"), measured(LAPTOP) | {"edited": True})
    params = records.fingerprint_values(fp(LAPTOP), "benchmark")
    lock = {
        "stages": {
            "benchmark": {
                "params": {str(fingerprint_path("dev")): params},
                "outs": [{"path": str(results_path("dev")), "md5": "0" * 32}],
            }
        }
    }
    (fingerprint_path("dev").parent / "dvc.lock").write_text(yaml.safe_dump(lock))
    with pytest.raises(RecordError, match=r"is not the file dvc\.lock records") as err:
        decide("dev", None, "benchmark", results_path("dev"))
    assert "nothing was measured or overwritten" in str(err.value)
    # Measured under another fingerprint (new code here): the stage measures, as it should.
    device_here(LAPTOP, fp(LAPTOP, {s: {"code": "c9", "params": "p0"} for s in KEYS}))
    assert decide("dev", None, "benchmark", results_path("dev")).action == "measure"


def test_a_stage_measured_elsewhere_without_a_record_of_it_is_pending(device_here):
    # A device measured elsewhere before its knobs stage existed: nothing of it to keep.
    device_here(None, fp(H100))
    assert decide("dev", None, "knobs", records.RECORDS["knobs"]("dev")).action == "pending"


def test_only_a_lost_sweep_is_recorded_as_lost_and_kept(tmp_path, monkeypatch):
    import json
    import shutil

    import yaml

    from stages import probe
    from tests.conftest import LAPTOP as NO_GPU

    shutil.copy(records.Path(__file__).resolve().parents[1] / "params.yaml", tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "laptop.json").write_text(json.dumps(NO_GPU))
    monkeypatch.setenv("ROOFLINE_HARDWARE", str(tmp_path / "laptop.json"))
    h100 = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": 132}
    pod = fingerprint("h100", h100, "2.9.0", KEYS)
    write_json_atomic(
        results_path("h100"),
        {"device": "h100", "status": "measured", "hardware": h100, "fingerprint": pod},
    )
    lock = {
        "stages": {
            stage: {
                "params": {str(fingerprint_path("h100")): records.fingerprint_values(pod, stage)},
                "outs": [{"path": str(records.RECORDS[stage]("h100")), "md5": f"{stage:0<32}"}],
            }
            for stage in KEYS
        }
    }
    (fingerprint_path("h100").parent / "dvc.lock").write_text(yaml.safe_dump(lock))
    monkeypatch.setattr(records, "data_location", lambda md5: "nowhere")
    monkeypatch.setattr(
        records, "md5_of", lambda path: f"{path.stem.replace('results', 'benchmark'):0<32}"
    )
    write_json_atomic(records.RECORDS["knobs"]("h100"), {"device": "h100", "status": "measured"})
    probe.main(["h100", "--lost"])
    assert json.loads(records.RECORDS["sweep"]("h100").read_text())["status"] == "lost"
    assert json.loads(results_path("h100").read_text())["status"] == "measured"
    written = json.loads(fingerprint_path("h100").read_text())
    assert written["status"] == "recorded" and written["measures"]["sweep"] == "lost"
    monkeypatch.setattr(records, "locate", lambda dev, hardware: ({}, None))
    kept = decide("h100", None, "sweep", records.RECORDS["sweep"]("h100"))
    assert kept.action == "keep" and "its sweep record is lost" in kept.why


def test_the_probe_of_every_device_decides_as_each_ones_own_probe_all_or_none(
    tmp_path, monkeypatch
):
    import json
    import shutil

    from roofline.configuration.params import read_params
    from roofline.core.errors import SchemaError
    from stages import probe
    from tests.conftest import LAPTOP as NO_GPU

    shutil.copy(records.Path(__file__).resolve().parents[1] / "params.yaml", tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "laptop.json").write_text(json.dumps(NO_GPU))
    monkeypatch.setenv("ROOFLINE_HARDWARE", str(tmp_path / "laptop.json"))
    names = list(read_params()["devices"])
    probe.main([])  # what `dvc repro` runs first
    written = {name: fingerprint_path(name).read_bytes() for name in names}
    statuses = {name: json.loads(text)["status"] for name, text in written.items()}
    assert statuses == {name: "recorded" if name == "cpu" else NEVER for name in names}
    keys = json.loads(probe.KEYS_FILE.read_text())
    assert sorted(keys) == sorted(names) and keys["cpu"] == json.loads(written["cpu"])["measures"]
    for name in names:  # a device's own probe stage, which DVC runs after it, agrees
        probe.main([name])
        assert fingerprint_path(name).read_bytes() == written[name]
    # A device it cannot decide for stops it before it writes anything, the others' included.
    newer = measured(H100) | {"device": "h100", "schema": SCHEMA_VERSION + 1}
    write_json_atomic(results_path("h100"), newer)
    for path in (fingerprint_path("cpu"), probe.KEYS_FILE):
        path.unlink()
    with pytest.raises(SchemaError):
        probe.main([])
    assert not fingerprint_path("cpu").exists() and not probe.KEYS_FILE.exists()
    with pytest.raises(SystemExit):  # --replace and --lost name their device
        probe.main(["--replace"])


def test_the_probe_of_every_device_says_it_again_until_something_it_decides_from_changes(
    tmp_path, monkeypatch, capsys
):
    import json
    import shutil

    from roofline.device import hardware
    from stages import probe
    from tests.conftest import LAPTOP as NO_GPU

    shutil.copy(records.Path(__file__).resolve().parents[1] / "params.yaml", tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dvc/tmp").mkdir(parents=True)  # a DVC repository's: where the probe keeps it
    described = tmp_path / "laptop.json"
    described.write_text(json.dumps(NO_GPU))
    monkeypatch.setenv("ROOFLINE_HARDWARE", str(described))
    probe.main([])  # decides and writes: what it said is kept by the next run, which writes none
    probe.main([])
    said = capsys.readouterr().out.splitlines()
    assert said[: len(said) // 2] == said[len(said) // 2 :] and "cpu: here" in said[0]

    def decided(*args, **kwargs):
        raise AssertionError("decided afresh")

    monkeypatch.setattr(probe, "decide", decided)
    probe.main([])
    assert capsys.readouterr().out.splitlines() == said[len(said) // 2 :]
    # A pulled record, another description of this machine, a fence: each is decided afresh.
    changes = [
        lambda: write_json_atomic(results_path("h100"), measured(H100) | {"device": "h100"}),
        lambda: described.write_text(json.dumps(NO_GPU | {"cpu": NO_GPU["cpu"] | OTHER})),
        lambda: monkeypatch.setattr(hardware, "boot", lambda: {"cpus": [0]}),
        lambda: (tmp_path / "params.yaml").write_text((tmp_path / "params.yaml").read_text()),
    ]
    for change in changes:
        kept = probe.PROBE_CACHE.read_bytes()
        change()
        with pytest.raises(AssertionError, match="decided afresh"):
            probe.main([])
        probe.PROBE_CACHE.write_bytes(kept)
