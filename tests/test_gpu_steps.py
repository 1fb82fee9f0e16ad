"""A GPU's breakdown sides, measured in every run at the lab kernel: random against constant
inputs (the data's power) and eager against a CUDA graph (launches), played through the CUDA
stand-in; and the steps they make, worked by hand."""

import json
import math

import pytest

from roofline.device.hardware import gpu_info
from roofline.device.timing import BenchSettings
from roofline.interpretation.aggregate import gpu_steps
from roofline.interpretation.breakdown import breakdown
from roofline.interpretation.ceilings import Ceiling
from roofline.interpretation.manifest import GpuSteps, SideFigure
from roofline.interpretation.steps import StepId, gap_shares
from roofline.measuring import gpu_steps as steps
from roofline.measuring.matmul import WrongResult
from roofline.measuring.measure import gpu_target, measure_point, name_kernels
from tests.fakes.cuda.played_cuda import SM90_KERNELS
from tests.test_ceilings import h100_head

BENCH = BenchSettings(seed=0, warmup=1, check_rows=8, min_seconds=0.03, warmup_seconds=0.0)
ITSELF = Ceiling(700.0, (8192, 8192, 8192), "lab", "torch")


def test_the_sides_are_interleaved_with_each_sides_clock_and_power(played):
    # The played H100 PCIe: its GEMMs take 10 ms on its device clock at 1620 MHz, held by its
    # power cap at 340 W; on constant inputs 1755 MHz at 290 W, the same cycles in less time.
    played("h100_pcie")
    (gpu,) = gpu_info()
    target = gpu_target(gpu, print)
    head = measure_point("h100", "float16", [64] * 3, target, BENCH, gpu)
    record = steps.measure_gpu_steps(target, [head], BENCH)
    assert "reason" not in record, record.get("reason")
    assert (record["dtype"], record["shape"], record["gpu"]) == ("float16", [64] * 3, 0)
    assert set(record["sides_s"]) == set(steps.GPU_SIDES) and not record["unmeasured"]
    for side, rounds in record["sides_s"].items():
        assert len(rounds) == steps.ROUNDS and all(r and min(r) > 0 for r in rounds), side
    figures = gpu_steps(record)
    assert figures.sm_clock_mhz == {"random": 1620, "constant": 1755, "graph": 1620}
    # Power from the energy counter, which moves in steps: the played watts within a step.
    assert figures.power_w == pytest.approx({"random": 340, "constant": 290, "graph": 340}, 0.05)
    # On the device's own clock: constant inputs run 1755/1620 as fast, a graph as fast.
    assert figures.constant.tflops / figures.random.tflops == pytest.approx(1755 / 1620)
    assert figures.graph.tflops == pytest.approx(figures.random.tflops)
    assert figures.random.spread == pytest.approx(0.0, abs=1e-9)
    line = steps.describe_gpu_steps(record)
    assert line.startswith("float16 at 64x64x64: random ") and "(1755 MHz, " in line
    assert line.endswith("random / constant 0.923x; random / graph 1.000x")


def test_a_graph_that_cannot_be_captured_leaves_the_datas_pair_measured(played, monkeypatch):
    played("h100_pcie")
    (gpu,) = gpu_info()
    target = gpu_target(gpu, print)

    def refuse(call, sets):
        raise RuntimeError("CUDA error: operation not supported (played)")

    monkeypatch.setattr(target.kind, "graph", refuse)
    head = measure_point("h100", "float16", [64] * 3, target, BENCH, gpu)
    record = steps.measure_gpu_steps(target, [head], BENCH)
    assert set(record["sides_s"]) == {"random", "constant"}
    assert record["unmeasured"] == {
        "graph": "no CUDA graph: RuntimeError: CUDA error: operation not supported (played)"
    }
    assert gpu_steps(record).graph is None
    none = steps.measure_gpu_steps(target, [], BENCH)
    assert none["reason"] == "no float16 headline was measured to break down"
    assert gpu_steps(none).random is None


def sides(random=252.0, constant=288.0, graph=253.0, spread=0.01, clocks=(1234, 1410)):
    return GpuSteps(
        "torch",
        [8192] * 3,
        0,
        SideFigure(random, spread),
        SideFigure(constant, spread),
        SideFigure(graph, spread) if graph else None,
        {"random": clocks[0], "constant": clocks[1]},
        {"random": 398.0, "constant": 341.0},
    )


def a100_head(**changes):
    a100 = {"peak_tflops": 312.0, "sm_clock_mhz": 1234.0, "sm_clock_max_mhz": 1410.0}
    return h100_head(**(a100 | {"achieved_tflops": 252.0} | changes))


