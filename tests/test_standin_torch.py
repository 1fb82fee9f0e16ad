"""The CUDA stand-in held to the installed torch (conformance, derived from what it plays), and
as strict as a GPU where a GPU is strict: graph capture, events, float8's layout, memory. The
defects a strict stand-in showed in the GPU path have their tests here too."""

import ast
import gc
import importlib.util
import inspect
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from roofline import gpu_suite
from roofline.device import kinds
from roofline.device.hardware import gpu_info
from roofline.device.timing import BenchSettings
from roofline.measuring.measure import gpu_target, measure_point

ROOT = Path(__file__).resolve().parents[1]


def stand_in() -> types.ModuleType:
    """The stand-in's module (importing it installs nothing), without its folder on sys.path:
    its pynvml would then shadow the real one for every test after."""
    if "played_cuda" not in sys.modules:
        path = ROOT / "tests/fakes/cuda/played_cuda.py"
        spec = importlib.util.spec_from_file_location("played_cuda", path)
        sys.modules["played_cuda"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["played_cuda"])
    return sys.modules["played_cuda"]


played_cuda = stand_in()


# ---- conformance: everything the stand-in plays exists in the installed torch, alike --------


def shape_of(call: object) -> list[tuple] | None:
    """A callable's parameters as (name, kind, default), or None where Python cannot say."""
    try:
        signature = inspect.signature(call)
    except (TypeError, ValueError):
        return None
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def differences(name: str, played: object, real: object) -> list[str]:
    """How a played function or class (its constructor and each method it plays) differs from
    the real one a caller might reach."""
    ours, theirs = shape_of(played), shape_of(real)
    problems = []
    if ours is not None and theirs is not None and ours != theirs:
        problems.append(f"torch.cuda.{name} takes {ours}, torch's takes {theirs}")
    if not isinstance(played, type):
        return problems
    for method, value in vars(played).items():
        if not callable(value) or (method.startswith("_") and method not in PROTOCOL):
            continue
        if not hasattr(real, method):
            problems.append(f"torch.cuda.{name}.{method} does not exist in torch")
        else:
            problems += differences(f"{name}.{method}", value, getattr(real, method))
    return problems


PROTOCOL = ("__enter__", "__exit__")


def conformance(played: dict, hooks: dict, ops: set[str]) -> list[str]:
    """Every problem with what the stand-in plays, against the installed torch."""
    problems = []
    for name, value in played.items():
        real = getattr(torch.cuda, name, None)
        if real is None:
            problems.append(f"torch.cuda.{name} does not exist in torch {torch.__version__}")
            continue
        if isinstance(value, type) != isinstance(real, type):
            problems.append(f"torch.cuda.{name} is a class in one and not in the other")
            continue
        problems += differences(name, value, real)
    problems += [f"torch._C.{n} does not exist in torch" for n in hooks if not hasattr(torch._C, n)]
    problems += [
        f"torch.ops.aten.{op} does not exist" for op in ops if not hasattr(torch.ops.aten, op)
    ]
    return problems


def test_everything_the_stand_in_plays_is_in_the_installed_torch_with_its_signature():
    played_cuda.begin("h100")
    assert (
        conformance(played_cuda.torch_cuda(), played_cuda._tunable_hooks(), played_cuda.GEMMS) == []
    )


def test_a_played_name_torch_has_not_got_is_found():
    # What torch 2.15 dropped, played as the stand-in once played it.
    played_cuda.begin("h100")
    dropped = {"write_file_on_exit": lambda val: None}
    assert conformance(dropped, {}, set()) == [
        f"torch.cuda.write_file_on_exit does not exist in torch {torch.__version__}"
    ]


def test_a_played_signature_friendlier_than_torchs_is_found():
    class Event:  # takes any argument, where torch's takes four by name
        def __init__(self, **_):
            pass

        def elapsed_time(self, end):
            return 0.0

    problems = conformance({"Event": Event, "synchronize": lambda: None}, {}, {"no_such_gemm"})
    assert any(p.startswith("torch.cuda.Event takes") for p in problems)
    assert any("Event.elapsed_time takes" in p for p in problems)  # `end`, not `end_event`
    assert any(p.startswith("torch.cuda.synchronize takes []") for p in problems)
    assert "torch.ops.aten.no_such_gemm does not exist" in problems


