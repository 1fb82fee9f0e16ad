"""Compose conf/ into params.yaml exactly as `dvc exp run` does (DVC's own Hydra composition),
and generate the pipeline files for the devices it lists (roofline/machines/pipeline.py).

uv run python -m roofline.compose            # rewrite params.yaml and the pipeline files
uv run python -m roofline.compose --check    # exit 1 if any of them differs from conf/
uv run python -m roofline.compose devices.cpu.dtypes=[float32]   # Hydra overrides
"""

import argparse
import tempfile
from pathlib import Path

import yaml
from dvc.utils.hydra import compose_and_dump

from roofline.configuration.measuring_config import PARAMS_FILE, load_params, parse_params
from roofline.configuration.params import COMPOSED, conf_digest, read_params
from roofline.core.errors import ConfigError, run
from roofline.core.files import write_json_atomic, write_text_atomic
from roofline.core.paths import fingerprint_path, knobs_path, results_path, sweep_path
from roofline.interpretation.lab_config import LabConfig
from roofline.interpretation.lab_config import check as check_datasheets
from roofline.machines.keys import pending_keys
from roofline.machines.pipeline import orphans, pipeline_files
from roofline.machines.records import (
    knobs_record,
    lock_records_results,
    never_measured,
    pending_record,
    sweep_record,
)


def compose(root: Path, overrides: list[str]) -> str:
    """The YAML that DVC's Hydra integration would write for these overrides."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "params.yaml")
        compose_and_dump(
            out, str((root / "conf").resolve()), None, "config", str(root.resolve()), overrides
        )
        return out.read_text(encoding="utf-8")


def explain(err: BaseException) -> str:
    """Hydra's message and its causes: the cause names the allowed values.

    Each exception is read once: the chain can loop. OmegaConf re-raises an exception it has
    already formatted as its own cause (`ex.__cause__ = ex` in omegaconf._utils._raise) whenever
    a tracer is set (coverage, a debugger: `sys.gettrace()`) or OC_CAUSE=1.
    """
    messages = []
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        messages.append(str(err).strip())
        err = err.__cause__
    return "\n".join(messages)


def generated(root: Path, overrides: list[str]) -> dict[Path, str]:
    """params.yaml and every pipeline file, as conf/ (with these overrides) makes them."""
    try:
        params = compose(root, overrides)
    except Exception as err:  # Hydra names the bad override or value
        raise ConfigError(explain(err)) from err
    # What the schema's types let through, datasheets included.
    parse_params(params, root / "conf", "conf/ composed", LabConfig, (check_datasheets,))
    params = COMPOSED.format(conf_digest(root / "conf")) + params
    return {PARAMS_FILE: params} | pipeline_files(yaml.safe_load(params)["devices"], root)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="only compare; write nothing")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. bench.repeats=5")
    args = parser.parse_args(argv)
    root = Path(".")
    files = generated(root, args.overrides)
    names = list(yaml.safe_load(files[PARAMS_FILE])["devices"])
    changed = [
        p for p, text in files.items() if not p.exists() or p.read_text(encoding="utf-8") != text
    ]
    stale = orphans(files, root)
    if args.check:
        if changed or stale:
            listed = ", ".join(map(str, changed + stale))
            raise ConfigError(
                f"{listed} differ from conf/: run `uv run python -m roofline.compose`"
            )
        return
    for path in changed:
        write_text_atomic(root / path, files[path])
        print(f"wrote {path}")
    for path in stale:  # only the generated file: the device's results and lock stay
        (root / path).unlink()
        print(f"removed {path}: conf/ no longer makes it")
    cfg, params = load_params(root / PARAMS_FILE), read_params(root / PARAMS_FILE)
    for name in names:
        # A new device starts as never measured, recorded as a machine without it records it,
        # so that `dvc repro --dry` can plan its stages (DVC's dry run fails on a missing
        # dependency, iterative/dvc#9818); the first `dvc repro` replaces these records.
        if results_path(name).exists() or lock_records_results(name):
            continue
        dev = cfg.devices[name]
        write_json_atomic(fingerprint_path(name), never_measured(name, pending_keys(params, name)))
        write_json_atomic(results_path(name), pending_record(name, dev))
        write_json_atomic(sweep_path(name), sweep_record(name, cfg.sweep.name, "pending"))
        write_json_atomic(knobs_path(name), knobs_record(name, cfg.knobs.name, "pending"))


if __name__ == "__main__":
    run(main)
