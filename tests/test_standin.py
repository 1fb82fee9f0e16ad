"""The GPU path end to end on the CUDA stand-in (tests/fakes/cuda): torch.cuda and NVML played
on this CPU through the seam a real GPU uses (roofline.device.kinds). Real subprocesses (`dvc
repro`,
`scripts/gpu-check`) get it from PYTHONPATH; the rest install it in this process (`played`)."""

import csv
import dataclasses
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

from roofline import gpu_suite
from roofline.device import kinds
from roofline.device.hardware import gpu_info
from roofline.device.timing import BenchSettings
from roofline.measuring.knobs import Settings, measure_knobs
from roofline.measuring.measure import gpu_target, measure_point
from tests.conftest import counted
from tests.golden import HOPPER_GPM
from tests.machines import (
    ROOT,
    STAND_IN,
    clone,
    compose,
    dvc,
    gpu_check,
    make_project,
    results,
    run,
)

BENCH = BenchSettings(
    seed=0, warmup=1, warmup_seconds=0.0, repeats=3, check_rows=8, min_seconds=0.0
)
KNOBS = SimpleNamespace(
    cuda=SimpleNamespace(shape=[64] * 3, small_shape=[32] * 3, l2_shape=[512, 32, 256])
)
SETTINGS = Settings(
    BenchSettings(seed=0, warmup=1, check_rows=8, min_seconds=0.01, warmup_seconds=0.0), rounds=2
)


def point(dtype="float32", shape=(64, 64, 64), bench=BENCH):
    """One point measured on the played GPU, as the benchmark measures it."""
    gpu = gpu_info()[0]
    return measure_point("h100", dtype, list(shape), gpu_target(gpu, print), bench, gpu)


def test_a_window_of_a_second_or_more_has_its_power_from_the_stepping_energy_counter(played):
    played("h100")
    # A shape whose played calls take milliseconds: few calls fill the window.
    measured = point(shape=(512, 512, 512), bench=dataclasses.replace(BENCH, min_seconds=1.2))
    assert measured.window_s >= 1.2 and measured.power_source == "energy counter"
    # The played counter moves every 100 ms, as the slowest real one: within 10% over 1.2 s.
    assert measured.power_w == pytest.approx(690, rel=0.1)
    assert measured.energy_j == pytest.approx(measured.power_w * measured.window_s, rel=0.05)


# The pod story: a played pod rented as "H100" has a PCIe card; it measures h100, its record is
# what the launcher takes back, and it is rendered against the PCIe datasheet.