def pybind_parameters(call: object) -> list[tuple[str, bool]] | None:
    """A C++ function's parameters as pybind's docstring gives them, (name, has a default), or
    None where it gives none."""
    first = (getattr(call, "__doc__", None) or "").split("\n", 1)[0]
    if "(" not in first or ") ->" not in first:
        return None
    inside = first[first.index("(") + 1 : first.rindex(") ->")]
    parts, depth, start = [], 0, 0
    for at, char in enumerate(inside):
        depth += char in "[({"
        depth -= char in "])}"
        if char == "," and depth == 0:
            parts.append(inside[start:at])
            start = at + 1
    parts.append(inside[start:])
    return [(p.split(":")[0].strip(), "=" in p) for p in parts if p.strip()]


def played_parameters(call: object) -> list[tuple[str, bool]]:
    parameters = inspect.signature(call).parameters.values()
    return [(p.name, p.default is not inspect.Parameter.empty) for p in parameters]


def public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def profiler_conformance(hooks: dict, event: type, result: type) -> list[str]:
    """Every problem with the profiler the stand-in plays (its C++ hooks, the kernel events and
    the result they make), against the installed torch's."""
    problems = []
    real_event, real_result = torch._C._autograd._KinetoEvent, torch._C._autograd._ProfilerResult
    for name, played in hooks.items():
        real = getattr(torch._C._autograd, name, None)
        if real is None or not hasattr(torch.autograd.profiler, name):
            problems.append(f"torch.autograd.profiler.{name} does not exist in torch")
            continue
        theirs = pybind_parameters(real)
        if theirs is not None and played_parameters(played) != theirs:
            problems.append(f"{name} takes {played_parameters(played)}, torch's takes {theirs}")
    mine = {n for n, v in vars(event).items() if callable(v) and not n.startswith("_")}
    problems += [f"_KinetoEvent.{n} is not played" for n in sorted(public(real_event) - mine)]
    problems += [
        f"_KinetoEvent.{n} does not exist in torch" for n in sorted(mine - public(real_event))
    ]
    for n in sorted(mine & public(real_event)):
        if pybind_parameters(getattr(real_event, n)) != [("self", False)]:
            problems.append(f"_KinetoEvent.{n} takes arguments in torch")
    played_result = {n for n, v in vars(result).items() if callable(v) and not n.startswith("_")}
    problems += [
        f"_ProfilerResult.{n} does not exist in torch"
        for n in sorted(played_result - public(real_result))
    ]
    return problems


def test_the_profiler_the_stand_in_plays_is_torchs_with_the_same_hooks_events_and_signatures():
    played_cuda.begin("h100")
    assert (
        profiler_conformance(
            played_cuda._profiler_hooks(), played_cuda.KinetoEvent, played_cuda.ProfilerResult
        )
        == []
    )


def test_a_played_profiler_hook_or_event_method_torch_has_not_got_is_found():
    def _enable_profiler(config, activities):  # torch's also takes scopes, with a default
        pass

    class Event(played_cuda.KinetoEvent):
        def cycles(self):  # no such method in torch
            return 0

    problems = profiler_conformance(
        {"_enable_profiler": _enable_profiler, "_start_kineto": lambda: None},
        Event,
        played_cuda.ProfilerResult,
    )
    assert "torch.autograd.profiler._start_kineto does not exist in torch" in problems
    assert any(p.startswith("_enable_profiler takes [('config', False)") for p in problems)
    assert "_KinetoEvent.cycles does not exist in torch" in problems


