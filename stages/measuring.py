"""What the measuring stages (benchmark, sweep, knobs) share before they measure: which device,
the part of its config a measurement may read, and what the several-machines rules decide for
it on this machine. Not a stage itself."""

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from roofline.config import device_config, load_params
from roofline.records import Decision, decide


def begin(
    argv: list[str] | None, description: str, stage: str, output: Callable[[str], Path]
) -> tuple[str, DictConfig, Any, Decision]:
    """(device name, the whole config, the device's measuring view, the decision), from the
    stage's command line; raises RecordError where the stage must not run here."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("device", help="a device name from params.yaml (devices.<name>)")
    name = parser.parse_args(argv).device
    cfg = load_params()
    dev = device_config(cfg, name)  # its measuring keys only: load_params reads no more
    return name, cfg, dev, decide(name, dev, stage, output(name))
