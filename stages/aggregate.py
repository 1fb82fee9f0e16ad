"""Stage aggregate: join every device's measurements with its datasheet.

It reads each device's results.json, sweep.json and knobs.json, and its conf. It writes
results.csv, knobs.csv, manifest.json and metrics.json. Every record is read and checked
first, so the deliverables are all new or all old."""

from roofline.configuration.params import read_params
from roofline.core.deliverables import outputs
from roofline.core.files import json_text, write_texts_atomic
from roofline.core.measurement import knob_from_dict, measurement_from_dict
from roofline.core.paths import RECORDS
from roofline.interpretation.aggregate import aggregate, load_record
from roofline.interpretation.lab_config import load_lab_params
from roofline.machines.keys import outdated
from roofline.machines.records import differs_from_lock, edited
from stages import RENDERED, run

# How each record's rows are read.
PARSE = {
    "benchmark": measurement_from_dict,
    "sweep": measurement_from_dict,
    "knobs": knob_from_dict,
}


def main() -> None:
    cfg, params = load_lab_params(), read_params()
    for name in cfg.devices:  # a record dvc.lock does not vouch for makes no deliverable
        for stage, path in RECORDS.items():
            if differs_from_lock(name, stage, path(name)):
                raise edited(name, path(name), "no deliverable is made from it")
    records = {
        name: {
            stage: load_record(name, path(name), PARSE[stage]) for stage, path in RECORDS.items()
        }
        for name in cfg.devices
    }
    older = {name: outdated(records[name], params, name) for name in cfg.devices}
    out = aggregate(
        cfg,
        {name: r["benchmark"] for name, r in records.items()},
        {name: r["sweep"] for name, r in records.items()},
        {name: r["knobs"] for name, r in records.items()},
        older,
    )
    write_texts_atomic(
        outputs(
            "aggregate",
            {
                "results.csv": out.table.to_csv(index=False),
                "knobs.csv": out.knobs.to_csv(index=False),
                "manifest.json": json_text(out.manifest),
                "metrics.json": json_text(out.metrics),
            },
        )
    )


if __name__ == "__main__":
    run(main, RENDERED)