def test_the_played_gpus_profiler_names_its_gemms_as_cublas_does_and_no_other(played):
    played("h100")
    a, b = operands(32, torch.float16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiled:
        (a + 1) @ b  # an addition, then a GEMM: only the GEMM is a played kernel
        torch.cuda.synchronize()
    kernels = [e for e in profiled.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert [e.name for e in kernels] == [played_cuda.SM90_KERNELS["float16"]]
    assert kernels[0].time_range.elapsed_us() > 0
    # Without CUDA activity the profiler sees no kernel.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiled:
        a @ b
    assert not [e for e in profiled.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def test_the_played_h100_and_a100_record_the_kernel_their_gemms_ran(played):
    played("h100")
    bench = BenchSettings(
        seed=0, warmup=1, repeats=2, check_rows=8, min_seconds=0.0, warmup_seconds=0.0
    )
    logged = []

    def measured(dtype: str) -> str:
        target = gpu_target(gpu_info()[0], print)
        found = gpu_info()[0]
        return measure_point("gpu", dtype, [64] * 3, target, bench, found, log=logged.append)

    for dtype in ("float16", "bfloat16"):
        point = measured(dtype)
        assert point.status == "measured" and point.kernel == played_cuda.SM90_KERNELS[dtype]
    # A dtype the stand-in has no real name for: no kernel seen, said, and the point stands.
    point = measured("float32")
    assert point.status == "measured" and point.kernel == ""
    assert logged == [
        "gpu float32 [64, 64, 64] (torch): the kernel that ran is not recorded: NotSeen: "
        "torch's profiler saw no CUDA kernel in the call (no CUPTI kernel activity here)"
    ]
    played("mig")  # an A100's slice
    assert measured("bfloat16").kernel == played_cuda.SM80_KERNELS["bfloat16"]
    played("h100", cupti=False)  # a host whose torch profiler traces no CUDA kernel
    logged.clear()
    point = measured("float16")
    assert point.status == "measured" and point.kernel == ""
    assert logged[0].endswith("NotSeen: torch's profiler cannot trace CUDA kernels here (no CUPTI)")


def test_torch_cuda_tunable_is_torchs_own_module_over_played_hooks(played):
    played("h100")
    # What the module offers is torch's: a name it dropped cannot be called on the stand-in.
    assert isinstance(torch.cuda.tunable, types.ModuleType)
    assert not hasattr(torch.cuda.tunable, "write_file_on_exit")
    assert torch.cuda.tunable.get_cublaslt_requested_algo_count() == 8
    assert played_cuda._tunable_hooks().keys() <= set(dir(torch._C))


def test_the_labs_calls_into_triton_bind_to_its_signature():
    triton_testing = pytest.importorskip("triton.testing")
    real = inspect.signature(triton_testing.do_bench)
    calls = [
        node
        for path in (ROOT / "roofline").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "do_bench"
    ]
    assert calls, "roofline calls triton's do_bench somewhere"
    for call in calls:
        real.bind(*[None] * len(call.args), **{k.arg: None for k in call.keywords})


# ---- strict where a GPU is strict -------------------------------------------------------------


def operands(n: int = 32, dtype=torch.float32):
    return torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)


def captured(call, warm: bool = True):
    """A CUDA graph of `call`, captured on a side stream (warmed up on it first, as torch asks)."""
    side = torch.cuda.Stream()
    if warm:
        with torch.cuda.stream(side):
            call()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        call()
    return graph


def test_a_capture_refuses_a_synchronise_and_a_host_read(played):
    played("h100")
    a, b = operands()
    with pytest.raises(RuntimeError, match="operation not permitted when stream is capturing"):
        captured(lambda: torch.cuda.synchronize())
    with pytest.raises(RuntimeError, match="operation not permitted when stream is capturing"):
        captured(lambda: (a @ b).sum().item())


def test_a_capture_refuses_a_matmul_not_warmed_up_on_its_stream(played):
    played("h100")
    a, b = operands()
    with pytest.raises(RuntimeError, match="warm it up on the capture stream"):
        captured(lambda: a @ b, warm=False)


def test_a_replay_writes_its_outputs_and_fails_once_its_inputs_are_freed(played):
    played("h100")
    held = list(operands())  # the only references to the inputs, besides the capture's call
    out = torch.empty(32, 32)
    graph = captured(lambda: torch.mm(*held, out=out))
    out.zero_()
    graph.replay()
    assert torch.allclose(out, held[0] @ held[1])
    held.clear()
    gc.collect()
    with pytest.raises(RuntimeError, match="replayed over an input freed since its capture"):
        graph.replay()


def test_a_cuda_kinds_graph_keeps_what_it_replays_alive(played):
    # Cuda.graph returned `lambda _: graph.replay()`, which kept nothing: the residency knob's
    # graphs replayed over freed operands.
    played("h100")
    kind = kinds.Cuda(0, gpu_info()[0]["uuid"])
    out = torch.empty(32, 32)

    def product() -> tuple:  # only the call holds the operands
        a, b = operands()
        return a @ b, lambda i: torch.mm(a, b, out=out)

    expected, call = product()
    replay = kind.graph(call, 1)
    del call
    gc.collect()
    out.zero_()
    replay(0)
    assert torch.equal(out, expected)


def test_events_time_only_between_two_timing_events_recorded_and_synchronised(played):
    played("h100")
    plain, start, end = torch.cuda.Event(), *(torch.cuda.Event(enable_timing=True) for _ in "12")
    with pytest.raises(RuntimeError, match="Both events must be recorded"):
        start.elapsed_time(end)
    start.record()
    end.record()
    with pytest.raises(RuntimeError, match="Both events must be completed"):
        start.elapsed_time(end)
    torch.cuda.synchronize()
    assert start.elapsed_time(end) >= 0
    plain.record()
    plain.synchronize()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        plain.elapsed_time(end)


def scaled(a, b, scale_a=None, scale_b=None, fast=False):
    f = torch.nn.functional
    one = torch.ones(())
    whole = f.ScalingType.TensorWise
    return f.scaled_mm(
        a,
        b,
        one if scale_a is None else scale_a,
        whole,
        one if scale_b is None else scale_b,
        whole,
        output_dtype=torch.bfloat16,
        use_fast_accum=fast,
    )


def test_float8_takes_row_major_a_column_major_b_multiples_of_16_and_per_tensor_scales(played):
    state = played("h100")
    f8 = torch.float8_e4m3fn
    a, b = torch.randn(32, 64).to(f8), torch.randn(32, 64).to(f8).t()  # B column-major
    assert scaled(a, b).shape == (32, 32)
    with pytest.raises(RuntimeError, match="mat_b must be column-major"):
        scaled(a, b.contiguous())
    with pytest.raises(RuntimeError, match="mat_a must be row-major"):
        scaled(a.t().contiguous().t(), b)
    odd_a, odd_b = torch.randn(32, 40).to(f8), torch.randn(32, 40).to(f8).t()
    with pytest.raises(RuntimeError, match="must be divisible by 16"):
        scaled(odd_a, odd_b)
    with pytest.raises(RuntimeError, match="a scale of shape \\(2,\\)"):
        scaled(a, b, scale_a=torch.ones(2))
    scaled(a, b, fast=True)
    assert state.fast_accum == [False, True]  # what reached the played cuBLASLt


def test_float8_pairs_are_cublaslts_and_two_e5m2_are_refused_in_torchs_words(played):
    played("h100")
    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2
    for a_dtype, b_dtype in [(e4m3, e4m3), (e4m3, e5m2), (e5m2, e4m3)]:
        a, b = torch.randn(32, 64).to(a_dtype), torch.randn(32, 64).to(b_dtype).t()
        assert scaled(a, b).shape == (32, 32), (a_dtype, b_dtype)
    a, b = torch.randn(32, 64).to(e5m2), torch.randn(32, 64).to(e5m2).t()
    with pytest.raises(RuntimeError, match=f"^{played_cuda.TWO_E5M2}$"):
        scaled(a, b)


def test_a_float8_b_of_the_other_vendors_family_is_refused_as_a_is(played):
    played("h100")
    a = torch.randn(32, 64).to(torch.float8_e4m3fn)
    b = torch.randn(32, 64).to(torch.float8_e4m3fnuz).t()
    with pytest.raises(RuntimeError, match="CUDA \\(cuBLASLt\\) has no float8_e4m3fnuz"):
        scaled(a, b)


def test_the_stand_ins_float8_refusal_is_the_installed_torchs_own_text():
    """The words the stand-in refuses with are in torch's CUDA library, as Blas.cpp raises them."""
    library = Path(torch.__file__).parent / "lib" / "libtorch_cuda.so"
    if not library.is_file():
        pytest.skip(f"{library} is not installed (a CPU-only torch)")
    assert played_cuda.TWO_E5M2.encode() in library.read_bytes()


def test_the_fast_accumulation_knob_asks_for_it(played):
    state = played("small_l2")
    from tests.test_standin import knobs

    rows, _ = knobs()
    assert rows["float8 fast accumulation"]["status"] == "measured"
    assert True in state.fast_accum and False in state.fast_accum


def test_the_played_h100_has_the_memory_torch_reports_and_refuses_past_it(played):
    played("h100")
    total = torch.cuda.get_device_properties(0).total_memory
    assert 79 * 2**30 < total < 80 * 2**30  # "80GB" is 79.2 GiB to torch
    played("h100", gpus=[dict(played_cuda.H100_SXM, memory_bytes=4 << 20)])
    free, _ = torch.cuda.mem_get_info()
    kept = torch.empty(1 << 20)  # 4 MiB of float32
    with pytest.raises(torch.OutOfMemoryError, match="CUDA out of memory"):
        torch.empty(1 << 20)
    del kept
    gc.collect()
    assert torch.cuda.mem_get_info()[0] == free  # freed, as the caching allocator would
    torch.empty(1 << 20)


def test_the_timing_checks_bare_loop_drops_each_output_and_says_its_peak_memory(played):
    # The bare loop kept every output alive ([call(i) for i in range(calls)]): at 700 TFLOP/s
    # over a 1 s window, ~80 GiB of 8192^2 outputs; an OutOfMemoryError, and no figure.
    small = dict(played_cuda.H100_SXM, memory_bytes=4 << 20, l2_bytes=1 << 20)
    played("h100", gpus=[small])
    target = gpu_target(gpu_info()[0], print)
    bench = BenchSettings(min_seconds=0.05, warmup=1, repeats=3, check_rows=8)
    out = gpu_suite.timing_check(target, 64, bench, harness_s=1e-4)  # 500 outputs of 8 KiB
    assert "error" not in out, out["error"]
    assert out["bare_loop_s"] > 0
    assert 0 < out["bare_loop_peak_bytes"] < 2 << 20  # the operands, one output at a time


# ---- pods as they are: a driver older than the locked torch's CUDA --------------------------


OLD_DRIVER = {
    "PYTHONPATH": os.pathsep.join([str(ROOT / "tests/fakes/old_driver"), str(ROOT)]),
    "PATH": "/usr/bin:/bin",
}


def test_on_an_old_driver_host_the_probe_names_the_torch_build_and_the_uv_command():
    done = subprocess.run(
        [sys.executable, "-c", "from roofline.device.hardware import gpu_info; gpu_info()"],
        cwd=ROOT,
        env=OLD_DRIVER,
        capture_output=True,
        text=True,
    )
    version = torch.__version__.split("+")[0]
    assert done.returncode != 0
    said = done.stderr.splitlines()[-1]
    assert "NVML sees 1 NVIDIA GPU (driver 550.54.15)" in said
    assert "CUDA 13 needs driver >= 580" in said and "built for CUDA 12" in said
    install = "uv pip install --reinstall-package torch --torch-backend=auto"
    assert f"`{install} torch=={version}`" in said
    assert "`UV_NO_SYNC=1 uv run dvc repro`" in said


@pytest.mark.posix
def test_pod_setup_on_an_old_driver_installs_the_same_torch_for_its_cuda(tmp_path):
    # nvidia-smi and uv played by scripts on PATH: the driver's version, and the uv calls kept.
    # uv as it answers (tests/fakes/uv), the installed torch the lock's.
    calls, torch = tmp_path / "uv-calls", tmp_path / "torch"
    torch.write_text("2.15.0+cu132\n", encoding="utf-8")
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\necho 550.54.15\n", encoding="utf-8")
    (tmp_path / "nvidia-smi").chmod(0o755)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/pod-setup")],
        env={
            "PATH": f"{tmp_path}:{ROOT / 'tests/fakes/uv'}:/usr/bin:/bin",
            "UV_LOG": str(calls),
            "PLAYED_UV_TORCH": str(torch),
        },
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert calls.read_text(encoding="utf-8").splitlines()[-1] == (
        "pip install --reinstall-package torch --torch-backend=auto torch==2.15.0"
    )
    assert torch.read_text(encoding="utf-8") == "2.15.0+auto\n"  # installed, not "Checked"
    assert "driver 550.54.15 is older than 580" in done.stdout
    assert "UV_NO_SYNC=1 uv run dvc repro" in done.stdout


def test_the_played_device_properties_are_fields_torch_has(played):
    import torch

    played("mi300x")
    props = vars(torch.cuda.get_device_properties(0))
    real = set(dir(torch._C._CudaDeviceProperties))
    assert {"pci_domain_id", "pci_bus_id", "pci_device_id", "uuid"} <= set(props)
    assert set(props) <= real, set(props) - real