@pytest.mark.slow
def test_a_pcie_card_rented_for_h100_is_measured_as_h100_and_judged_as_pcie(tmp_path):
    from roofline.machines.handback import handback_problem

    origin = make_project(tmp_path, podhost=False)
    pod = clone(origin, tmp_path / "pod", pull=False)
    # Each point timed over a window of a second, long enough for the GPU's own counters: the
    # played card's GEMMs take 10 ms on its device clock, so the window is about 100 calls
    # (the call cap does not cut it), and the host waits them out as a real one does. Its copy
    # fills its second with 64 MiB copies: a few hundred calls, where 4 MiB took thousands, each
    # paying the played dispatch's host time (13 s when .ci/run traced the played processes).
    config = pod / "conf/config.yaml"
    cfg = yaml.safe_load(config.read_text())
    cfg["bench"]["min_seconds"], cfg["bench"]["copy_mib"] = 1.0, 64
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    compose(pod)
    played = {"PYTHONPATH": str(STAND_IN), "PLAYED_MACHINE": "h100_pcie", "ROOFLINE_HARDWARE": None}
    out = dvc(pod, "repro", env=played)
    record = results(pod, "h100")
    assert record["status"] == "measured", out
    assert record["found"]["name"] == "NVIDIA H100 PCIe" and record["found"]["sm_count"] == 114
    assert record["found"]["power_limit_w"] == 350.0 and record["found"]["driver"] == "580.65.06"
    assert results(pod, "cpu")["status"] == "pending"  # a GPU box's host CPU is not the laptop
    assert [row["dtype"] for row in record["rows"]] == ["float16", "float32"]
    for row in record["rows"]:
        assert row["status"] == "measured"
        assert row["timing"].startswith(("cuda events", "CUDA graph of")), row["timing"]
        assert row["window_s"] >= 1.0 and row["power_source"] == "energy counter"
        assert row["sm_clock_mhz"] == 1620 and row["power_w"] == pytest.approx(340, rel=0.1)
        assert row["other_processes"] == "" and row["telemetry_errors"] == ""
        # The time the driver held the clock for power (its software cap), none for heat.
        assert row["power_held_s"] > 0 and row["thermal_held_s"] == 0
        # GPM read at the window's two ends: every metric the played Hopper cards answer.
        assert row["counter_errors"] == ""
        # float32 at "highest" precision runs on the CUDA cores: its tensor pipes read idle.
        gpm = {key: value for key, value in row.items() if key.startswith("gpm_")}
        idle = {"gpm_tensor_active_pct": 0.0, "gpm_hmma_active_pct": 0.0}
        assert gpm == (HOPPER_GPM | idle if row["dtype"] == "float32" else HOPPER_GPM)
    # The breakdown's sides at the lab kernel: on constant inputs the played card runs at its
    # 1755 MHz maximum, the same cycles in 1620/1755 of the time. Both clocks are at or above
    # the 1620 MHz its peak assumes, so the data's power costs none of the gap to that peak.
    steps = record["gpu_steps"]
    clocks = {side: set(read) for side, read in steps["sm_clock_mhz"].items()}
    assert clocks == {"random": {1620}, "constant": {1755}, "graph": {1620}}
    with (pod / "experiments/x4-roofline/breakdown.csv").open() as table:
        (data,) = [r for r in csv.DictReader(table) if r["step"] == "data_power"]
    assert data["device"] == "h100" and float(data["factor"]) == 1.0
    assert "random inputs reached" in data["note"] and "costs nothing here" in data["note"]
    # What `roofline.cloud h100` fetches from the pod, it hands back.
    device = pod / "experiments/x4-roofline/devices/h100"
    lock, measured = (device / "dvc.lock").read_text(), (device / "results.json").read_bytes()
    assert handback_problem("h100", lock, measured) is None
    # Its own repro rendered what it measured, as a laptop that pulls the record renders it (the
    # same record and conf in, the same pages out; the pull itself: tests/test_pipeline.py).
    with (pod / "experiments/x4-roofline/results.csv").open() as table:
        rows = list(csv.DictReader(table))
    h100 = [r for r in rows if r["device"] == "h100" and r["dtype"] == "float16"]
    assert h100 and h100[0]["status"] == "measured" and h100[0]["sku"] == "H100 PCIe 80GB"
    assert float(h100[0]["peak_tflops"]) == 756.5  # the PCIe line's, not the SXM5's 989.4
    assert float(h100[0]["mfu"]) == pytest.approx(float(h100[0]["achieved_tflops"]) / 756.5)
    report = (pod / "experiments/x4-roofline/REPORT.md").read_text()
    assert "| h100 | H100 PCIe 80GB | float16 |" in report
    # Its largest loss named from the counters, with the tensor pipes' figure.
    assert (
        "The kernel's issue efficiency costs 98% of the gap: the kernel reaches 0% of what "
        in report
    )
    assert "the tensor pipes' active cycles allow at full rate" in report
    # No knob measured (knobs=none), and its float32 no faster (both played GEMMs take 10 ms):
    # its paragraph says what to measure next, so the item stays open.
    assert "Next knob: not measured yet" in report
    assert "0 of 1 (h100: no knob measured)" in report
    assert "no band for this SKU (the lab's is H100 SXM5 80GB's)" in report
    assert "The lab's band and done threshold were written for H100 SXM5 80GB" in report
    assert "h100 float16 ≥ 600 TFLOP/s (written for the H100 SXM5 80GB)" in report  # not met
    extra = (pod / "experiments/x4-roofline/REPORT-appendix.md").read_text()
    assert "### h100: H100 PCIe 80GB (NVIDIA H100 PCIe" in extra
    assert "the lab's sanity band" not in extra  # written for the SXM5, not applied here


# scripts/gpu-check end to end, as a user runs it on a pod.


def played_machine(where, **changes) -> str:
    """A machine file for $PLAYED_MACHINE: the played small-L2 H100 with `changes`."""
    path = where / "machine.json"
    path.write_text(json.dumps({"like": "small_l2", **changes}))
    return str(path)


