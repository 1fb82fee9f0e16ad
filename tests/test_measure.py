"""The timing harness and the kernels, on the CPU, at tiny sizes. No speed is asserted."""

import sys

import pytest
import torch

from roofline.configuration.measuring_config import ConfigError, bench_settings
from roofline.core.dtypes import DTYPES
from roofline.device import kinds
from roofline.machines.records import pending_record
from roofline.measuring import matmul
from roofline.measuring.benchmark import check_fits, measure_device
from roofline.measuring.matmul import WrongResult, measure_copy, measure_matmul, unsupported_reason
from tests.conftest import FINGERPRINT, LAPTOP, config, counted, device, measuring


class CountingTimer:
    """A Timer that returns made-up seconds and counts its calls."""

    name = "counting"

    def __init__(self):
        self.calls = 0

    def times(self, work, first, count):
        for i in range(first, first + count):
            work(i)
        self.calls += count
        return [1.0] * count


def timed_by(timer) -> kinds.Kind:
    """The CPU, timed by `timer`."""
    kind = kinds.Kind()
    kind.timer = lambda: timer
    return kind


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_matmul_is_checked_then_timed(dtype):
    point = measure_matmul(
        48,
        40,
        32,
        dtype,
        kinds.Kind(),
        counted(1, 3, seed=1, check_rows=8),
        cache_bytes=1 << 16,
    )
    assert len(point.samples) == 3 and all(s > 0 for s in point.samples)
    assert point.check_error <= DTYPES[dtype].tolerance
    # (48*32 + 32*40 + 48*40) * itemsize bytes per set against a 64 KiB cache
    assert point.buffer_sets == -(
        -2 * (1 << 16) // ((48 * 32 + 32 * 40 + 48 * 40) * matmul.torch_dtype(dtype).itemsize)
    )


def test_a_wrong_kernel_is_refused_and_never_timed(monkeypatch):
    timer = CountingTimer()
    monkeypatch.setattr(
        matmul, "matmul_fn", lambda dtype, device, fast: lambda a, b: (a @ b) * 1.01
    )
    with pytest.raises(WrongResult, match=r"max relative error 0\.01"):
        measure_matmul(
            16,
            16,
            16,
            "float32",
            timed_by(timer),
            counted(1, 2, check_rows=4),
            cache_bytes=None,
        )
    assert timer.calls == 0


def test_inputs_are_random_never_zero():
    [(a, b)] = matmul.operand_sets(8, 8, 8, "float16", "cpu", torch.Generator().manual_seed(0))
    assert a.dtype == torch.float16 and (a != 0).float().mean() > 0.9 and b.std() > 0.5


def test_operand_sets_are_distinct_matrices_each_starting_aligned():
    gen = torch.Generator().manual_seed(0)
    sets = matmul.operand_sets(3, 5, 7, "float16", "cpu", gen, sets=4)
    assert len(sets) == 4
    first = sets[0][0].data_ptr()
    for a, b in sets:
        assert (a.shape, b.shape, a.dtype, b.dtype) == (
            (3, 7),
            (7, 5),
            torch.float16,
            torch.float16,
        )
        assert a.is_contiguous() and b.is_contiguous()
        # 42 bytes of A a set, yet each set starts where a tensor of its own would.
        assert (a.data_ptr() - first) % matmul.SET_ALIGN_BYTES == 0
    assert len({a.data_ptr() for a, _ in sets}) == 4
    assert not torch.equal(sets[0][0], sets[1][0]) and not torch.equal(sets[0][1], sets[1][1])
    ones = matmul.operand_sets(3, 5, 7, "float16", "cpu", gen, sets=2, constant=True)
    assert all(bool((a == 1).all() and (b == 1).all()) for a, b in ones)


def test_copy_is_timed():
    samples = measure_copy(1 << 16, kinds.Kind(), counted(1, 2))
    assert len(samples) == 2


