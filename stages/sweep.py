"""Stage sweep: the selected sweep's shapes on a device that is here (nothing for sweep=none),
pending for a device never measured, refused for one measured elsewhere."""

from roofline.paths import sweep_path
from roofline.records import sweep_record
from roofline.schema import write_json_atomic
from stages import run
from stages.measuring import begin


def main(argv: list[str] | None = None) -> None:
    name, cfg, dev, decision = begin(argv, __doc__, "sweep", sweep_path)
    if decision.action == "pending":
        record = sweep_record(name, cfg.sweep.name, "pending")
    elif cfg.sweep.name == "none":
        record = sweep_record(name, cfg.sweep.name, "measured", fingerprint=decision.fingerprint)
    else:
        from roofline.benchmark import check_disk  # torch: only to measure
        from roofline.sweep import measure_sweep, sweep_shapes

        points = len(sweep_shapes(cfg.sweep, dev.kind.name)) * len(dev.dtypes) * len(dev.backends)
        check_disk(sweep_path(name), points)
        record = measure_sweep(
            name, dev, cfg.bench, cfg.sweep, decision.found, decision.fingerprint
        )
    write_json_atomic(sweep_path(name), record)


if __name__ == "__main__":
    run(main)
