"""Stage benchmark: measure a device that is here.

A never-measured device is recorded as pending. Results measured on hardware that is not here
are kept as they are. Where only a kernel of your own changed, only its rows are measured
again."""

from roofline.configuration.measuring_config import bench_settings
from roofline.core.files import write_json_atomic
from roofline.core.paths import results_path
from roofline.machines.holding import holding
from roofline.machines.records import own_only, pending_record, points
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
                remeasure_own,
            )

            gpus = max(1, len(node_gpus(dev.kind.name, decision.found)))  # a row each a point
            check_disk(results_path(name), gpus * len(points(dev)))
            bench, found, fingerprint = bench_settings(cfg), decision.found, decision.fingerprint
            if own := own_only(name, fingerprint):
                previous, backends = own
                its = "its" if len(backends) == 1 else "their"
                print(f"{name}: only {', '.join(backends)} changed: measuring {its} rows again")
                record = remeasure_own(name, dev, bench, found, fingerprint, previous, backends)
            else:
                record = measure_device(name, dev, bench, found, fingerprint)
        write_json_atomic(results_path(name), record)


if __name__ == "__main__":
    run(main)