def test_unsupported_dtypes_say_why():
    assert "GPU tensor-core format" in unsupported_reason("tf32", "cpu")
    assert "no native float16" in unsupported_reason("float16", "cpu", {"float32"})
    assert unsupported_reason("float16", "cpu", {"float32", "float16"}) is None
    assert "compute capability >= 8.9; this GPU is 8.0" in unsupported_reason(
        "float8_e4m3fn", "cuda", None, "8.0"
    )
    assert unsupported_reason("float8_e4m3fn", "cuda", None, "9.0") is None
    assert "multiples of 16; this is [1, 8192, 8192]" in unsupported_reason(
        "float8_e4m3fn", "cuda", None, "9.0", [1, 8192, 8192]
    )
    assert unsupported_reason("float8_e4m3fn", "cuda", None, "9.0", [16, 8192, 8192]) is None


CPU = dict(
    kind="cpu",
    sku="laptop",
    clock_ghz=3.0,
    dtypes=["float32", "float16", "tf32"],
    shapes=[[32, 32, 32]],
)


def test_measure_device_records_measured_skipped_and_copy_rows():
    bench = bench_settings(config({}, repeats=2, warmup=1, copy_mib=1, min_seconds=0.0))
    # Through the measuring view of the config: reading anything else of it would raise.
    record = measure_device(
        "cpu", measuring(device(**CPU)), bench, LAPTOP["cpu"], FINGERPRINT, log=lambda _: None
    )
    rows = {row["dtype"]: row for row in record["rows"]}
    assert rows["float32"]["status"] == "measured" and len(rows["float32"]["samples_s"]) == 2
    assert "peak_tflops" not in rows["float32"] and "sku" not in record  # measurements only
    assert record["clock"]["ghz"] is None or record["clock"]["ghz"] > 0
    assert (
        rows["float16"]["status"] == "skipped" and "no native float16" in rows["float16"]["reason"]
    )
    assert rows["tf32"]["status"] == "skipped"
    # No sustained window by default on a CPU (bench.sustained_cpu): its run stays short.
    assert bench.sustained_seconds > 0 and {r["series"] for r in record["rows"]} == {"lab"}
    # The CPU's memory roof: STREAM's copy on its 2 cores, each over arrays of 64 MiB (LAPTOP's
    # caches are small), or torch's copy of copy_mib where the program cannot run here.
    memory = record["memory"]
    if "copies" in memory:
        assert memory["copies"] == 2 and memory["bytes_moved"] == 2 * memory["array_bytes"] * 2
        assert memory["array_bytes"] == 64 << 20
    else:
        assert memory["bytes_moved"] == 2 << 20 and "STREAM's copy not measured" in memory["how"]
    assert memory["gbps"] > 0
    assert record["run"]["versions"]["torch"] == torch.__version__


def test_pending_record_has_a_row_per_point_and_no_numbers():
    dev = device(
        kind="cuda",
        sku="NVIDIA H100",
        peak_tflops={"float16": 989.4, "bfloat16": 989.4},
        dtypes=["float16", "bfloat16"],
        shapes=[[8192, 8192, 8192], [64, 64, 64]],
    )
    record = pending_record("h100", dev)
    assert record["status"] == "pending" and len(record["rows"]) == 4
    assert all(not r["samples_s"] and r["check_error"] is None for r in record["rows"])


def test_shapes_and_copy_buffers_that_cannot_fit_are_refused_before_measuring():
    dev = device(**{**CPU, "shapes": [[100_000, 100_000, 100_000]]})
    with pytest.raises(ConfigError, match=r"devices.cpu.shapes has \[100000, 100000, 100000\]"):
        check_fits("cpu", dev, memory_bytes=16 << 30, copy_bytes=1 << 20)
    # 8 GiB copied into 8 more: 17.2 GB against 80% of a 16 GiB machine.
    with pytest.raises(ConfigError, match=r"bench.copy_mib=8192: its two buffers need 17.2 GB"):
        check_fits("cpu", device(**CPU), memory_bytes=16 << 30, copy_bytes=8 << 30)


def test_a_copy_buffer_larger_than_memory_is_refused_before_any_point_is_measured(monkeypatch):
    from roofline.measuring import benchmark

    measured = []
    monkeypatch.setattr(benchmark, "measure_point", lambda *a: measured.append(a))
    bench = bench_settings(config({}, copy_mib=12 * 1024))  # 2 x 12 GiB against LAPTOP's 16 GiB
    with pytest.raises(ConfigError, match=r"bench.copy_mib=12288: its two buffers need 25\.8 GB"):
        measure_device("cpu", measuring(device(**CPU)), bench, LAPTOP["cpu"], FINGERPRINT)
    assert measured == []