SMALL = [
    *("--size", "64", "--min-seconds", "0.01", "--warmup-seconds", "0.01"),
    *("--copy-mib", "16", "--knob-seconds", "0.1"),  # 1 GiB copied is this CPU's memcpy: 6 s
]


@pytest.mark.posix
@pytest.mark.slow
def test_gpu_check_runs_the_cuda_tests_and_the_suite_and_writes_every_row(tmp_path):
    out_dir = tmp_path / "check"
    code, out = gpu_check(out_dir, played_machine(tmp_path), *SMALL)
    assert code == 0, out
    assert "gpu-check: CUDA tests exit 0, GPU suite exit 0" in out
    assert "copy 16 MiB device-to-device" in out  # --copy-mib, passed on to the suite
    # One process: GPU timings must not share the GPU, and a bare image has no pytest-xdist.
    assert "bringing up nodes" not in (out_dir / "cuda-tests.log").read_text()
    (suite,) = json.loads((out_dir / "gpu-suite.json").read_text())
    assert {r["dtype"]: r["status"] for r in suite["rows"]} == dict.fromkeys(
        ("float32", "tf32", "float16", "bfloat16", "float8_e4m3fn"), "measured"
    )
    knobs = {k["knob"]: k for k in suite["knobs"]}
    assert len(knobs) == 8
    assert knobs["cuBLASLt -> TunableOp"]["variant"].startswith("TunableOp's search of 'Default'")
    # The lab's residency shape (16.6 MiB) does not fit twice in this played 1 MiB L2.
    assert "does not fit twice" in knobs["rotated -> L2-resident"]["reason"]
    measured = [k for k in knobs if "L2" not in k]
    assert all(knobs[k]["status"] == "measured" for k in measured), knobs
    # The breakdown's sides, as the pipeline measures them: the played H100's quiet clock on
    # constant inputs, its power cap's on random ones and in the graph's replays.
    steps = suite["gpu_steps"]
    assert set(steps["sides_s"]) == {"random", "constant", "graph"} and "reason" not in steps
    clocks = {side: set(read) for side, read in steps["sm_clock_mhz"].items()}
    assert clocks == {"random": {1755}, "constant": {1980}, "graph": {1755}}
    assert "breakdown sides: float16 at " in out and "random / constant " in out
    timing = suite["timing_check"]
    assert timing["harness_s"] > 0 and timing["bare_loop_s"] > 0
    assert 0 < timing["bare_loop_peak_bytes"] < 2 << 20  # the operands, one output at a time
    assert "bare loop's peak memory" in out
    assert timing["do_bench_s"].startswith("absent")  # no triton driver on the stand-in
    assert "triton do_bench" in out and "bare loop, 2 events" in out and "harness/this" in out
    # The counters' line per dtype: these windows are meant to be too short for GPM, and say
    # so; one a busy host (two busy loops) stretched past a second was read, as the rule says.
    assert "the GPU's own counters over each window (NVML GPM):" in out
    (fp16,) = [r for r in suite["rows"] if r["dtype"] == "float16"]
    unread = "float16       not compared: GPM: not read over a window under 1 s" in out
    compared = "float16       tensor pipes active " in out
    assert unread != compared, out
    if fp16["window_s"] < 0.9:
        assert unread, fp16["window_s"]
    elif fp16["window_s"] > 1.1:
        assert compared, fp16["window_s"]


def test_a_copy_buffer_of_no_mib_is_refused_before_any_gpu_is_looked_for(capsys):
    from roofline.gpu_suite import main

    with pytest.raises(SystemExit) as stopped:
        main(["--copy-mib", "0"])
    assert stopped.value.code == 2
    assert "--copy-mib 0: allowed: a whole number of MiB, 1 or more" in capsys.readouterr().err