def product(found) -> float:
    return math.prod(s.factor for s in found if s.factor is not None)


def test_the_datas_power_splits_the_clock_and_the_chain_ends_at_the_achieved_figure():
    found = breakdown(a100_head(), ITSELF, "cuda", 108, 1410, gpu=sides())
    ids = [s.id for s in found]
    assert ids[:4] == [StepId.PEAK, StepId.DATA_POWER, StepId.CLOCK, StepId.LAUNCH]
    data, clock, launch = found[1:4]
    # By hand: random inputs held the clock at 1234 MHz, constant ones ran at the 1410 the
    # peak assumes: the data's power keeps 1234/1410 of the peak, the clock the rest (all).
    assert data.factor == pytest.approx(1234 / 1410) and data.tflops == pytest.approx(273.06, 1e-3)
    assert clock.factor == pytest.approx(1.0) and clock.tflops == pytest.approx(data.tflops)
    # 252/253 is a 0.4% effect inside the sides' 1% spread: too noisy to tell, no number.
    assert launch.too_noisy and launch.tflops is None
    assert "too noisy to tell (spread 1.0%, effect 0.4%)" in launch.note
    assert 312.0 * product(found) == pytest.approx(252.0)  # the factors, noisy ones too
    shares = gap_shares(found)
    assert sum(g.share for g in shares) == pytest.approx(1.0)
    (share,) = [g.share for g in shares if g.step.id is StepId.DATA_POWER]
    assert share == pytest.approx(math.log(1234 / 1410) / math.log(252 / 312))


def test_a_datas_pair_noisier_than_its_effect_names_no_cause_and_keeps_the_chain():
    loud = sides(random=280.0, constant=288.0, spread=0.2, clocks=(1380, 1410))
    found = breakdown(a100_head(sm_clock_mhz=1380.0), ITSELF, "cuda", 108, 1410, gpu=loud)
    data = found[1]
    assert data.id is StepId.DATA_POWER and data.too_noisy and data.tflops is None
    assert "too noisy to tell (spread 20.0%, effect 2.1%)" in data.note
    # The clock step still carries the window's clock; the factors still multiply to it.
    assert found[2].tflops == pytest.approx(312.0 * 1380 / 1410)
    assert 312.0 * product(found) == pytest.approx(252.0)


def test_with_gpm_the_counters_measure_launch_gaps_and_no_clock_splits_by_rates():
    gpm = {"gpm_graphics_busy_pct": 99.0, "gpm_sm_busy_pct": 90.0, "gpm_tensor_active_pct": 80.0}
    head = h100_head(counter_errors="", **gpm)
    found = breakdown(head, ITSELF, "cuda", 132, 1830, gpu=sides(702, 790, 703, 0.01, (1755, 1980)))
    ids = [s.id for s in found]
    assert StepId.LAUNCH not in ids and ids[1:3] == [StepId.DATA_POWER, StepId.CLOCK]
    # Constant inputs at 1980 MHz, above the 1830 the peak assumes: the clock keeps all of it
    # there, and the data's power takes the window's 1650/1830.
    assert found[1].factor == pytest.approx(1650 / 1830) and found[2].factor == pytest.approx(1)
    assert found[3].tflops == pytest.approx(989.4 * 1650 / 1830 * 0.99)  # the GPU busy
    assert 989.4 * product(found) == pytest.approx(700.0)
    # A GPU whose clock was not read: the data's step is the sides' rates.
    blind = h100_head(sm_clock_mhz=float("nan"))
    found = breakdown(blind, ITSELF, "cuda", 132, 1830, gpu=sides(702, 790, 703, 0.01))
    assert found[1].factor == pytest.approx(702 / 790)
    assert "no SM clock read to split it from the clock's step" in found[1].note


def test_kernels_are_named_once_every_window_is_timed(played):
    # Naming a kernel profiles one more call: CUPTI then stays subscribed (unless
    # TEARDOWN_CUPTI=1) and every later launch pays for it. Deferred, no window is timed under it.
    state = played("h100")
    (gpu,) = gpu_info()
    target, later = gpu_target(gpu, print), []
    rows = [
        measure_point("h100", dtype, [64] * 3, target, BENCH, gpu, later=later)
        for dtype in ("float16", "bfloat16")
    ]
    steps.measure_gpu_steps(target, rows, BENCH)
    assert state.timed_under_cupti == 0 and not state.cupti and len(later) == 2
    assert [row.kernel for row in rows] == ["", ""]
    name_kernels(later)
    assert [row.kernel for row in rows] == [SM90_KERNELS[d] for d in ("float16", "bfloat16")]
    assert state.cupti and not later
    # Named as each point is measured, the next point's window is timed with CUPTI subscribed.
    for dtype in ("float16", "bfloat16"):
        measure_point("h100", dtype, [64] * 3, target, BENCH, gpu)
    assert state.timed_under_cupti > 0


