"""End to end: a laptop and pods share one pipeline through git and a DVC remote.

Each machine is a clone of a temporary project (tests/machines.py); what hardware it has comes
from a description in $ROOFLINE_HARDWARE (the probe's documented override). Measurements are
real, on this CPU, at tiny sizes."""

import csv
import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from subprocess import PIPE, STDOUT

import pytest
import yaml

from tests.machines import (
    DEVICES,
    LAPTOP,
    OTHER_LAPTOP,
    POD,
    ROOT,
    clone,
    compose,
    copied,
    dvc,
    git,
    machine_env,
    made_once,
    make_project,
    measured_benchmarks,
    publish,
    ran,
    raw,
    results,
    run,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def story(shared):
    """The pod runs first and publishes; then the laptop pulls, runs and publishes. Told once
    for all of pytest-xdist's workers (`made_once`)."""
    said = json.loads((made_once(shared, "story", tell_story) / "story.json").read_text())
    return {key: Path(v) if key in PLACES else v for key, v in said.items()}


PLACES = ("origin", "where", "pod", "laptop")


def own_copy(story: dict, name: str) -> Path:
    """The laptop as the story left it (cloned, pulled, measured, published), copied with its
    DVC cache: what a clone of the origin and a `dvc pull` give, without a process for either.
    The tests whose subject is the clone or the pull itself make their own."""
    return copied(story["laptop"], story["where"] / name)


def tell_story(where: Path) -> None:
    """The story, told in `where`: what the tests read of it in where/story.json."""
    origin = make_project(where)
    pod = clone(origin, where / "pod", pull=False)
    pod_out = dvc(pod, "repro", hardware=POD)
    publish(pod, "pod: measure podhost")
    laptop = clone(origin, where / "laptop")
    pulled_podhost = raw(laptop, "podhost")
    # A process of its own, as `uv run dvc repro` is: the time split it says at its end is
    # keyed by its DVC process (roofline.core.spent), which `dvc` here runs in pytest's.
    laptop_out = run(laptop, sys.executable, "-m", "dvc", "repro", hardware=LAPTOP)
    publish(laptop, "laptop: measure cpu")
    told = {
        "origin": origin,
        "where": where,
        "pod": pod,
        "laptop": laptop,
        "pod_out": pod_out,
        "laptop_out": laptop_out,
        "pulled_podhost": pulled_podhost.decode(),
    }
    (where / "story.json").write_text(json.dumps(told, default=str))


def test_pod_running_first_measures_its_device_and_pends_the_rest(story):
    pod = story["pod"]
    assert measured_benchmarks(story["pod_out"]) == {"cpu", "h100", "podhost"}
    assert results(pod, "podhost")["status"] == "measured"
    assert results(pod, "podhost")["hardware"]["model"] == "Pod CPU"
    # The pod has a GPU, so its host CPU is not "the cpu": pending, never a number.
    assert results(pod, "cpu")["status"] == "pending"
    assert results(pod, "h100")["status"] == "pending"
    assert all(not row["samples_s"] for row in results(pod, "cpu")["rows"])


def test_laptop_measures_its_cpu_and_keeps_the_pulled_pod_results(story):
    laptop = story["laptop"]
    assert measured_benchmarks(story["laptop_out"]) == {"cpu"}  # the pending record did not stop it
    assert results(laptop, "cpu")["hardware"]["model"] == "Laptop CPU"
    assert raw(laptop, "podhost").decode() == story["pulled_podhost"]
    assert raw(laptop, "podhost") == raw(story["pod"], "podhost")
    table = (laptop / "experiments/x4-roofline/results.csv").read_text().splitlines()
    statuses = {line.split(",")[0]: line.split(",")[5] for line in table[1:]}
    assert statuses == {"cpu": "measured", "h100": "pending", "podhost": "measured"}
    report = (laptop / "experiments/x4-roofline/REPORT.md").read_text()
    assert (
        "- **h100** (H100 SXM5 80GB): pending;" in report and "**podhost** (Pod CPU) ran" in report
    )
    extra = (laptop / "experiments/x4-roofline/REPORT-appendix.md").read_text()
    assert "### h100: H100 SXM5 80GB (pending)" in extra and "### podhost: Pod CPU" in extra
    assert (laptop / "experiments/x4-roofline/roofline.png").stat().st_size > 10_000


def test_the_run_says_at_its_end_where_its_time_went_and_the_manifest_keeps_it(story):
    said = story["laptop_out"].split("where the time went (", 1)[1]
    lines = said.splitlines()
    assert lines[1].startswith("  DVC itself (the pipeline, hashes, locks): ")
    assert lines[2].startswith(f"  imports, {len(ran(story['laptop_out']))} stage processes: ")
    # Every stage process is said: its own line, or among the small ones counted together.
    end = next(i for i, line in enumerate(lines[1:], 1) if not line.startswith("  "))
    stage_lines = [line for line in lines[3:end] if ": " in line and "other stages" not in line]
    together = [int(line.split()[0]) for line in lines[3:end] if "other stages" in line]
    assert len(stage_lines) + sum(together) == len(ran(story["laptop_out"]))
    manifest = json.loads((story["laptop"] / "experiments/x4-roofline/manifest.json").read_text())
    spent = manifest["devices"]["cpu"]["spent"]
    assert set(spent) == {
        "float32 48x48x48 torch",
        "float32 48x48x48 numpy",
        "copy",
        "clock",
        "FMA ceiling",
        "clock under FMA load",
        "breakdown",
        "cache ceilings",
    }
    assert all(seconds >= 0 for seconds in spent.values())
    # The printed split is the record's: each part of 0.05 s or more, as the manifest keeps it.
    benchmark = next(line for line in lines if line.startswith("  benchmark cpu: "))
    for part, seconds in spent.items():
        assert (f"{part} {seconds:.1f} s" in benchmark) == (seconds >= 0.05), benchmark
    assert sum(spent.values()) <= results(story["laptop"], "cpu")["run"]["wall_s"] + 60
    assert "spent" not in manifest["devices"]["h100"]  # pending: nothing measured


def test_a_second_repro_measures_nothing(story):
    out = dvc(own_copy(story, "laptop-again"), "repro", hardware=LAPTOP)
    assert measured_benchmarks(out) == set()
    assert not ran(out) & {"aggregate", "plot", "report"}


def test_a_pods_host_cpu_never_takes_over_the_laptops_cpu(story):
    pod = own_copy(story, "pod-again")
    laptop_cpu = raw(pod, "cpu")
    out = dvc(pod, "repro", hardware=POD)
    assert measured_benchmarks(out) == set()
    assert "cpu: not on this machine; keeping results from Laptop CPU" in out
    assert raw(pod, "cpu") == laptop_cpu


def test_another_laptop_keeps_the_recorded_cpu_until_told_to_replace_it(story):
    # Up to the table (`dvc repro aggregate`): what is measured and kept is the subject.
    other = own_copy(story, "other-laptop")
    recorded = raw(other, "cpu")
    out = dvc(other, "repro", "aggregate", hardware=OTHER_LAPTOP)
    assert measured_benchmarks(out) == set()
    assert (
        "this machine has Other Laptop CPU (2 cores) but the results on record were measured on Laptop CPU"
        in out
    )
    assert raw(other, "cpu") == recorded
    # The one explicit step: take the device over, then repro measures it.
    out = run(
        other, sys.executable, "-m", "stages.probe", "cpu", "--replace", hardware=OTHER_LAPTOP
    )
    assert (
        "replaced recorded hardware (Laptop CPU (2 cores)) with Other Laptop CPU (2 cores)" in out
    )
    out = dvc(other, "repro", "aggregate", hardware=OTHER_LAPTOP)
    assert measured_benchmarks(out) == {"cpu"}
    assert results(other, "cpu")["hardware"]["model"] == "Other Laptop CPU"


def device_files(clone_path: Path, device: str) -> dict[str, bytes]:
    """Everything recorded of a device: its records, fingerprint and dvc.lock, byte for byte."""
    folder = clone_path / DEVICES / device
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def changed_in_git(clone_path: Path) -> set[str]:
    return {line[3:] for line in git(clone_path, "status", "--porcelain").splitlines()}


def test_an_upgrade_of_measuring_code_stales_only_the_devices_each_machine_has(story):
    # The laptop changes measuring code: plain `dvc repro` re-measures its cpu, keeps the pod's
    # podhost byte for byte, and the report says podhost's numbers are older code's. On an
    # origin of its own: the other tests' clones never see its pushes.
    origin = story["where"] / "upgrade-origin.git"
    git(story["where"], "clone", "-q", "--bare", str(story["origin"]), str(origin))
    laptop = clone(origin, story["where"] / "laptop-upgrade")
    podhost = device_files(laptop, "podhost")
    measuring = laptop / "roofline/measuring/measure.py"
    measuring.write_text(measuring.read_text() + "\n# a change of measuring code\n")
    out = dvc(laptop, "repro", hardware=LAPTOP)
    assert measured_benchmarks(out) == {"cpu"}, out
    assert "podhost: not on this machine; keeping its benchmark record" not in out  # not even run
    assert device_files(laptop, "podhost") == podhost
    report = (laptop / "experiments/x4-roofline/REPORT.md").read_text()
    said = next(line for line in report.splitlines() if "**podhost**" in line)
    assert "⚠ Measured by older measuring code (benchmark at revision " in said
    assert "to re-measure, `uv run dvc repro` on a machine that has it" in said
    assert "older measuring" not in next(line for line in report.splitlines() if "**cpu**" in line)
    publish(laptop, "laptop: new measuring code, cpu re-measured")

    # The pod pulls it and runs plain `dvc repro`, as its task file does: it measures podhost,
    # and changes no other device's files, so it can commit its lock and pull.
    pod = clone(origin, story["where"] / "pod-upgrade")
    cpu = device_files(pod, "cpu")
    out = dvc(pod, "repro", hardware=POD)
    assert measured_benchmarks(out) == {"podhost"}, out
    assert device_files(pod, "cpu") == cpu
    devices = {p for p in changed_in_git(pod) if p.startswith(DEVICES)}
    assert devices == {f"{DEVICES}/podhost/dvc.lock"}
    dvc(pod, "push")
    git(pod, "add", f"{DEVICES}/podhost/dvc.lock")
    git(pod, "commit", "-qm", "pod: podhost by the new code")
    git(pod, "restore", ".")  # the renders are the laptop's to commit (docs/several-machines.md)
    git(pod, "pull", "-q", "--rebase")
    git(pod, "push", "-q", "origin", "main")

    # Back on the laptop: podhost is today's code's again, and nothing is measured.
    git(laptop, "pull", "-q")
    dvc(laptop, "pull")
    out = dvc(laptop, "repro", hardware=LAPTOP)
    assert measured_benchmarks(out) == set()
    assert "older measuring" not in (laptop / "experiments/x4-roofline/REPORT.md").read_text()


def test_a_clone_that_forgot_to_pull_is_told_to(story):
    bare = clone(story["origin"], story["where"] / "no-pull", pull=False)
    code, out = dvc(bare, "repro", hardware=LAPTOP, check=False)
    assert code != 0 and "run `uv run dvc pull` first" in out
    assert not (bare / DEVICES / "cpu/results.json").exists()


def test_overrides_through_dvc_exp_run(story):
    laptop = own_copy(story, "laptop-exp")
    recorded = raw(laptop, "cpu")
    code, out = dvc(
        laptop, "exp", "run", "-S", "devices.cpu.dtypes=[float99]", hardware=LAPTOP, check=False
    )
    assert code != 0 and "float99" in out
    assert raw(laptop, "cpu") == recorded
    code, out = dvc(
        laptop, "exp", "run", "-S", "devices.cpu.shapes=[[0,8,8]]", hardware=LAPTOP, check=False
    )
    assert (
        code != 0
        and "devices.cpu.shapes has [0, 8, 8]; allowed: [M, N, K] of positive integers" in out
    )
    assert raw(laptop, "cpu") == recorded
    # Not an integer: the lab's words, not DVC's "unexpected error ... Having any troubles?".
    git(laptop, "checkout", "params.yaml")
    code, out = dvc(
        laptop, "exp", "run", "-S", "devices.cpu.shapes=[[256.5,8,8]]", hardware=LAPTOP, check=False
    )
    assert code != 0 and "Having any troubles" not in out
    assert "devices.cpu.shapes has [256.5, 8, 8]; allowed: [M, N, K] of positive integers" in out
    assert raw(laptop, "cpu") == recorded
    git(laptop, "checkout", "params.yaml")
    dvc(laptop, "exp", "run", "-S", "devices.cpu.shapes=[[32,32,32]]", hardware=LAPTOP)
    rows = results(laptop, "cpu")["rows"]
    assert [(r["m"], r["n"], r["k"], r["status"], r["backend"]) for r in rows] == [
        (32, 32, 32, "measured", "torch"),
        (32, 32, 32, "measured", "numpy"),
    ]


def csv_rows(clone_path) -> list[dict]:
    with (clone_path / "experiments/x4-roofline/results.csv").open() as f:
        return list(csv.DictReader(f))


def deliverable(clone_path, name: str) -> bytes:
    return (clone_path / "experiments/x4-roofline" / name).read_bytes()


def test_renaming_a_column_or_a_knob_title_stales_no_measuring_stage(story):
    laptop = own_copy(story, "laptop-rename")
    rows = laptop / "roofline/interpretation/rows.py"
    text = rows.read_text()
    renamed = text.replace("achieved_tflops", "tflops_achieved").replace(
        'return knob if sides == knob else f"{knob}: {sides}"',
        'return knob if sides == knob else f"{knob} ({sides})"',
    )
    assert renamed.count("tflops_achieved") >= 2 and "({sides})" in renamed

    def stale() -> set[str]:
        changed = json.loads(dvc(laptop, "status", "--json", hardware=LAPTOP))
        names = {name.replace(f"{DEVICES}/", "").replace("/dvc.yaml", "") for name in changed}
        return {name for name in names if not name.endswith(":probe")}  # probes always run

    before = stale()
    rows.write_text(renamed)
    after = stale()
    assert {"aggregate", "plot", "report"} <= after - before
    measuring = {name for name in after if ":" in name}  # device:benchmark, sweep, knobs
    assert measuring == {name for name in before if ":" in name}, measuring


def test_a_price_or_peak_fixed_on_the_laptop_re_renders_and_measures_nothing(story):
    laptop = own_copy(story, "laptop-price")
    measured = raw(laptop, "podhost")
    before = {name: deliverable(laptop, name) for name in ("roofline.png", "REPORT.md")}
    conf = laptop / "conf/device/podhost.yaml"
    fixed = yaml.safe_load(conf.read_text())
    fixed["skus"]["host"] |= {"cost_per_hour": 2.69, "peak_tflops": {"float32": 4.0}}
    conf.write_text(yaml.safe_dump(fixed))
    compose(laptop)
    out = dvc(laptop, "repro", hardware=LAPTOP)
    assert not {s for s in ran(out) if s.endswith((":benchmark", ":sweep"))}, out
    assert {"aggregate", "plot", "report"} <= ran(out)
    assert raw(laptop, "podhost") == measured
    (row,) = [r for r in csv_rows(laptop) if r["device"] == "podhost"]
    achieved = float(row["achieved_tflops"])
    assert float(row["peak_tflops"]) == 4.0 and row["peak_source"] == "set in conf"
    assert float(row["mfu"]) == pytest.approx(achieved / 4.0)
    manifest = json.loads(deliverable(laptop, "manifest.json"))["devices"]["podhost"]
    assert manifest["cost_per_hour_usd"] == 2.69
    assert manifest["run_cost_usd"] == pytest.approx(2.69 * manifest["wall_s"] / 3600)
    metrics = json.loads(deliverable(laptop, "metrics.json"))
    assert metrics["podhost"]["float32"]["mfu"] == pytest.approx(achieved / 4.0)
    report = deliverable(laptop, "REPORT.md").decode()
    assert (
        f"MFU {achieved / 4.0:.1%}" in report
        and "$2.69/h" in deliverable(laptop, "REPORT-appendix.md").decode()
    )
    assert all(deliverable(laptop, name) != text for name, text in before.items())


def test_exp_run_with_a_new_price_and_peak_measures_nothing(story):
    laptop = own_copy(story, "laptop-exp-price")
    measured = raw(laptop, "cpu")
    out = dvc(
        laptop,
        "exp",
        "run",
        "-S",
        "devices.cpu.skus.any.cost_per_hour=0.5",
        "-S",
        "devices.cpu.skus.any.peak_tflops.float32=2.0",
        hardware=LAPTOP,
    )
    assert not {s for s in ran(out) if s.endswith((":benchmark", ":sweep"))}, out
    assert raw(laptop, "cpu") == measured
    rows = [r for r in csv_rows(laptop) if r["device"] == "cpu"]
    assert {r["backend"] for r in rows} == {"torch", "numpy"}
    for row in rows:
        assert float(row["peak_tflops"]) == 2.0
        assert float(row["mfu"]) == pytest.approx(float(row["achieved_tflops"]) / 2.0)
    (row,) = rows[:1]
    assert float(row["peak_tflops"]) == 2.0
    assert float(row["mfu"]) == pytest.approx(float(row["achieved_tflops"]) / 2.0)


def test_a_device_is_one_conf_file_and_one_defaults_line(story):
    laptop = own_copy(story, "laptop-new-device")
    l40s = {
        "kind": "cuda",
        "recognise": {"gpu_name": "^NVIDIA L40S$"},
        "skus": {
            "l40s": {
                "name": "NVIDIA L40S",
                "sku": "L40S",
                "peak_tflops": {"float16": 362.05},
                "memory_bandwidth_gbps": 864,
            }
        },
        "dtypes": ["float16"],
        "shapes": [[64, 64, 64]],
    }
    (laptop / "conf/device/l40s.yaml").write_text(yaml.safe_dump(l40s))
    config = laptop / "conf/config.yaml"
    text = config.read_text()
    config.write_text(text.replace("- sweep: none", "- device@devices.l40s: l40s\n- sweep: none"))
    code, out = run(laptop, sys.executable, "-m", "roofline.compose", "--check", check=False)
    assert code != 0 and "differ from conf/: run `uv run python -m roofline.compose`" in out
    compose(laptop)
    out = dvc(laptop, "repro", "--dry", hardware=LAPTOP)
    assert {"l40s:probe", "l40s:benchmark", "l40s:sweep"} <= ran(out), out
    dvc(laptop, "repro", hardware=LAPTOP)
    assert results(laptop, "l40s")["status"] == "pending"
    assert "- **l40s** (L40S): pending;" in deliverable(laptop, "REPORT.md").decode()


def plots_json(clone_path, *args: str) -> dict:
    out = dvc(clone_path, "plots", *args, "--json", hardware=LAPTOP)
    return json.JSONDecoder().raw_decode(out[out.index("{") :])[0]


def test_dvc_plots_renders_an_interactive_log_log_roofline_and_diffs_two_revisions(story):
    laptop = own_copy(story, "laptop-plots")
    shown = plots_json(laptop, "show")
    assert "errors" not in shown, shown.get("errors")
    (plot,) = shown["data"]["experiments/x4-roofline/roofline.json"]
    spec = plot["content"]
    assert spec["encoding"]["x"]["scale"]["type"] == spec["encoding"]["y"]["scale"]["type"] == "log"
    rows = spec["data"]["values"]
    points = [r for r in rows if r["kind"] == "point"]
    assert {(p["device"], p["dtype"], p["shape"]) for p in points} == {
        ("cpu", "float32", "48x48x48"),
        ("podhost", "float32", "40x40x40"),
    }
    assert all(p["tflops"] > 0 and p["mfu"] > 0 for p in points)
    tooltip = {t["field"] for t in spec["layer"][1]["encoding"]["tooltip"]}
    assert {"device", "dtype", "shape", "y", "mfu"} <= tooltip
    assert {r["device"] for r in rows if r["kind"] == "roof"} == {"cpu", "h100", "podhost"}
    # A second revision, with another peak for podhost: both revisions are drawn, apart.
    conf = laptop / "conf/device/podhost.yaml"
    fixed = yaml.safe_load(conf.read_text())
    fixed["skus"]["host"]["peak_tflops"] = {"float32": 4.0}
    conf.write_text(yaml.safe_dump(fixed))
    compose(laptop)
    dvc(laptop, "repro", hardware=LAPTOP)
    (diff,) = plots_json(laptop, "diff", "HEAD")["data"]["experiments/x4-roofline/roofline.json"]
    revs = {
        (r["rev"], r["tflops"])
        for r in diff["content"]["data"]["values"]
        if r.get("source") == "datasheet" and r["device"] == "podhost"
    }
    assert {rev for rev, _ in revs} == {"HEAD", "workspace"} and ("workspace", 4.0) in revs


# Failures: every failure leaves the deliverables and the next run working.

DELIVERABLES = (
    "results.csv",
    "manifest.json",
    "metrics.json",
    "roofline.png",
    "roofline-sweeps.png",
    "roofline.json",
    "REPORT.md",
    "REPORT-appendix.md",
)
H100_POD = {
    **POD,
    "gpus": [
        dict(POD["gpus"][0], name="NVIDIA H100 80GB HBM3", sm_count=132, memory_bytes=85 << 30)
    ],
}


def deliverables(clone_path) -> dict[str, bytes]:
    return {name: deliverable(clone_path, name) for name in DELIVERABLES}


def test_a_failed_pod_run_blocks_nobody(story):
    # A "pod" that describes an H100 it does not have: its probe records the H100, then its
    # benchmark fails, as a pod that dies mid-measurement does. It commits and pushes anyway,
    # to an origin of its own: the other tests' clones never see its push.
    origin = story["where"] / "failed-pod-origin.git"
    git(story["where"], "clone", "-q", "--bare", str(story["origin"]), str(origin))
    pod = clone(origin, story["where"] / "failed-pod")
    pending = raw(pod, "h100")
    code, out = dvc(pod, "repro", hardware=H100_POD, check=False)
    assert code != 0 and "h100" in out, out
    assert raw(pod, "h100") == pending
    publish(pod, "pod: a failed run, handed back")
    # The same clone without the H100, and a laptop that pulls what the pod handed back.
    out = dvc(pod, "repro", hardware=POD)
    assert "h100: not on this machine, never measured: pending" in out
    assert measured_benchmarks(out) == set()
    laptop = clone(origin, story["where"] / "after-failed-pod")
    out = dvc(laptop, "repro", hardware=LAPTOP)
    assert measured_benchmarks(out) == set(), out
    assert results(laptop, "h100")["status"] == "pending"


def test_dvc_exp_run_with_no_dtypes_is_refused_and_says_how_to_undo_it(story):
    laptop = own_copy(story, "laptop-no-dtypes")
    recorded = raw(laptop, "cpu")
    code, out = dvc(
        laptop, "exp", "run", "-S", "devices.cpu.dtypes=[]", hardware=LAPTOP, check=False
    )
    assert code != 0 and "devices.cpu.dtypes is empty" in out, out
    assert raw(laptop, "cpu") == recorded
    code, out = dvc(laptop, "repro", hardware=LAPTOP, check=False)
    assert code != 0 and "`git checkout params.yaml` restores it" in out, out
    git(laptop, "checkout", "params.yaml")
    assert measured_benchmarks(dvc(laptop, "repro", hardware=LAPTOP)) == set()
    assert raw(laptop, "cpu") == recorded


def test_a_failed_render_keeps_every_deliverable(story):
    laptop = own_copy(story, "laptop-failed-render")
    before = deliverables(laptop)
    broken = laptop / DEVICES / "podhost/results.json"
    broken.write_text('{"device": "podhost", ')
    code, out = dvc(
        laptop, "repro", "-s", "aggregate", "plot", "report", hardware=LAPTOP, check=False
    )
    # Corrupted, it is not the file dvc.lock records: refused before it is read, with the way out.
    assert code != 0 and f"{DEVICES}/podhost/results.json is not the file dvc.lock records" in out
    assert f"`uv run dvc checkout --force {DEVICES}/podhost/results.json`" in out, out
    assert "the previous deliverables are as they were" in out
    assert deliverables(laptop) == before
    # The advised way out works.
    dvc(laptop, "checkout", "--force", f"{DEVICES}/podhost/results.json")
    dvc(laptop, "repro", "-s", "aggregate", "plot", "report", hardware=LAPTOP)
    assert deliverables(laptop) == before
    # A broken table stops the plot and the report, and the figures stay.
    (laptop / "experiments/x4-roofline/results.csv").write_text("not,a\ntable,\n")
    code, out = dvc(laptop, "repro", "-s", "plot", hardware=LAPTOP, check=False)
    assert code != 0 and "does not have the columns aggregate writes" in out, out
    assert {n: b for n, b in deliverables(laptop).items() if n != "results.csv"} == {
        n: b for n, b in before.items() if n != "results.csv"
    }


def test_an_edited_result_of_a_device_measured_elsewhere_is_named_and_restorable(story):
    laptop = own_copy(story, "laptop-edited")
    path = f"{DEVICES}/podhost/results.json"
    record = results(laptop, "podhost")
    record["rows"][0]["samples_s"][0] *= 2
    (laptop / path).write_text(json.dumps(record))
    code, out = dvc(laptop, "repro", hardware=LAPTOP, check=False)
    assert code != 0 and f"{path} is not the file dvc.lock records" in out, out
    assert f"`uv run dvc checkout --force {path}`" in out and "is stale" not in out
    dvc(laptop, "checkout", "--force", path)
    assert measured_benchmarks(dvc(laptop, "repro", hardware=LAPTOP)) == set()


def test_an_edited_record_is_refused_by_the_aggregate_stage_run_alone(story):
    # `dvc repro -s aggregate` (the docs' remedy for a damaged results.csv) skips the measuring
    # stages that would have noticed: the aggregate holds each record to its dvc.lock itself.
    laptop = own_copy(story, "laptop-edited-aggregate")
    path = f"{DEVICES}/podhost/results.json"
    record = results(laptop, "podhost")
    for row in record["rows"]:  # every timing 0.6x: an MFU to be proud of, and a lie
        row["samples_s"] = [t * 0.6 for t in row["samples_s"]]
    (laptop / path).write_text(json.dumps(record))
    before = deliverables(laptop)
    code, out = dvc(laptop, "repro", "-s", "aggregate", hardware=LAPTOP, check=False)
    assert code != 0, out
    assert (
        f"podhost: {path} is not the file dvc.lock records (it was edited or corrupted here); "
        f"no deliverable is made from it. Restore it: `uv run dvc checkout --force {path}`"
    ) in out
    assert deliverables(laptop) == before


def test_a_hand_edited_sweep_name_is_refused_before_anything_runs(story):
    laptop = own_copy(story, "laptop-sweep-name")
    sweep = raw_sweep = (laptop / DEVICES / "cpu/sweep.json").read_bytes()
    params = laptop / "params.yaml"
    params.write_text(params.read_text().replace("  name: none\n", "  name: nonesuch\n", 1))
    code, out = dvc(laptop, "repro", hardware=LAPTOP, check=False)
    assert code != 0 and "sweep.name='nonesuch'; allowed: full, none, short" in out, out
    assert (laptop / DEVICES / "cpu/sweep.json").read_bytes() == sweep == raw_sweep


def test_a_pod_whose_driver_is_too_old_for_torch_stops_by_name(story):
    # A stand-in NVML sees an H100 with driver 550; this machine's torch (CUDA 13) cannot use it.
    pod = own_copy(story, "old-driver-pod")
    before = {device: raw(pod, device) for device in ("cpu", "h100", "podhost")}
    fake = str(ROOT / "tests/fakes/old_driver")
    code, out = dvc(pod, "repro", env={"PYTHONPATH": fake, "ROOFLINE_HARDWARE": None}, check=False)
    assert code != 0, out
    assert "NVML sees 1 NVIDIA GPU (driver 550.54.15)" in out and "needs driver >= 580" in out
    assert "scripts/pod-setup" in out
    assert not measured_benchmarks(out)
    assert {
        device: raw(pod, device) for device in before
    } == before  # nothing pending-over-measured


def test_a_lock_whose_data_nobody_has_is_named_lost_with_ways_out_that_work(story):
    # A pod commits a lock of a new podhost record, but its `dvc push` never happened. On its
    # own origin, so that no other test's clone sees it. The record is the story's, one sample
    # changed and committed by `dvc commit`: what the laptop sees is the same lock of data
    # nobody has, without a CPU benchmark to make it (the pod at the end measures one).
    origin = story["where"] / "lost-origin.git"
    git(story["where"], "clone", "-q", "--bare", str(story["origin"]), str(origin))
    pod = clone(origin, story["where"] / "lost-pod")
    record = results(pod, "podhost")
    record["rows"][0]["samples_s"][0] *= 1.5
    (pod / DEVICES / "podhost/results.json").write_text(json.dumps(record))
    dvc(pod, "commit", "--force", f"{DEVICES}/podhost/dvc.yaml:benchmark", hardware=POD)
    git(pod, "add", f"{DEVICES}/podhost/dvc.lock")
    git(pod, "commit", "-qm", "pod: measured podhost, push failed")
    git(pod, "push", "-q", "origin", "main")

    laptop = clone(origin, story["where"] / "lost-laptop", pull=False)
    dvc(laptop, "pull", "--allow-missing")
    code, out = dvc(laptop, "repro", hardware=LAPTOP, check=False)
    assert code != 0
    assert "it is in neither this workspace, DVC's cache nor the remote: it is lost" in out, out
    assert "stale" not in out and "`uv run python -m stages.probe podhost --lost`" in out
    # The way out it names records it as lost and renders the rest; nothing else is touched.
    cpu = device_files(laptop, "cpu")
    run(laptop, sys.executable, "-m", "stages.probe", "podhost", "--lost", hardware=LAPTOP)
    out = dvc(laptop, "repro", hardware=LAPTOP)
    assert "podhost: recorded as lost; kept so" in out
    assert results(laptop, "podhost")["status"] == "lost"
    report = (laptop / "experiments/x4-roofline/REPORT.md").read_text()
    assert "- **podhost** (the pod's host CPU): ⚠ lost: its results were in neither" in report
    assert "**cpu** (Laptop CPU) ran" in report and device_files(laptop, "cpu") == cpu
    publish(laptop, "laptop: podhost recorded as lost")
    # Where the device is, plain `dvc repro` measures it afresh, from the lost lock (as a pod
    # started before the laptop published would see it).
    again = clone(origin, story["where"] / "lost-pod-again", pull=False)
    git(again, "checkout", "-q", "HEAD~1")
    dvc(again, "pull", "--allow-missing")
    out = dvc(again, "repro", hardware=POD)
    assert "podhost: here; the results dvc.lock records are lost" in out, out
    assert measured_benchmarks(out) == {"podhost"}
    assert results(again, "podhost")["status"] == "measured"


def test_a_deleted_cache_re_measures_nothing_and_names_dvc_pull(story):
    laptop = own_copy(story, "no-cache")
    cpu = device_files(laptop, "cpu")
    shutil.rmtree(laptop / ".dvc/cache")
    out = dvc(laptop, "repro", hardware=LAPTOP)
    assert "only DVC's cache lacked it: kept, not re-measured (`uv run dvc pull`" in out, out
    assert "stale" not in out and device_files(laptop, "cpu") == cpu


def test_two_clones_measuring_one_device_at_once_take_turns(story):
    # As `dvc queue start -j 2` or two clones would: the same device's benchmark, at once.
    clones = [own_copy(story, f"turns-{i}") for i in range(2)]
    # The device's hold is machine-wide: a private folder for it keeps another test's CPU
    # benchmark on this machine out of these two's turns.
    private = story["where"] / "turns-tmp"
    private.mkdir()
    env = machine_env(clones[0], LAPTOP, {"ROOFLINE_HOLD_DIR": str(private)})
    target = f"{DEVICES}/cpu/dvc.yaml:benchmark"
    cmd = [sys.executable, "-m", "dvc", "repro", "--force", "--single-item", target]
    both = [
        subprocess.Popen(cmd, cwd=c, env=env, text=True, stdout=PIPE, stderr=STDOUT) for c in clones
    ]
    outs = [p.communicate()[0] for p in both]
    assert all(p.returncode == 0 for p in both), outs
    # Which went second, by when each began measuring (started_at, to the second): it waited for
    # the first, and measured only once the first had ended.
    runs = [results(c, "cpu")["run"] for c in clones]
    began = [datetime.fromisoformat(r["started_at"]) for r in runs]
    waiting = ["cpu: waiting for its benchmark (pid" in out for out in outs]
    first, second = sorted(range(2), key=lambda i: (began[i], waiting[i]))
    assert waiting[second] and f"in {clones[first]}," in outs[second], outs
    assert (began[second] - began[first]).total_seconds() >= runs[first]["wall_s"] - 1


def test_conf_edited_without_compose_is_said_by_the_next_run(story):
    # Plain `dvc repro` reads params.yaml: the edit would measure nothing and say nothing.
    laptop = own_copy(story, "laptop-conf-edit")
    cpu = laptop / "conf/device/cpu.yaml"
    conf = yaml.safe_load(cpu.read_text())
    cpu.write_text(yaml.safe_dump(conf | {"shapes": [[64, 64, 64]]}))
    out = dvc(laptop, "repro", hardware=LAPTOP)
    note = (
        "note: conf/ was edited after params.yaml was composed from it, and `dvc repro` reads "
        "params.yaml: `uv run python -m roofline.compose` applies the edit"
    )
    assert note in out and measured_benchmarks(out) == set()
    # Said on every run until composed: the probe of every device, run first by each.
    probe = (sys.executable, "-m", "stages.probe")
    assert note in run(laptop, *probe, hardware=LAPTOP)
    compose(laptop)
    assert "note: conf/" not in run(laptop, *probe, hardware=LAPTOP)


def test_a_never_measured_devices_pending_records_are_written_again_never_lost(story):
    # A clone whose remote holds another lab's data: its locks name records nobody has. A
    # never-measured device's are pending ones, made from the config alone: not "lost".
    laptop = own_copy(story, "other-labs-remote")
    other = story["where"] / "other-labs-store"
    other.mkdir()
    dvc(laptop, "remote", "modify", "store", "url", str(other))
    lock = yaml.safe_load((laptop / DEVICES / "h100/dvc.lock").read_text())
    md5 = lock["stages"]["benchmark"]["outs"][0]["md5"]
    (laptop / ".dvc/cache/files/md5" / md5[:2] / md5[2:]).unlink()
    (laptop / DEVICES / "h100/results.json").unlink()
    out = dvc(laptop, "repro", hardware=LAPTOP)
    assert "h100: not on this machine, never measured: pending" in out
    assert "lost" not in out and measured_benchmarks(out) == {"h100"}  # its pending record
    assert results(laptop, "h100")["status"] == "pending"
    report = (laptop / "experiments/x4-roofline/REPORT.md").read_text()
    assert "- **h100** (H100 SXM5 80GB): pending; `uv run dvc repro` on a machine" in report
