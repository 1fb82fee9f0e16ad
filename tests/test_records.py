"""The rules that keep one machine from measuring or overwriting another machine's results."""

import pytest

from roofline.errors import RecordError
from roofline.records import NEVER, benchmark_decision, fingerprint, probe_decision

LAPTOP = {"model": "Laptop CPU", "logical_cores": 8, "isa": ["avx2"]}
OTHER = {"model": "Other CPU", "logical_cores": 4, "isa": ["avx2"]}
H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "compute_capability": "9.0",
    "sm_count": 132,
    "memory_gib": 79,
}


def fp(hw):
    return fingerprint("dev", hw, "2.9.0")


def test_probe_records_the_device_when_it_is_here_and_nothing_is_recorded():
    assert probe_decision("dev", None, LAPTOP, fp(LAPTOP))[0] == fp(LAPTOP)
    assert probe_decision("dev", {"status": NEVER}, LAPTOP, fp(LAPTOP))[0] == fp(LAPTOP)


def test_probe_refreshes_the_same_hardware_and_keeps_other_hardware():
    newer = fingerprint("dev", LAPTOP, "2.10.0")
    assert probe_decision("dev", fp(LAPTOP), LAPTOP, newer)[0] == newer
    kept, message = probe_decision("dev", fp(OTHER), LAPTOP, fp(LAPTOP))
    assert kept is None
    assert "Other CPU" in message and "--replace" in message


def test_probe_keeps_or_marks_a_device_that_is_not_here():
    assert probe_decision("dev", fp(H100), None, None)[0] is None
    assert probe_decision("dev", None, None, None)[0] == {"device": "dev", "status": NEVER}
    assert probe_decision("dev", {"device": "dev", "status": NEVER}, None, None)[0] is None


def test_replace_takes_over_only_from_a_machine_that_has_the_device():
    assert probe_decision("dev", fp(OTHER), LAPTOP, fp(LAPTOP), replace=True)[0] == fp(LAPTOP)
    with pytest.raises(RecordError, match="cannot replace"):
        probe_decision("dev", fp(OTHER), None, None, replace=True)


def test_benchmark_measures_only_the_recorded_hardware_and_pends_the_unmeasured():
    assert benchmark_decision("dev", {"status": NEVER}, None) == "pending"
    assert benchmark_decision("dev", {"status": NEVER}, LAPTOP) == "pending"
    assert benchmark_decision("dev", fp(LAPTOP), LAPTOP) == "measure"


@pytest.mark.parametrize("here", [None, OTHER])
def test_benchmark_refuses_a_stale_device_measured_elsewhere(here):
    with pytest.raises(RecordError) as err:
        benchmark_decision("h100", fp(H100), here)
    message = str(err.value)
    assert "h100" in message and "NVIDIA H100 80GB HBM3" in message
    assert "dvc repro -s aggregate plot report" in message
    assert "experiments/x4-roofline/devices/h100/dvc.yaml" in message
