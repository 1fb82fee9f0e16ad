"""What the measuring stages (benchmark, sweep, knobs) share. Not a stage itself.

Before they measure: which device, the part of its config a measurement may read, and what
the several-machines rules decide for it here. It also holds the one body of the two stages
that measure a selection (sweep, knobs)."""

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from roofline.configuration.measuring_config import device_config, load_params
from roofline.core.files import write_json_atomic
from roofline.machines.holding import holding
from roofline.machines.record_types import Record
from roofline.machines.records import Decision, decide
from roofline.measuring.provenance import quiet_blas


def begin(
    argv: list[str] | None, description: str, stage: str, output: Callable[[str], Path]
) -> tuple[str, DictConfig, Any, Decision]:
    """(device name, the whole config, the device's measuring view, the decision), from the
    stage's command line; raises RecordError where the stage must not run here."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("device", help="a device name from params.yaml (devices.<name>)")
    name = parser.parse_args(argv).device
    quiet_blas()  # before anything runs a BLAS call
    cfg = load_params()
    dev = device_config(cfg, name)  # its measuring keys only: load_params reads no more
    return name, cfg, dev, decide(name, dev, stage, output(name))


def selected_stage(
    argv: list[str] | None,
    description: str,
    stage: str,
    output: Callable[[str], Path],
    record: Callable[..., Record],
    measure: Callable[[str, DictConfig, Any, Decision], Record],
) -> None:
    """A stage measuring the selection `cfg.<stage>.name` on a device that is here (nothing for
    `none`): `record(name, selection, status, **extra)` is its record, `measure` measures it."""
    name, cfg, dev, decision = begin(argv, description, stage, output)
    if decision.action == "keep":  # measured elsewhere, or only DVC's cache lacked it
        print(decision.why)
        return
    selection = cfg[stage].name
    measuring = decision.action == "measure" and selection != "none"
    with holding(name, stage, measuring):  # one measurement of a device at a time here
        if decision.action == "pending":
            out = record(name, selection, "pending")
        elif not measuring:
            out = record(name, "none", "measured", fingerprint=decision.fingerprint)
        else:
            out = measure(name, cfg, dev, decision)
        write_json_atomic(output(name), out)