def test_a_dtype_whose_call_raises_is_a_failed_row_and_the_suite_writes_the_rest(tmp_path):
    refusal = "CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul (played)"
    out = tmp_path / "suite.json"
    code, said = run(
        ROOT,
        sys.executable,
        "-m",
        "roofline.gpu_suite",
        "--no-knobs",
        "--out",
        str(out),
        *SMALL,
        env={
            "PYTHONPATH": str(STAND_IN),
            "PLAYED_MACHINE": played_machine(tmp_path, float8_raises=refusal),
        },
        check=False,
    )
    assert code == 0, said
    (suite,) = json.loads(out.read_text())
    rows = {r["dtype"]: r for r in suite["rows"]}
    assert rows["float8_e4m3fn"]["status"] == "failed"
    assert rows["float8_e4m3fn"]["reason"] == f"the call raised: RuntimeError: {refusal}"
    assert {d: r["status"] for d, r in rows.items() if d != "float8_e4m3fn"} == dict.fromkeys(
        ("float32", "tf32", "float16", "bfloat16"), "measured"
    )


def test_no_knobs_is_honoured_and_the_suite_writes_its_json(played, tmp_path, capsys):
    played("small_l2")  # few operand sets: its graphs replay quickly
    out = tmp_path / "suite.json"
    small = ["--size", "32", "--min-seconds", "0", "--warmup-seconds", "0", "--copy-mib", "1"]
    gpu_suite.main(["--no-knobs", *small, "--out", str(out)])
    (suite,) = json.loads(out.read_text())
    assert suite["knobs"] == [] and len(suite["rows"]) == 5
    assert "knobs (gain" not in capsys.readouterr().out


def test_a_dtype_whose_call_raises_is_a_failed_row_and_the_rest_is_measured(played):
    played("small_l2", float8_raises="CUDA error: operation not supported (played)")
    failed = point("float8_e4m3fn")
    assert failed.status == "failed" and failed.samples_s == []
    assert (
        failed.reason
        == "the call raised: RuntimeError: CUDA error: operation not supported (played)"
    )
    assert point("float16").status == "measured"


# Hosts: a gVisor-like sandbox, a box of two GPUs, a MIG slice, an image without NVML.


def test_on_a_gvisor_like_host_the_labs_own_process_is_not_another(played):
    played("gvisor")
    measured = point()
    assert measured.status == "measured"
    assert measured.other_processes == ""  # NVML listed this process under a host PID
    assert measured.power_source.startswith("mean of the power readings")
    assert measured.energy_j is None and measured.power_w == pytest.approx(690)
    row = dataclasses.asdict(measured)
    assert "shared" not in json.dumps(row)


def test_a_shared_gpu_names_the_other_process(played):
    played("shared")
    measured = point()
    assert measured.other_processes == "pid 4242 python3 train.py, 30.0 GiB"