def test_a_disk_too_full_for_the_record_is_refused_before_measuring(tmp_path, monkeypatch):
    from collections import namedtuple

    from roofline.core.errors import HardwareError
    from roofline.measuring import benchmark

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(benchmark.shutil, "disk_usage", lambda _: usage(1 << 40, 0, 10 << 20))
    with pytest.raises(HardwareError, match=r"only 10 MiB free on the disk of .*results\.json"):
        benchmark.check_disk(tmp_path / "results.json", points=3)
    monkeypatch.setattr(benchmark.shutil, "disk_usage", lambda _: usage(1 << 40, 0, 1 << 30))
    benchmark.check_disk(tmp_path / "results.json", points=3)


def test_progress_bar_only_on_a_terminal(monkeypatch, capsys):
    import io
    import sys

    from roofline.core.progress import progress

    assert progress([1, 2], "cpu").disable  # pytest's stderr is not a terminal, nor is CI's

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    with progress([1, 2], "cpu") as bar:
        for _ in bar:
            pass
    assert "cpu: 100%" in screen.getvalue() and "2/2" in screen.getvalue()


def test_float8_goes_through_torchs_scaled_matmul_with_a_bfloat16_product():
    # torch runs float8 scaled matmuls on the CPU too, slowly: enough to check the call itself.
    [(a, b)] = matmul.operand_sets(
        32, 16, 64, "float8_e4m3fn", "cpu", torch.Generator().manual_seed(0)
    )
    c = matmul.matmul_fn("float8_e4m3fn", "cpu")(a, b)
    assert c.dtype == torch.bfloat16 and c.shape == (32, 16)
    assert matmul.check_product(a, b, c, 8, torch.Generator().manual_seed(1)) < 2e-2


# --- the kernel that ran, learnt after timing ---------------------------------------------------

SMALL = dict(seed=0, warmup=1, repeats=2, check_rows=4, min_seconds=0.0, warmup_seconds=0.0)


def cpu_point(dtype="float32", backend="torch", kind=None, log=None):
    from roofline.device.timing import BenchSettings
    from roofline.measuring.measure import Target, measure_point

    target = Target(kind or kinds.Kind(), None, 1 << 30, {"float32", dtype}, threads=1)
    return measure_point(
        "cpu", dtype, [64] * 3, target, BenchSettings(**SMALL), {}, backend, log=log
    )


def test_a_measured_cpu_point_records_the_kernel_its_library_ran():
    from roofline.interpretation.kernel_names import parse

    logged = []
    point = cpu_point(log=logged.append)
    assert point.status == "measured"
    if torch.backends.mkl.is_available():  # torch's float32 on a CPU goes through MKL's GEMM
        info = parse(point.kernel)
        assert info.library.startswith(("oneMKL", "MKL")) and "GEMM" in info.routine
        assert info.threads >= 1 and logged == []
    else:  # a torch without MKL: no kernel, and the log says why
        assert point.kernel == "" and "the kernel that ran is not recorded" in logged[0]


def test_a_kernel_that_cannot_be_learnt_leaves_the_point_measured_and_says_why():
    from roofline.device.kernel_ran import NotSeen

    class Silent(kinds.Kind):
        def kernel(self, call, backend="torch"):
            call()
            raise NotSeen("the library printed nothing")

    logged = []
    point = cpu_point(kind=Silent(), log=logged.append)
    assert point.status == "measured" and point.samples_s and point.kernel == ""
    assert logged == [
        "cpu float32 [64, 64, 64] (torch): the kernel that ran is not recorded: "
        "NotSeen: the library printed nothing"
    ]


