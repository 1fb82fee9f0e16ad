"""Stage benchmark: measure a device that is here, record a never-measured one as pending, and
refuse to touch results measured on hardware that is not here."""

import argparse

from roofline.benchmark import check_disk, measure_device
from roofline.config import device_config, load_params, measuring
from roofline.paths import results_path
from roofline.records import decide, pending_record, points
from roofline.schema import write_json_atomic
from stages import run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("device", help="a device name from params.yaml (devices.<name>)")
    name = parser.parse_args(argv).device
    cfg = load_params()
    dev = measuring(device_config(cfg, name))
    decision = decide(name, dev, "benchmark", results_path(name))
    if decision.action == "pending":
        record = pending_record(name, dev)
    else:
        check_disk(results_path(name), len(points(dev)))
        record = measure_device(name, dev, cfg.bench, decision.found, decision.fingerprint)
    write_json_atomic(results_path(name), record)


if __name__ == "__main__":
    run(main)
