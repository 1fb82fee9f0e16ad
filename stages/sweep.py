"""Stage sweep: the selected sweep's shapes on a device that is here (nothing for sweep=none),
pending for a device never measured, kept as it is for one measured elsewhere."""

from roofline.holding import holding
from roofline.paths import sweep_path
from roofline.records import sweep_record
from roofline.schema import write_json_atomic
from stages import run
from stages.measuring import begin


def main(argv: list[str] | None = None) -> None:
    name, cfg, dev, decision = begin(argv, __doc__, "sweep", sweep_path)
    if decision.action == "keep":  # measured elsewhere, or only DVC's cache lacked it
        print(decision.why)
        return
    measuring = decision.action == "measure" and cfg.sweep.name != "none"
    with holding(name, "sweep", measuring):  # one measurement of a device at a time here
        if decision.action == "pending":
            record = sweep_record(name, cfg.sweep.name, "pending")
        elif not measuring:
            record = sweep_record(name, "none", "measured", fingerprint=decision.fingerprint)
        else:
            from roofline.benchmark import check_disk  # torch: only to measure
            from roofline.sweep import measure_sweep, sweep_shapes

            shapes = sweep_shapes(cfg.sweep, dev.kind.name)
            check_disk(sweep_path(name), len(shapes) * len(dev.dtypes) * len(dev.backends))
            record = measure_sweep(
                name, dev, cfg.bench, cfg.sweep, decision.found, decision.fingerprint
            )
        write_json_atomic(sweep_path(name), record)


if __name__ == "__main__":
    run(main)
