"""Config: conf/ composes into the committed params.yaml, and bad values stop with their name."""

import threading
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from roofline.compose import compose, explain
from roofline.configuration.measuring_config import (
    ConfigError,
    device_config,
    load_params,
    validate,
)
from roofline.configuration.params import KINDS
from roofline.core.dtypes import NAMES
from roofline.interpretation import lab_config
from roofline.interpretation.lab_config import load_lab_params
from tests.conftest import config, device

ROOT = Path(__file__).resolve().parents[1]


def check(cfg, conf=None):
    """Every check the composed config goes through, datasheets included."""
    validate(cfg, conf, (lab_config.check,))


def device_roles(root: Path = ROOT) -> list[str]:
    """The lab's devices, in order, from conf/config.yaml's defaults lines
    (`device@devices.NAME: FILE`): a device added there is in every test that asks for this."""
    defaults = yaml.safe_load((root / "conf/config.yaml").read_text(encoding="utf-8"))["defaults"]
    keys = [next(iter(d)) for d in defaults if isinstance(d, dict)]
    return [key.removeprefix("device@devices.") for key in keys if key.startswith("device@")]


def test_every_device_and_the_labs_defaults_compose():
    cfg = load_lab_params(ROOT / "params.yaml")
    roles = device_roles()
    assert {"cpu", "a100", "h100", "h200", "mps"} <= set(roles)  # the lab's own, at least
    # One file per role, each composed into params.yaml in the order of its defaults line.
    assert sorted(roles) == sorted(p.stem for p in (ROOT / "conf/device").glob("*.yaml"))
    assert list(cfg.devices) == roles and set(cfg.lab_devices) <= set(roles)
    assert all(cfg.devices[n].show_pending for n in cfg.lab_devices)  # the lab's show pending
    assert [d.name for d in cfg.devices.cpu.dtypes] == ["float32", "bfloat16", "float16"]
    assert cfg.devices.mps.kind.name == "mps" and not cfg.devices.mps.show_pending
    assert all(v is None for v in cfg.devices.mps.skus.any.peak_tflops.values())  # none published
    gpus = [name for name, dev in cfg.devices.items() if dev.kind.name == "cuda"]
    assert {"a100", "h100", "h200"} <= set(gpus)
    for name in gpus:  # every GPU measures the lab's kernel at the lab's shape
        gpu = cfg.devices[name]
        assert {"float16", "bfloat16"} <= {d.name for d in gpu.dtypes}
        assert [list(s) for s in gpu.shapes] == [[8192, 8192, 8192]]
    # Dense peaks, never the 2:4-sparse headline figures; the lab's SKU first.
    assert cfg.devices.a100.skus.sxm4_80gb.peak_tflops.float16 == 312.0
    assert cfg.devices.h100.skus.sxm5.peak_tflops.float16 == 989.4
    assert cfg.devices.h200.skus.sxm.memory_bandwidth_gbps == 4800
    assert [next(iter(cfg.devices[n].skus)) for n in ("a100", "h100", "h200")] == [
        "sxm4_80gb",
        "sxm5",
        "sxm",
    ]


def test_a_measuring_stage_reads_no_datasheet():
    cfg = load_params(ROOT / "params.yaml")
    assert set(cfg.devices.h100) == {"kind", "recognise", "dtypes", "shapes", "backends"}


def test_overrides_compose_like_dvc_exp_run():
    text = compose(ROOT, ["devices.cpu.shapes=[[2048,2048,2048]]", "devices.cpu.dtypes=[float32]"])
    cpu = OmegaConf.create(text).devices.cpu
    assert cpu.shapes == [[2048, 2048, 2048]] and cpu.dtypes == ["float32"]


@pytest.mark.parametrize(
    ("override", "named", "allowed"),
    [
        (
            "devices.cpu.dtypes=[float99]",
            "float99",
            f"[{', '.join(NAMES)}]",  # the registry's, whatever it holds
        ),
        ("bench.repeats=abc", "abc", "could not be converted to Integer"),
        ("devices.h100.kind=tpu", "tpu", f"[{', '.join(KINDS)}]"),
    ],
)
def test_schema_rejects_bad_overrides_at_composition(override, named, allowed):
    with pytest.raises(Exception, match=named) as err:
        compose(ROOT, [override])
    assert allowed in explain(err.value)


def explain_promptly(err: BaseException, links: list[BaseException]) -> str:
    """explain(err), failing (not hanging) if it has not returned within 2 s.

    After the verdict each link's __cause__ is cut, so that a looping explain() ends too."""
    result = []
    worker = threading.Thread(target=lambda: result.append(explain(err)), daemon=True)
    worker.start()
    worker.join(timeout=2)
    returned = not worker.is_alive()
    for link in links:
        link.__cause__ = None
    worker.join()
    assert returned, "explain() did not return: it loops on a cause chain that loops"
    return result[0]


