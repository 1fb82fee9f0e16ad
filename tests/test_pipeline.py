"""End to end: a laptop and pods share one pipeline through git and a DVC remote.

Each machine is a clone of a temporary project (tests/machines.py); what hardware it has comes
from a description in $ROOFLINE_HARDWARE (the probe's documented override). Measurements are
real, on this CPU, at tiny sizes."""

import sys

import pytest

from tests.machines import (
    DEVICES,
    LAPTOP,
    OTHER_LAPTOP,
    POD,
    clone,
    dvc,
    git,
    make_project,
    measured_benchmarks,
    publish,
    ran,
    raw,
    results,
    run,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """The pod runs first and publishes; then the laptop pulls, runs and publishes."""
    where = tmp_path_factory.mktemp("machines")
    origin = make_project(where)
    pod = clone(origin, where / "pod", pull=False)
    pod_out = dvc(pod, "repro", hardware=POD)
    publish(pod, "pod: measure podhost")
    laptop = clone(origin, where / "laptop")
    pulled_podhost = raw(laptop, "podhost")
    laptop_out = dvc(laptop, "repro", hardware=LAPTOP)
    publish(laptop, "laptop: measure cpu")
    return {
        "origin": origin,
        "where": where,
        "pod": pod,
        "laptop": laptop,
        "pod_out": pod_out,
        "laptop_out": laptop_out,
        "pulled_podhost": pulled_podhost,
    }


def test_pod_running_first_measures_its_device_and_pends_the_rest(story):
    pod = story["pod"]
    assert measured_benchmarks(story["pod_out"]) == {"cpu", "h100", "podhost"}
    assert results(pod, "podhost")["status"] == "measured"
    assert results(pod, "podhost")["hardware"]["model"] == "Pod CPU"
    # The pod has a GPU, so its host CPU is not "the cpu": pending, never a number.
    assert results(pod, "cpu")["status"] == "pending"
    assert results(pod, "h100")["status"] == "pending"
    assert all(row["median_s"] is None for row in results(pod, "cpu")["rows"])


def test_laptop_measures_its_cpu_and_keeps_the_pulled_pod_results(story):
    laptop = story["laptop"]
    assert measured_benchmarks(story["laptop_out"]) == {"cpu"}  # the pending record did not stop it
    assert results(laptop, "cpu")["hardware"]["model"] == "Laptop CPU"
    assert raw(laptop, "podhost") == story["pulled_podhost"] == raw(story["pod"], "podhost")
    table = (laptop / "experiments/x4-roofline/results.csv").read_text().splitlines()
    statuses = {line.split(",")[0]: line.split(",")[5] for line in table[1:]}
    assert statuses == {"cpu": "measured", "h100": "pending", "podhost": "measured"}
    report = (laptop / "experiments/x4-roofline/REPORT.md").read_text()
    assert (
        "### h100: NVIDIA H100 80GB SXM5 (pending)" in report and "### podhost: Pod CPU" in report
    )
    assert (laptop / "experiments/x4-roofline/roofline.png").stat().st_size > 10_000


def test_a_second_repro_measures_nothing(story):
    out = dvc(story["laptop"], "repro", hardware=LAPTOP)
    assert measured_benchmarks(out) == set()
    assert not ran(out) & {"aggregate", "plot", "report"}


def test_a_pods_host_cpu_never_takes_over_the_laptops_cpu(story):
    pod = clone(story["origin"], story["where"] / "pod-again")
    laptop_cpu = raw(pod, "cpu")
    out = dvc(pod, "repro", hardware=POD)
    assert measured_benchmarks(out) == set()
    assert "cpu: not on this machine; keeping results from Laptop CPU" in out
    assert raw(pod, "cpu") == laptop_cpu


def test_another_laptop_keeps_the_recorded_cpu_until_told_to_replace_it(story):
    other = clone(story["origin"], story["where"] / "other-laptop")
    recorded = raw(other, "cpu")
    out = dvc(other, "repro", hardware=OTHER_LAPTOP)
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
    out = dvc(other, "repro", hardware=OTHER_LAPTOP)
    assert measured_benchmarks(out) == {"cpu"}
    assert results(other, "cpu")["hardware"]["model"] == "Other Laptop CPU"


def test_a_stale_device_measured_elsewhere_is_refused_and_kept(story):
    laptop = clone(story["origin"], story["where"] / "laptop-stale")
    before = {d: raw(laptop, d) for d in ("cpu", "podhost")}
    lock = (laptop / DEVICES / "podhost/dvc.lock").read_text()
    params = laptop / "params.yaml"
    params.write_text(params.read_text().replace("repeats: 2", "repeats: 3"))
    code, out = dvc(laptop, "repro", hardware=LAPTOP, check=False)
    assert code != 0
    assert (
        "podhost: its benchmark stage is stale" in out
        and "measured on Pod CPU (2 cores)" in out
        and "this machine has no podhost" in out
    ), out
    assert "dvc repro -s aggregate plot report" in out
    assert raw(laptop, "podhost") == before["podhost"]
    assert (laptop / DEVICES / "podhost/dvc.lock").read_text() == lock
    # The way out that keeps the recorded results: re-render only.
    dvc(laptop, "repro", "-s", "aggregate", "plot", "report", hardware=LAPTOP)
    assert "podhost" in (laptop / "experiments/x4-roofline/REPORT.md").read_text()
    assert raw(laptop, "podhost") == before["podhost"]


def test_a_clone_that_forgot_to_pull_is_told_to(story):
    bare = clone(story["origin"], story["where"] / "no-pull", pull=False)
    code, out = dvc(bare, "repro", hardware=LAPTOP, check=False)
    assert code != 0 and "run `uv run dvc pull` first" in out
    assert not (bare / DEVICES / "cpu/results.json").exists()


def test_overrides_through_dvc_exp_run(story):
    laptop = clone(story["origin"], story["where"] / "laptop-exp")
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
    git(laptop, "checkout", "params.yaml")
    dvc(laptop, "exp", "run", "-S", "devices.cpu.shapes=[[32,32,32]]", hardware=LAPTOP)
    rows = results(laptop, "cpu")["rows"]
    assert [(r["m"], r["n"], r["k"], r["status"]) for r in rows] == [(32, 32, 32, "measured")]
