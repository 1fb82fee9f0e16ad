"""Device recognition from recorded hardware descriptions, and the stable fingerprint."""

import json
from pathlib import Path

import pytest

from roofline.core.depends import GPU_VISIBILITY
from roofline.core.errors import HardwareError
from roofline.device import hardware
from roofline.device.hardware import live_hardware
from roofline.machines.identity import find_device, identity, unmatched_gpus
from tests.conftest import H100_POD, LAPTOP, config, device

CPU = device(
    kind="cpu", sku="laptop", recognise={"cpu_model": ".*"}, dtypes=["float32"], shapes=[[8, 8, 8]]
)
H100 = device(
    kind="cuda",
    sku="H100",
    recognise={"gpu_name": "H100 80GB HBM3"},
    peak_tflops={"float16": 989.4},
    dtypes=["float16"],
    shapes=[[8, 8, 8]],
)


def test_cpu_is_here_only_on_machines_without_a_gpu_by_default():
    assert find_device(CPU, LAPTOP) == LAPTOP["cpu"]
    assert find_device(CPU, H100_POD) is None
    host = device(
        kind="cpu",
        sku="pod host",
        recognise={"cpu_model": "EPYC", "with_gpu_present": True},
        dtypes=["float32"],
        shapes=[[8, 8, 8]],
    )
    assert find_device(host, H100_POD) == H100_POD["cpu"]
    assert find_device(host, LAPTOP) is None  # another CPU model


def test_gpu_is_recognised_by_name():
    assert find_device(H100, H100_POD)["sm_count"] == 132
    assert find_device(H100, LAPTOP) is None


def test_identity_keeps_only_stable_fields():
    assert identity("cpu", LAPTOP["cpu"]) == {
        "model": "Laptop CPU i5",
        "logical_cores": 2,
        "isa": ["avx2", "avx512f", "fma"],
    }
    gpu = dict(H100_POD["gpus"][0], driver="550.1", max_sm_clock_mhz=1980, power_limit_w=700)
    assert identity("cuda", gpu) == {
        "name": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0",
        "sm_count": 132,
        "memory_gib": 85,
    }


def test_gpus_no_device_file_matches_are_reported():
    pod = {"cpu": H100_POD["cpu"], "gpus": [dict(H100_POD["gpus"][0], name="NVIDIA L40S")]}
    assert [g["name"] for g in unmatched_gpus(config({"h100": H100}).devices, pod)] == [
        "NVIDIA L40S"
    ]
    assert unmatched_gpus(config({"h100": H100}).devices, H100_POD) == []


def test_a_described_machine_replaces_the_live_one(tmp_path, monkeypatch):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(H100_POD))
    monkeypatch.setenv(hardware.HARDWARE_ENV, str(path))
    live = live_hardware()
    assert live["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3" and live["described_by"] == str(path)


def without(part: dict, key: str) -> dict:
    return {k: v for k, v in part.items() if k != key}


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", "cannot read it as JSON"),
        (json.dumps({"cpu": {}}), 'needs {"cpu": {"model": ...'),
        (json.dumps([H100_POD]), "a list; allowed: {"),
        (json.dumps({**H100_POD, "cpu": without(H100_POD["cpu"], "model")}), "cpu.model=None"),
        (
            json.dumps({**H100_POD, "cpu": without(H100_POD["cpu"], "memory_bytes")}),
            "cpu.memory_bytes=None; allowed: a positive integer",
        ),
        (
            json.dumps({**H100_POD, "gpus": [without(H100_POD["gpus"][0], "sm_count")]}),
            "gpus[0].sm_count=None",
        ),
    ],
)
def test_a_bad_description_is_refused_naming_what_is_wrong(tmp_path, monkeypatch, content, said):
    path = tmp_path / "bad.json"
    path.write_text(content)
    monkeypatch.setenv(hardware.HARDWARE_ENV, str(path))
    with pytest.raises(HardwareError) as err:
        live_hardware()
    assert "bad.json" in str(err.value) and said in str(err.value)


