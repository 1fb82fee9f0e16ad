"""Stage aggregate: every device's measurements (results.json, sweep.json, knobs.json) and
its conf -> results.csv, knobs.csv, manifest.json, metrics.json."""

from roofline.aggregate import aggregate, load_record
from roofline.lab_schema import load_lab_params
from roofline.paths import EXPERIMENT, knobs_path, results_path, sweep_path
from roofline.schema import json_text, knob_from_dict, write_texts_atomic
from stages import RENDERED, run


def main() -> None:
    cfg = load_lab_params()
    records = {name: load_record(name, results_path(name)) for name in cfg.devices}
    sweeps = {name: load_record(name, sweep_path(name)) for name in cfg.devices}
    knobs = {name: load_record(name, knobs_path(name), knob_from_dict) for name in cfg.devices}
    out = aggregate(cfg, records, sweeps, knobs)
    write_texts_atomic(
        {
            EXPERIMENT / "results.csv": out.table.to_csv(index=False),
            EXPERIMENT / "knobs.csv": out.knobs.to_csv(index=False),
            EXPERIMENT / "manifest.json": json_text(out.manifest),
            EXPERIMENT / "metrics.json": json_text(out.metrics),
        }
    )


if __name__ == "__main__":
    run(main, RENDERED)