def test_a_function_of_your_own_has_no_kernel_name_and_that_is_no_failure(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text("import numpy\n\ndef mm(a, b):\n    return a @ b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    logged = []
    point = cpu_point(backend="mine:mm", log=logged.append)
    assert point.status == "measured" and point.kernel == "" and logged == []


def watched_point(tmp_path, monkeypatch, at_check: bool, answer=None):
    """A point through a matmul of your own that counts its calls, on a kind that learns its
    kernel at the check or after the window: (the point, the calls made, and for each time the
    kernel was learnt, the calls it made and the timed calls made before it)."""
    (tmp_path / "counted.py").write_text(
        "CALLS = []\n\ndef mm(a, b):\n    CALLS.append(1)\n    return a @ b\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "counted", raising=False)  # this test's own, afresh
    import counted

    timer, learnt = CountingTimer(), []

    class Watched(kinds.Kind):
        kernel_at_check = at_check

        def timer(self):
            return timer

        def kernel(self, call, backend="torch"):
            if answer is not None:
                return answer()
            before = len(counted.CALLS)
            call()
            learnt.append((len(counted.CALLS) - before, timer.calls))
            return "a kernel"

    logged = []
    point = cpu_point(backend="counted:mm", kind=Watched(), log=logged.append)
    return point, len(counted.CALLS), learnt, logged


def test_a_cpu_kernel_is_learnt_from_the_checks_own_call_and_costs_no_call_of_its_own(
    tmp_path, monkeypatch
):
    point, calls, learnt, _ = watched_point(tmp_path, monkeypatch, at_check=True)
    assert point.kernel == "a kernel" and point.status == "measured"
    assert learnt == [(1, 0)]  # one call, before any timed one: the checked call
    # The checked call, one warm-up call, two timed: none spent on the kernel alone (an 8192^3
    # float32 call is 6-7 s on a 2-core CPU).
    assert calls == 1 + 1 + 2 and len(point.samples_s) == 2


def test_a_gpu_kernel_is_learnt_from_one_more_call_outside_the_timed_window(tmp_path, monkeypatch):
    point, calls, learnt, _ = watched_point(tmp_path, monkeypatch, at_check=False)
    assert point.kernel == "a kernel" and len(point.samples_s) == 2
    assert learnt == [(1, 1 + 2)]  # after the warm-up and the two timed calls
    assert calls == 1 + 1 + 2 + 1
    assert kinds.Cuda.kernel_at_check is False  # a first GPU call may autotune (TunableOp)


def test_a_kernel_learning_that_fails_before_calling_still_checks_and_measures_the_point(
    tmp_path, monkeypatch
):
    from roofline.device.kernel_ran import NotSeen

    def refuse():
        raise NotSeen("this torch has neither MKL nor oneDNN")

    point, calls, _, logged = watched_point(tmp_path, monkeypatch, at_check=True, answer=refuse)
    assert point.status == "measured" and point.kernel == "" and calls == 1 + 1 + 2
    assert logged == [
        "cpu float32 [64, 64, 64] (counted:mm): the kernel that ran is not recorded: "
        "NotSeen: this torch has neither MKL nor oneDNN"
    ]


def test_a_call_that_fails_while_its_kernel_is_learnt_fails_the_point_by_its_own_error(
    tmp_path, monkeypatch
):
    (tmp_path / "refusing.py").write_text(
        "def mm(a, b):\n    raise ValueError('the library refused')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    class Learning(kinds.Kind):
        def kernel(self, call, backend="torch"):
            call()
            return "never reached"

    point = cpu_point(backend="refusing:mm", kind=Learning())
    assert point.status == "failed"
    assert point.reason == "the call raised: ValueError: the library refused"


def test_a_cpu_shape_is_judged_against_the_memory_available_not_the_total():
    # 65536 x 65536 x 1: 17.2 GB of float32 with its check; 80% of a 24 GiB machine allows it,
    # the 8 GB other work leaves does not.
    dev = device(**{**CPU, "shapes": [[65536, 65536, 1]]})
    check_fits("cpu", dev, memory_bytes=24 << 30, copy_bytes=1 << 20)
    with pytest.raises(ConfigError) as refused:
        check_fits("cpu", dev, 24 << 30, 1 << 20, available_bytes=8 * 10**9)
    assert "devices.cpu.shapes has [65536, 65536, 1]: float32 needs 17.2 GB" in str(refused.value)
    assert "and the 8.0 GB available now (free some memory)" in str(refused.value)


def test_a_refusal_says_small_amounts_in_megabytes_not_as_zero_gigabytes():
    dev = device(**{**CPU, "shapes": [[64, 64, 64]]})
    with pytest.raises(ConfigError) as refused:
        check_fits("cpu", dev, 24 << 30, 1 << 20, available_bytes=0)
    assert "float32 needs 0.0819 MB with its check" in str(refused.value)
    assert "and the 0 MB available now" in str(refused.value)