def cpu_with(**parts) -> str:
    return json.dumps({**H100_POD, "cpu": {**H100_POD["cpu"], **parts}})


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (
            cpu_with(physical_cores=-2),
            "cpu.physical_cores=-2; allowed: a positive integer, at most",
        ),
        (
            cpu_with(physical_cores=64),
            "cpu.physical_cores=64; allowed: a positive integer, at most",
        ),
        (
            cpu_with(caches=[{"level": "L3", "size_bytes": "abc", "shared_by": 1}]),
            "cpu.caches[0].size_bytes='abc'; allowed: a positive integer",
        ),
        (
            cpu_with(caches=[{"level": "L3", "size_bytes": 0, "shared_by": 1}]),
            "cpu.caches[0].size_bytes=0",
        ),
        (
            cpu_with(caches=[{"level": "L3", "size_bytes": 1 << 20, "shared_by": 0}]),
            "cpu.caches[0].shared_by=0; allowed: a positive integer, at most logical_cores",
        ),
        (
            cpu_with(caches=[{"level": "L4", "size_bytes": 1 << 20, "shared_by": 1}]),
            "cpu.caches[0].level='L4'; allowed: L1, L2, L3",
        ),
        (cpu_with(caches="big"), "cpu.caches='big'; allowed: a list of cache levels"),
        (cpu_with(cache_bytes=-1), "cpu.cache_bytes=-1; allowed: a positive integer"),
        (cpu_with(isa=[1, 2]), "cpu.isa=[1, 2]; allowed: a list of CPU flags"),
    ],
)
def test_a_described_cpu_whose_cores_or_caches_cannot_be_is_refused_before_measuring(
    tmp_path, monkeypatch, content, said
):
    path = tmp_path / "bad.json"
    path.write_text(content)
    monkeypatch.setenv(hardware.HARDWARE_ENV, str(path))
    with pytest.raises(HardwareError) as err:
        live_hardware()
    assert said in str(err.value)


@pytest.mark.posix  # /dev/zero and mkfifo
def test_a_description_that_is_not_a_small_regular_file_is_refused_without_reading_it(
    tmp_path, monkeypatch
):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # read, it would wait for a writer for ever
    big = tmp_path / "big.json"
    big.write_text(" " * (hardware.DESCRIPTION_MAX_BYTES + 1))
    for path, said in (
        ("/dev/zero", "not a regular file"),  # read, it never ends
        (str(fifo), "not a regular file"),
        (str(big), "allowed: a JSON description of at most 1,048,576"),
    ):
        monkeypatch.setenv(hardware.HARDWARE_ENV, path)
        with pytest.raises(HardwareError, match=said):
            live_hardware()


@pytest.mark.parametrize(
    "cached",
    [
        [],
        {"for": "KEY", "hardware": []},
        {"for": "KEY", "hardware": {"cpu": "a CPU", "gpus": []}},
        {"for": "KEY", "hardware": {"cpu": without(LAPTOP["cpu"], "isa"), "gpus": []}},
    ],
)
def test_a_malformed_boot_cache_is_probed_again_with_a_note(tmp_path, monkeypatch, capsys, cached):
    monkeypatch.delenv(hardware.HARDWARE_ENV, raising=False)
    monkeypatch.setattr(hardware, "gpu_info", lambda: [])
    cache = tmp_path / "hardware.json"
    if isinstance(cached, dict):
        cached = {**cached, "for": hardware.boot()}  # this boot's: only its content is wrong
    cache.write_text(json.dumps(cached))
    found = live_hardware(cache)
    assert found["cpu"]["isa"] is not None and found["cpu"]["model"] != LAPTOP["cpu"]["model"]
    assert f"{cache}: not a description this lab reads (" in capsys.readouterr().err
    assert live_hardware(cache) == found and not capsys.readouterr().err  # kept, whole


