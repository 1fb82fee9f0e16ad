"""Stage benchmark: measure a device that is here, record a never-measured one as pending, and
keep results measured on hardware that is not here as they are."""

from roofline.configuration.measuring_config import bench_settings
from roofline.core.files import write_json_atomic
from roofline.core.paths import results_path
from roofline.machines.holding import holding
from roofline.machines.records import pending_record, points
from stages import run
from stages.measuring import begin


def main(argv: list[str] | None = None) -> None:
    name, cfg, dev, decision = begin(argv, __doc__, "benchmark", results_path)
    if decision.action == "keep":  # measured elsewhere, or only DVC's cache lacked it
        print(decision.why)
        return
    with holding(name, "benchmark", decision.action == "measure"):  # one at a time here
        if decision.action == "pending":
            record = pending_record(name, dev)
        else:
            from roofline.measuring.benchmark import (  # torch: only to measure
                check_disk,
                measure_device,
                node_gpus,
            )

            gpus = max(1, len(node_gpus(dev.kind.name, decision.found)))  # a row each a point
            check_disk(results_path(name), gpus * len(points(dev)))
            bench = bench_settings(cfg)
            record = measure_device(name, dev, bench, decision.found, decision.fingerprint)
        write_json_atomic(results_path(name), record)


if __name__ == "__main__":
    run(main)
