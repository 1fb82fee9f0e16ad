"""What a measurement was measured by: a key per measuring stage, of the code it runs and the
params it reads, and nothing else (no interpretation, no price)."""

import shutil
from pathlib import Path

from roofline.configuration.params import read_params
from roofline.machines.keys import code_key, older, outdated, pending_keys, stage_key

ROOT = Path(__file__).resolve().parents[1]


def copy_of_code(tmp_path: Path) -> Path:
    for part in ("roofline", "stages"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_a_stages_code_key_changes_with_the_code_it_runs_only(tmp_path):
    root = copy_of_code(tmp_path)
    before = {stage: code_key(stage, root) for stage in ("benchmark", "sweep", "knobs")}
    rows = root / "roofline/interpretation/rows.py"  # interpretation: no measuring stage runs it
    rows.write_text(rows.read_text() + "\n# reworded\n")
    assert {stage: code_key(stage, root) for stage in before} == before
    sweep = root / "roofline/measuring/sweep.py"  # the sweep's alone
    sweep.write_text(sweep.read_text() + "\n# changed\n")
    after = {stage: code_key(stage, root) for stage in before}
    assert after["sweep"] != before["sweep"]
    assert (after["benchmark"], after["knobs"]) == (before["benchmark"], before["knobs"])


def test_a_stages_params_key_changes_with_what_it_reads_not_with_a_price():
    params = read_params(ROOT / "params.yaml")
    key = stage_key(params, "h100", "benchmark", ROOT)
    priced = params | {"devices": params["devices"] | {"h100": dict(params["devices"]["h100"])}}
    priced["devices"]["h100"]["skus"] = {"sxm": {"cost_per_hour": 99.0}}
    assert stage_key(priced, "h100", "benchmark", ROOT) == key
    more = params | {"bench": dict(params["bench"], repeats=params["bench"]["repeats"] + 1)}
    changed = stage_key(more, "h100", "benchmark", ROOT)
    assert changed["params"] != key["params"] and changed["code"] == key["code"]
    assert (
        stage_key(more, "h100", "knobs", ROOT)["params"]
        != stage_key(params, "h100", "knobs", ROOT)["params"]
    )
    # A never-measured device's pending rows change with its points only.
    assert pending_keys(more, "h100") == pending_keys(params, "h100")


def test_a_record_says_what_of_todays_code_and_params_differs_from_what_measured_it():
    now = {"code": "c1", "params": "p1"}
    record = {"status": "measured", "run": {}, "fingerprint": {"measures": {"benchmark": now}}}
    assert older(record, "benchmark", now) == []
    assert older(record, "benchmark", {"code": "c2", "params": "p1"}) == ["code"]
    assert older({"status": "measured"}, "benchmark", now) == ["code", "params"]  # UNRECORDED
    params = read_params(ROOT / "params.yaml")
    pending = {"status": "pending"}
    assert outdated({"benchmark": pending, "sweep": None}, params, "cpu") == {}
    ran = record | {"run": {"started_at": "T"}}
    assert outdated({"benchmark": ran}, params, "cpu") == {"benchmark": ["code", "params"]}
    none = {"status": "measured", "sweep": "none"}  # a `none` sweep ran nothing: not older
    assert outdated({"benchmark": ran, "sweep": none}, params, "cpu") == {
        "benchmark": ["code", "params"]
    }


def test_code_keys_are_kept_until_a_file_of_ours_changes(tmp_path, monkeypatch):
    import roofline.machines.keys as keys

    root = copy_of_code(tmp_path)
    (root / ".dvc/tmp").mkdir(parents=True)
    first = keys.code_keys(root)
    assert (root / keys.CODE_CACHE).exists()
    monkeypatch.setattr(keys, "code_key", lambda stage, root: "parsed again")
    assert keys.code_keys(root) == first  # nothing changed: read, not parsed
    knobs = root / "roofline/measuring/knobs.py"
    knobs.write_text(knobs.read_text() + "\n# changed\n")
    assert keys.code_keys(root) == dict.fromkeys(first, "parsed again")


def test_a_windows_checkout_hashes_to_the_same_code_keys(tmp_path):
    linux = copy_of_code(tmp_path / "linux")
    windows = copy_of_code(tmp_path / "windows")
    for path in (windows / "roofline").glob("*.py"):  # git's autocrlf on Windows
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert code_key("benchmark", windows) == code_key("benchmark", linux)


def test_a_pending_sweep_or_knobs_record_follows_its_selection():
    params = read_params(ROOT / "params.yaml")
    swept = params | {"sweep": dict(params["sweep"], name="full")}
    before, after = pending_keys(params, "h100"), pending_keys(swept, "h100")
    assert after["sweep"] != before["sweep"]
    assert (after["benchmark"], after["knobs"]) == (before["benchmark"], before["knobs"])