def test_this_machine_is_described_without_a_gpu():
    live = hardware.cpu_info()
    assert live["logical_cores"] >= 1 and live["memory_bytes"] > 0 and live["model"]
    # Its cache levels, read once by the probe: the largest is the one buffer rotation uses.
    assert live["caches"] and live["caches_from"] in ("sysfs", "py-cpuinfo")
    assert live["cache_bytes"] == max(level["size_bytes"] for level in live["caches"])


def test_a_boot_cache_an_older_lab_wrote_is_probed_again(tmp_path, monkeypatch):
    monkeypatch.delenv(hardware.HARDWARE_ENV, raising=False)
    monkeypatch.setattr(hardware, "gpu_info", lambda: [])
    older = {k: v for k, v in hardware.boot().items() if k != "description"}
    cache = tmp_path / "hardware.json"
    stale = {"cpu": {k: v for k, v in LAPTOP["cpu"].items() if k != "caches"}, "gpus": []}
    cache.write_text(json.dumps({"for": older, "hardware": stale}))
    found = live_hardware(cache)
    assert found["cpu"]["model"] != LAPTOP["cpu"]["model"] and found["cpu"]["caches"]
    assert live_hardware(cache) == found  # ...and kept for the rest of this boot


def test_only_named_environment_variables_are_recorded(monkeypatch):
    from roofline.measuring.provenance import environment

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("ROOFLINE_HARDWARE", "/home/alice/pod.json")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    recorded = environment()
    assert recorded["OMP_NUM_THREADS"] == "4" and recorded["ROOFLINE_HARDWARE"] == "pod.json"
    assert "AWS_SECRET_ACCESS_KEY" not in recorded and "alice" not in str(recorded)


@pytest.mark.parametrize("variable", GPU_VISIBILITY)
def test_each_variable_that_renumbers_the_gpus_keys_the_boot_cache(monkeypatch, variable):
    for name in GPU_VISIBILITY:
        monkeypatch.delenv(name, raising=False)
    before = hardware.boot()
    monkeypatch.setenv(variable, "1")
    assert hardware.boot() != before  # a node's GPUs are probed again, not read as they were


def test_a_probe_cache_whose_words_are_malformed_is_decided_afresh(tmp_path, monkeypatch, capsys):
    from stages import probe

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dvc/tmp").mkdir(parents=True)
    before = probe.inputs(["cpu"], [])
    probe.keep(["cpu"], [], before, ["cpu: here"])
    assert probe.answered_from_cache() and capsys.readouterr().out == "cpu: here\n"
    kept = json.loads(probe.PROBE_CACHE.read_text())
    for said in ("cpu: here", [1, 2], None):  # a string would be said a letter a line
        probe.PROBE_CACHE.write_text(json.dumps({**kept, "said": said}))
        assert not probe.answered_from_cache() and capsys.readouterr().out == ""


@pytest.mark.parametrize("system", ["Darwin", "Windows"])
def test_the_boot_key_on_a_mac_and_a_windows_pc(monkeypatch, system):
    # No /proc there: the boot is psutil's boot time. No sched_getaffinity either: Windows'
    # affinity (`start /affinity`, as `taskset` on Linux) is psutil's; a Mac sets none.
    import psutil

    from roofline.device import timing

    real_read = Path.read_text

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc"):
            raise FileNotFoundError(path)
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", no_proc)
    monkeypatch.setattr(timing, "our_cpus", lambda: None)
    monkeypatch.setattr(hardware, "QUOTA_FILES", ())
    monkeypatch.setattr(psutil, "boot_time", lambda: 1_700_000_000.0)
    affinity = [0, 1, 2, 3]

    class Process:
        if system == "Windows":

            def cpu_affinity(self):
                return affinity

    monkeypatch.setattr(psutil, "Process", Process)
    key = hardware.boot()
    assert key["boot"] == 1_700_000_000.0 and key["cpu_quota"] == []
    assert key["cpus"] == ([0, 1, 2, 3] if system == "Windows" else [])
    affinity = [0]  # fewer CPUs allowed: probed again on Windows; a Mac cannot say
    assert (hardware.boot() != key) == (system == "Windows")