def test_explain_returns_on_a_cause_chain_that_loops():
    outer, inner = ValueError("Error merging override x=1"), TypeError("expected one of [a, b]")
    outer.__cause__, inner.__cause__ = inner, outer  # a -> b -> a
    assert explain_promptly(outer, [outer, inner]) == (
        "Error merging override x=1\nexpected one of [a, b]"
    )
    outer.__cause__, inner.__cause__ = inner, inner  # b -> b, as OmegaConf makes it
    assert explain_promptly(outer, [outer, inner]) == (
        "Error merging override x=1\nexpected one of [a, b]"
    )


def test_explain_reads_omegaconfs_self_caused_error_once(monkeypatch):
    # Under a tracer (coverage, a debugger) or OC_CAUSE=1 OmegaConf re-raises the error it has
    # formatted with itself as its cause (omegaconf._utils._raise: ex.__cause__ = ex).
    monkeypatch.setenv("OC_CAUSE", "1")
    with pytest.raises(Exception, match="float99") as err:
        compose(ROOT, ["devices.cpu.dtypes=[float99]"])
    cause = err.value.__cause__
    assert cause is not None and cause.__cause__ is cause
    text = explain_promptly(err.value, [cause])
    assert text.startswith("Error merging override devices.cpu.dtypes=[float99]\n")
    assert text.count("Invalid value 'float99'") == 1
    assert f"[{', '.join(NAMES)}]" in text


def test_unknown_device_group_option_is_rejected():
    with pytest.raises(Exception, match="tpu_v9"):
        compose(ROOT, ["+device@devices.tpu=tpu_v9"])


def gpu(**over):
    fields = {
        "kind": "cuda",
        "recognise": {"gpu_name": "^GPU$"},
        "sku": "GPU",
        "peak_tflops": {"float16": 100.0},
        "memory_gb": 4,
        "dtypes": ["float16"],
        "shapes": [[64, 64, 64]],
    } | over
    return device(**fields)


@pytest.mark.parametrize(
    ("dev", "message"),
    [
        (
            gpu(shapes=[[0, 64, 64]]),
            "shapes has [0, 64, 64]; allowed: [M, N, K] of positive integers",
        ),
        (gpu(shapes=[[64, 64]]), "shapes has [64, 64]"),
        # A bool is no dimension, though True == 1 (OmegaConf's int nodes keep it a bool).
        (
            gpu(shapes=[[True, 64, 64]]),
            "shapes has [True, 64, 64]; allowed: [M, N, K] of positive integers",
        ),
        (gpu(shapes=[]), "shapes is empty"),
        (gpu(dtypes=[]), "dtypes is empty; allowed: a list of float32, tf32, float16"),
        (
            gpu(memory_gb=2),
            "bench.copy_mib=1024: its two buffers need 2.1 GB; allowed: at most 80%",
        ),
        (
            gpu(shapes=[[40000, 40000, 40000]]),
            "operands need 9.6 GB; allowed: at most devices.g.skus.only's 4 GB",
        ),
        (
            gpu(lab_band_tflops={"float16": [300.0, 200.0]}),
            "lab_band_tflops.float16=[300.0, 200.0]; allowed: [low, high]",
        ),
        (gpu(peak_tflops={"float16": 1.0, "int4": 9.0}), "key 'int4'"),
        # Datasheet figures no device has: each refused with its key, before anything is
        # written (the aggregate stage loads params.yaml through this check).
        (
            gpu(peak_tflops={"float16": -2.0}),
            "skus.only.peak_tflops.float16=-2.0; allowed: a finite number of TFLOP/s above 0, "
            "or null where unknown",
        ),
        (gpu(peak_tflops={"float16": float("inf")}), "skus.only.peak_tflops.float16=inf; "),
        (gpu(peak_tflops={"float16": 0.0}), "skus.only.peak_tflops.float16=0.0; "),
        (
            gpu(memory_bandwidth_gbps=0.0),
            "skus.only.memory_bandwidth_gbps=0.0; allowed: a finite number of GB/s above 0, or "
            "null where unknown",
        ),
        (
            gpu(peak_clock_mhz=-3.0),
            "skus.only.peak_clock_mhz=-3.0; allowed: a finite number of MHz above 200, at most "
            "7000, or null where unknown",
        ),
        (
            gpu(clock_ghz=-3.0),
            "skus.only.clock_ghz=-3.0; allowed: a finite number of GHz above 0.2, at most 7, or "
            "null where unknown",
        ),
        (
            gpu(cost_per_hour=-1.0),
            "skus.only.cost_per_hour=-1.0; allowed: a finite number of US dollars an hour at "
            "least 0, or null where unknown",
        ),
        (gpu(memory_gb=float("nan")), "skus.only.memory_gb=nan; "),
        (
            gpu(lab_done_tflops={"float16": 0.0}),
            "skus.only.lab_done_tflops.float16=0.0; allowed: a finite number of TFLOP/s above 0",
        ),
        (gpu(recognise={}), "recognise.gpu_name is not set; allowed: a regular expression"),
        (gpu(dtypes=["float16", "float16"]), "dtypes lists float16 twice; allowed: each once"),
        (
            gpu(shapes=[[64, 64, 64], [64, 64, 64]]),
            "shapes lists [64, 64, 64] twice; allowed: each once",
        ),
    ],
)
def test_check_names_the_bad_value_and_what_is_allowed(dev, message):
    with pytest.raises(ConfigError) as err:
        check(config({"g": dev}))
    assert message in str(err.value)
    assert "devices.g" in str(err.value)


