"""Stage sweep: measure the selected sweep's shapes on a device that is here.

`sweep=none` measures nothing. A device never measured gets a pending record; one measured
elsewhere keeps its record."""

from typing import Any

from roofline.configuration.measuring_config import bench_settings
from roofline.core.paths import sweep_path
from roofline.machines.record_types import Record
from roofline.machines.records import sweep_record
from stages import run
from stages.measuring import selected_stage


def main(argv: list[str] | None = None) -> None:
    selected_stage(argv, __doc__, "sweep", sweep_path, sweep_record, measure)


def measure(name: str, cfg: Any, dev: Any, decision: Any) -> Record:
    from roofline.measuring.benchmark import check_disk  # torch: only to measure
    from roofline.measuring.sweep import measure_sweep, sweep_shapes

    shapes = sweep_shapes(cfg.sweep, dev.kind.name)
    check_disk(sweep_path(name), len(shapes) * len(dev.dtypes) * len(dev.backends))
    bench = bench_settings(cfg)
    return measure_sweep(name, dev, bench, cfg.sweep, decision.found, decision.fingerprint)


if __name__ == "__main__":
    run(main)