def test_the_first_gpu_script_in_process_answers_and_writes_its_json(
    played, tmp_path, capsys, monkeypatch
):
    from roofline import first_gpu
    from roofline.device import gpm

    played("small_l2")
    monkeypatch.setattr(gpm, "MIN_WINDOW_S", 0.12)  # GPM over this test's short windows
    out = tmp_path / "answers.json"
    first_gpu.main(["--size", "128", "--small", "32", "--seconds", "0.15", "--out", str(out)])
    answers = json.loads(out.read_text())
    assert [a["question"][:2] for a in answers] == ["1.", "2.", "3.", "4."]
    # The torn-down side runs in a process of its own: here, one without the stand-in, which
    # sees no GPU, and the answer says so rather than a figure.
    assert "with TEARDOWN_CUPTI=1 not measured (" in answers[2]["answer"]
    assert "first-gpu: done" in capsys.readouterr().out


def test_the_first_gpu_script_without_an_nvidia_or_amd_gpu_says_so_and_measures_nothing(tmp_path):
    # As on a Mac (no NVML, torch without CUDA or ROCm) and on this CI machine.
    from roofline import first_gpu
    from roofline.core.errors import HardwareError

    out = tmp_path / "answers.json"
    with pytest.raises(HardwareError, match=r"^no NVIDIA or AMD GPU visible \(NVML, amdsmi"):
        first_gpu.main(["--out", str(out)])
    assert not out.exists()


@pytest.mark.posix
@pytest.mark.parametrize("tools", [("bash", "dirname"), ("bash", "dirname", "timeout")])
def test_the_first_gpu_script_runs_with_timeout_and_without_as_on_a_mac(tmp_path, tools):
    import os
    import shutil
    import subprocess

    from tests.machines import ROOT

    # A PATH with bash and the project's python, with `timeout` (Linux) or without (macOS
    # ships none). Windows runs `python -m roofline.first_gpu` (tests/test_standin.py).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    env = dict(os.environ, PATH=str(bin_dir))
    done = subprocess.run(
        [str(bin_dir / "bash"), str(ROOT / "scripts/first-gpu")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr
    assert "no NVIDIA or AMD GPU visible" in done.stderr
    assert "timeout: command not found" not in done.stderr


@pytest.mark.parametrize(
    ("raised", "reason"),
    [
        (
            RuntimeError("CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul"),
            "the call raised: RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling "
            "cublasLtMatmul",
        ),
        (WrongResult("max error 3.2 against float64"), "wrong result, not timed: max error 3.2"),
    ],
)
def test_sides_whose_call_raises_or_is_wrong_are_not_measured_and_say_why(
    played, monkeypatch, raised, reason
):
    played("h100_pcie")
    (gpu,) = gpu_info()
    target = gpu_target(gpu, print)
    head = measure_point("h100", "float16", [64] * 3, target, BENCH, gpu)

    def refuses(*args, **options):
        raise raised

    monkeypatch.setattr(steps, "matmul", refuses)
    record = steps.measure_gpu_steps(target, [head], BENCH)
    assert record["reason"].startswith(reason) and record["sides_s"] == {}
    assert steps.describe_gpu_steps(record) == f"not measured: {record['reason']}"


@pytest.mark.parametrize(
    ("machine", "answer", "means"),
    [
        ("container", "no, refused: GPM: NVML_ERROR_NO_PERMISSION", "stay unmeasured on this pod"),
        ("a100", "no counters: GPM: this GPU has none", "models tiles and waves instead"),
    ],
)
def test_the_first_gpu_script_says_why_gpm_was_not_read(
    played, monkeypatch, machine, answer, means
):
    from roofline import first_gpu
    from roofline.device import gpm

    played(machine)
    monkeypatch.setattr(gpm, "MIN_WINDOW_S", 0.12)
    (gpu,) = gpu_info()
    bench = BenchSettings(seed=0, warmup=1, check_rows=8, min_seconds=0.15, warmup_seconds=0.0)
    (said,) = first_gpu.tensor_activity(gpu_target(gpu, print), gpu, 64, bench)
    assert said["answer"].startswith(answer) and means in said["means"]
