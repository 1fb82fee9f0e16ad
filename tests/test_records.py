"""The rules that keep one machine from measuring or overwriting another machine's results."""

import pytest

from roofline.errors import RecordError
from roofline.records import NEVER, fingerprint, measure_or_pend, on_record, probe_decision

LAPTOP = {"model": "Laptop CPU", "logical_cores": 8, "isa": ["avx2"]}
OTHER = {"model": "Other CPU", "logical_cores": 4, "isa": ["avx2"]}
H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "compute_capability": "9.0",
    "sm_count": 132,
    "memory_gib": 79,
}
NEVER_FP = {"device": "dev", "status": NEVER}


def fp(hw):
    return fingerprint("dev", hw, "2.9.0")


def measured(hw):
    return {"device": "dev", "status": "measured", "hardware": hw, "fingerprint": fp(hw)}


def test_the_record_is_the_results_not_a_fingerprint_alone():
    assert on_record("dev", None) == NEVER_FP
    assert on_record("dev", {"device": "dev", "status": "pending", "rows": []}) == NEVER_FP
    assert on_record("dev", measured(H100)) == fp(H100)


def test_probe_records_the_device_when_it_is_here_and_nothing_is_recorded():
    assert probe_decision("dev", NEVER_FP, LAPTOP, fp(LAPTOP))[0] == fp(LAPTOP)


def test_probe_refreshes_the_same_hardware_and_keeps_other_hardware():
    newer = fingerprint("dev", LAPTOP, "2.10.0")
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
    record = on_record("dev", {"device": "dev", "status": "pending", "rows": []})
    assert probe_decision("dev", record, None, None)[0] == NEVER_FP
    assert measure_or_pend("dev", NEVER_FP, None) == "pending"


def test_replace_takes_over_only_from_a_machine_that_has_the_device():
    assert probe_decision("dev", fp(OTHER), LAPTOP, fp(LAPTOP), replace=True)[0] == fp(LAPTOP)
    # On the hardware already on record there is nothing to replace, and it says how to re-measure.
    same, said = probe_decision("dev", fp(LAPTOP), LAPTOP, fp(LAPTOP), replace=True)
    assert same == fp(LAPTOP) and said.startswith("dev: nothing to replace: its results were")
    assert "uv run dvc repro --force experiments/x4-roofline/devices/dev/dvc.yaml" in said
    with pytest.raises(RecordError, match="cannot replace"):
        probe_decision("dev", fp(OTHER), None, None, replace=True)


def test_benchmark_measures_only_the_recorded_hardware_and_pends_the_unmeasured():
    assert measure_or_pend("dev", NEVER_FP, None) == "pending"
    assert measure_or_pend("dev", NEVER_FP, LAPTOP) == "pending"
    assert measure_or_pend("dev", fp(LAPTOP), LAPTOP) == "measure"


@pytest.mark.parametrize("here", [None, OTHER])
def test_benchmark_refuses_a_stale_device_measured_elsewhere(here):
    with pytest.raises(RecordError) as err:
        measure_or_pend("h100", fp(H100), here)
    message = str(err.value)
    assert "h100" in message and "NVIDIA H100 80GB HBM3" in message
    assert "dvc repro -s aggregate plot report" in message
    assert "experiments/x4-roofline/devices/h100/dvc.yaml" in message


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
        on_record("cpu", results)
    assert on_record("cpu", None)["status"] == NEVER
    assert on_record("cpu", {"status": "pending"})["status"] == NEVER