@pytest.mark.parametrize("name", ["my gpu", "H100", "9x", "a-b"])
def test_a_device_name_that_cannot_name_a_stage_is_refused(name):
    with pytest.raises(ConfigError, match=f"device name '{name}'; allowed: lower-case letters"):
        check(config({name: gpu()}))


def test_check_rejects_bad_bench_settings():
    with pytest.raises(ConfigError, match="repeats=0"):
        check(config({"g": gpu()}, repeats=0))


def test_a_good_config_passes():
    check(config({"g": gpu()}))


def test_unknown_device_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown device 'tpu'; allowed: g"):
        device_config(config({"g": gpu()}), "tpu")


def test_load_params_rejects_a_hand_edited_params_file(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text(
        (ROOT / "params.yaml").read_text(encoding="utf-8").replace("repeats: 3", "repeats: many"),
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="many"):
        load_params(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_params(tmp_path / "missing.yaml")


def test_sweep_group_composes_and_rejects_what_it_cannot_measure():
    full = OmegaConf.create(compose(ROOT, ["sweep=full"])).sweep
    assert (
        full.name == "full" and full.skinny_m[0] == 1 and full.square.cpu[0] < full.square.cpu[-1]
    )
    with pytest.raises(Exception, match="bogus"):
        compose(ROOT, ["sweep=bogus"])
    bad = config({"g": gpu()})
    bad.sweep.square = {"gpu": [64]}
    with pytest.raises(ConfigError, match=r"sweep\.square has key 'gpu'; allowed: cpu, cuda"):
        check(bad)


def test_a_sweep_name_that_names_no_sweep_is_refused():
    bad = config({"g": gpu()})
    bad.sweep.name = "fulll"
    check(bad)  # without conf/ there is nothing to compare with
    with pytest.raises(ConfigError, match=r"sweep.name='fulll'; allowed: full, none, short"):
        check(bad, ROOT / "conf")


def test_a_failed_override_left_in_params_yaml_says_how_to_undo_it(tmp_path):
    import subprocess

    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "params.yaml"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "params"], cwd=tmp_path, check=True)
    text = params.read_text(encoding="utf-8")
    params.write_text(
        text.replace(
            "    dtypes:\n    - float32\n    - bfloat16\n    - float16\n", "    dtypes: []\n", 1
        ),
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        load_params(params)
    assert "devices.cpu.dtypes is empty" in str(err.value)
    assert "`git checkout params.yaml` restores it" in str(err.value)


def test_composition_refuses_what_the_schema_types_let_through():
    from roofline.compose import generated

    with pytest.raises(ConfigError, match=r"devices\.cpu\.dtypes is empty"):
        generated(ROOT, ["devices.cpu.dtypes=[]"])


@pytest.mark.parametrize("seconds", [-1.0, 601.0, float("nan")])
def test_a_sustained_window_out_of_its_range_is_refused_saying_the_range(seconds):
    with pytest.raises(ConfigError) as err:
        check(config({"g": gpu()}, sustained_seconds=seconds))
    said = str(err.value)
    assert (
        f"bench.sustained_seconds={seconds}; allowed: 0 to 600 (ten minutes of one window" in said
    )
    check(config({"g": gpu()}, sustained_seconds=0.0))  # none at all is allowed


def test_a_published_figure_says_its_window_or_nothing():
    figure = {"dtype": "float16", "shape": [64, 64, 64], "tflops": 90.0, "source": "a post"}

    def published(*figures):
        return OmegaConf.merge(gpu(), {"skus": {"only": {"published": list(figures)}}})

    for window in ("burst", "sustained", ""):
        check(config({"g": published(figure | {"window": window})}))
    check(config({"g": published(figure)}))  # a conf from before windows: not said
    with pytest.raises(ConfigError, match=r"published\[0\]\.window='long'; allowed: burst, sus"):
        check(config({"g": published(figure | {"window": "long"})}))


def test_a_deleted_params_yaml_at_the_root_says_how_to_write_it_again(tmp_path):
    from roofline.configuration.params import read_params
    from roofline.core.errors import ConfigError

    (tmp_path / "conf").mkdir()  # the repository root: conf/ is here, params.yaml is not
    with pytest.raises(ConfigError) as err:
        read_params(tmp_path / "params.yaml")
    assert str(err.value) == (
        f"{tmp_path / 'params.yaml'} not found beside conf/: `uv run python -m roofline.compose` "
        "writes it again from conf/ (or `git checkout -- params.yaml` restores the committed one)"
    )
    with pytest.raises(ConfigError, match="not found: run from the repository root"):
        read_params(tmp_path / "conf" / "params.yaml")  # another folder
    with pytest.raises(ConfigError, match="not found beside conf/"):
        load_lab_params(tmp_path / "params.yaml")