def test_a_two_gpu_box_measures_the_gpu_asked_for_and_reads_its_limits(played, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    state = played("two_gpus")
    (gpu,) = gpu_info()
    assert gpu["index"] == 0 and gpu["name"] == "NVIDIA H100 PCIe"
    assert gpu["power_limit_w"] == 350.0 and gpu["max_sm_clock_mhz"] == 1755  # not GPU 0's
    measured = point()
    assert measured.sm_clock_mhz == 1620 and measured.power_w == 340
    assert state.contexts == {1}


def test_a_mig_slice_is_read_as_one_and_says_whose_limits_it_shares(played):
    played("mig")
    (gpu,) = gpu_info()
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB MIG 3g.40gb" and gpu["sm_count"] == 42
    assert gpu["mig_parent"] == "NVIDIA A100-SXM4-80GB" and gpu["power_limit_w"] == 400.0
    name, dev = gpu_suite.match(gpu, gpu_suite.device_files(ROOT / "conf/device"))
    assert name == "a100" and dev["peak_tflops"] == {}  # an A100's, but no datasheet fits a slice
    assert "a MIG slice" in dev["missing"]


def test_a_uuid_nvml_does_not_know_leaves_telemetry_out_rather_than_reading_another_gpu(played):
    played("h100")
    kind = kinds.Cuda(0, "no-such-uuid")
    assert kind.monitor() is None and "NVML has no GPU or MIG slice" in kind.telemetry_error


def test_without_nvidia_ml_py_the_gpus_torch_sees_are_still_found(played, monkeypatch):
    played("h100")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    (gpu,) = gpu_info()
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and "nvml_error" in gpu


# Knobs on the played GPU.


def knobs():
    """Every GPU knob on the played GPU, by name; and TunableOp's results."""
    gpu = gpu_info()[0]
    rows, tuning = measure_knobs("h100", gpu_target(gpu, print), gpu, KNOBS, SETTINGS, print)
    return {r["knob"]: r for r in rows}, tuning


def test_tunableop_on_the_played_h100_is_measured_and_says_what_it_searched_and_picked(
    played, monkeypatch
):
    # torch 2.15 offers cuBLASLt's heuristic candidates beside "Default" on CUDA: when
    # "Default" wins, the knob is still measured (it was skipped, and before that it raised
    # on write_file_on_exit, which torch 2.15 does not have).
    state = played("small_l2")
    import roofline.measuring.knob_sides

    checked_with = []
    prepare = roofline.measuring.knob_sides.prepare_matmul

    def spy(*args, **kwargs):
        checked_with.append(state.tunable["enabled"])
        return prepare(*args, **kwargs)

    monkeypatch.setattr(roofline.measuring.knob_sides, "prepare_matmul", spy)
    rows, tuning = knobs()
    tunable = rows["cuBLASLt -> TunableOp"]
    assert tunable["status"] == "measured", tunable["reason"]
    assert tunable["variant"] == (
        "TunableOp's search of 'Default' and up to 8 cuBLASLt heuristic candidates, "
        "which picked Default"
    )
    assert True in checked_with  # the tuned side was checked with TunableOp on
    assert "GemmTunableOp_Half_NN,nn_64_64,Default" in tuning  # appended as it was found
    assert state.tunable["enabled"] is False and state.tunable["tuning"] is False


def test_tunableop_says_which_solution_its_search_picked(played):
    played("small_l2", tunable_winner="Gemm_Cublaslt_played_3")
    rows, _ = knobs()
    assert rows["cuBLASLt -> TunableOp"]["variant"].endswith("which picked Gemm_Cublaslt_played_3")


def test_tunableop_is_skipped_with_its_count_where_the_build_offers_one_solution(
    played, monkeypatch
):
    import torch

    played("small_l2")  # a torch before the cuBLASLt candidates: cuBLAS's own call only
    monkeypatch.delattr(torch.cuda.tunable, "get_cublaslt_requested_algo_count")
    rows, _ = knobs()
    tunable = rows["cuBLASLt -> TunableOp"]
    assert tunable["status"] == "skipped"
    assert tunable["reason"] == (
        "TunableOp offers 1 solution on this build ('Default' (cuBLAS's own call) only): "
        "nothing to tune"
    )


def test_the_residency_knob_replays_both_sides_from_graphs_captured_on_their_stream(played):
    state = played("small_l2")
    rows, _ = knobs()
    residency = rows["rotated -> L2-resident"]
    assert residency["status"] == "measured", residency["reason"]
    assert residency["baseline"].startswith("rotated over ") and residency["variant"] == (
        "resident in L2"
    )
    # Every graph (eager -> graph, both residency sides) captured on a stream of its own,
    # which its calls warmed up first (the stand-in refuses a capture that was not).
    assert len(state.captured_on) == 3 and len({id(s) for s in state.captured_on}) == 3


def test_a_call_under_the_graph_threshold_is_also_timed_from_a_graph_and_the_faster_kept(
    played, monkeypatch
):
    from roofline.measuring import matmul

    state = played("h100")
    monkeypatch.setattr(matmul, "GRAPH_BELOW_S", 1e9)  # every call counts as short here
    cuda = kinds.Cuda(0, gpu_info()[0]["uuid"])
    point = matmul.measure_matmul(
        64, 64, 64, "float32", cuda, counted(1, 5, check_rows=8), cache_bytes=None
    )
    assert len(state.captured_on) == 1  # a graph was captured and replayed
    if point.timing.startswith("CUDA graph of "):
        assert point.buffer_sets >= 1 and len(point.samples) >= 5
    else:
        assert point.timing == "cuda events, calls back to back (a CUDA graph was not faster)"
    monkeypatch.setattr(matmul, "GRAPH_BELOW_S", 0.0)  # and no call counts as short
    point = matmul.measure_matmul(
        64, 64, 64, "float32", cuda, counted(1, 5, check_rows=8), cache_bytes=None
    )
    assert point.timing == "cuda events, calls back to back" and len(state.captured_on) == 1


def test_the_labs_residency_shape_is_memory_bound_and_fits_in_every_l2():
    import yaml

    from roofline.core.arithmetic import intensity, matmul_bytes, matmul_flops

    shape = yaml.safe_load((ROOT / "conf/knobs/lab.yaml").read_text())["cuda"]["l2_shape"]
    flops, nbytes = matmul_flops(*shape), matmul_bytes(*shape, "float16")
    for dev in gpu_suite.device_files(ROOT / "conf/device").values():
        if dev["kind"] != "cuda":
            continue
        for sku in dev["skus"].values():
            ridge = sku["peak_tflops"]["float16"] * 1e12 / (sku["memory_bandwidth_gbps"] * 1e9)
            assert intensity(flops, nbytes) < ridge / 4, sku["name"]
    assert 2 * nbytes < 40e6  # twice in the smallest L2 rented (A100 40 MB)


def test_the_labs_bench_matmul_on_the_played_gpu(played):
    from roofline.lab import bench_matmul

    played("small_l2")  # few operand sets: quick on this CPU
    tflops, gbps = bench_matmul(64, 64, 64, device="cuda", warmup=1, iters=3)
    assert tflops > 0 and gbps == pytest.approx(tflops * 1e3 / (64 / 3))  # FLOPs / intensity


def test_a_device_kind_without_graphs_or_tunableop_says_so():
    cpu = kinds.make("cpu")
    assert cpu.tensors() == "cpu" and cpu.monitor() is None and cpu.tuned_solutions() == []
    with pytest.raises(kinds.Unavailable, match="cpu has no CUDA graphs"):
        cpu.graph(lambda i: None, 1)
    with pytest.raises(kinds.Unavailable, match="cpu has no TunableOp"):
        cpu.tunable(True, None)


def test_the_stand_in_plays_in_a_subprocess_from_pythonpath():
    code = (  # torch's spec found first, as the probe finds torch's version, then imported
        "import importlib.util; importlib.util.find_spec('torch'); "
        "import torch, roofline.device.kinds as k, roofline.device.hardware as h; g = h.gpu_info()[0]; "
        "c = k.Cuda(0, g['uuid']); print(torch.cuda.get_device_name(0), c.tensors(), c.own_pids)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={
            "PYTHONPATH": os.pathsep.join([str(STAND_IN), str(ROOT)]),
            "PLAYED_MACHINE": "gvisor",
            "PATH": "/usr/bin",
        },
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("NVIDIA H100 80GB HBM3 cpu {")  # its own, under a host PID


@pytest.mark.slow
def test_the_first_gpu_script_answers_each_question_on_the_bare_image(tmp_path):
    # The played H100 on the bare image: float32 leaves its tensor pipes idle, GPM is read,
    # random inputs hold its clock at the power cap and constant ones at its maximum. Run as
    # docs/gpu-check.md tells a Windows PC to (no bash): scripts/first-gpu only adds `timeout`
    # to this command (tests/test_gpu_steps.py runs the script itself, with and without it).
    env = {"PYTHONPATH": str(STAND_IN), "PLAYED_MACHINE": "small_l2", "ROOFLINE_HARDWARE": None}
    env |= {"PLAYED_BARE": "1"}
    out_file = tmp_path / "first-gpu.json"
    small = ("--size", "256", "--small", "32", "--seconds", "1.05", "--out", str(out_file))
    first_gpu = (sys.executable, "-m", "roofline.first_gpu")
    code, out = run(ROOT, *first_gpu, *small, env=env, check=False)
    assert code == 0, out
    answers = {a["question"].split(".")[0]: a for a in json.loads(out_file.read_text())}
    assert sorted(answers) == ["1", "2", "3", "4"]  # no AMD question on an NVIDIA GPU
    assert answers["1"]["answer"].startswith("0.0% at 1755 MHz")
    assert answers["2"]["answer"] == "yes"
    assert "with TEARDOWN_CUPTI=1 " in answers["3"]["answer"]
    assert "(1755 MHz, 690 W); constant " in answers["4"]["answer"]
    assert "(1980 MHz, 560 W)" in answers["4"]["answer"]
    assert answers["4"]["means"].startswith("random inputs held the clock lower")
