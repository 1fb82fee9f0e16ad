"""Stage knobs: measure the selected knobs on a device that is here.

Each knob is a gain, measured in one run. `knobs=none` measures nothing. A device never
measured gets a pending record; one measured elsewhere keeps its record, as in the benchmark."""

from dataclasses import replace
from typing import Any

from roofline.configuration.measuring_config import bench_settings
from roofline.core.paths import knobs_path
from roofline.machines.record_types import Record
from roofline.machines.records import knobs_record
from stages import run
from stages.measuring import selected_stage


def main(argv: list[str] | None = None) -> None:
    selected_stage(argv, __doc__, "knobs", knobs_path, knobs_record, measure)


def measure(name: str, cfg: Any, dev: Any, decision: Any) -> Record:
    from roofline.core.progress import say
    from roofline.measuring.benchmark import (  # torch: only to measure
        check_disk,
        check_knobs_fit,
        run_info,
        started,
    )
    from roofline.measuring.knobs import Settings, measure_knobs
    from roofline.measuring.measure import target_for

    check_disk(knobs_path(name), 12)
    check_knobs_fit(cfg.knobs, dev.kind.name, decision.found["memory_bytes"])
    begun, target = started(), target_for(dev.kind.name, decision.found, say)
    window = replace(bench_settings(cfg), min_seconds=cfg.knobs.min_seconds)  # the knobs' own
    settings = Settings(window, cfg.knobs.rounds, decision.found.get("logical_cores", 1))
    rows, tuning = measure_knobs(name, target, decision.found, cfg.knobs, settings, say)
    return knobs_record(
        name,
        cfg.knobs.name,
        "measured",
        fingerprint=decision.fingerprint,
        run=run_info(*begun, dev.kind.name),
        rows=rows,
        tunableop_results=tuning,
    )


if __name__ == "__main__":
    run(main)
