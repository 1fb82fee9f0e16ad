"""Stage aggregate: every device's measurements (results.json, sweep.json) and its conf ->
results.csv, manifest.json, metrics.json."""

from roofline.aggregate import aggregate, load_record
from roofline.config import load_params
from roofline.paths import EXPERIMENT, results_path, sweep_path
from roofline.schema import json_text, write_texts_atomic
from stages import RENDERED, run


def main() -> None:
    cfg = load_params()
    records = {name: load_record(name, results_path(name)) for name in cfg.devices}
    sweeps = {name: load_record(name, sweep_path(name)) for name in cfg.devices}
    table, manifest, metrics = aggregate(cfg, records, sweeps)
    write_texts_atomic(
        {
            EXPERIMENT / "results.csv": table.to_csv(index=False),
            EXPERIMENT / "manifest.json": json_text(manifest),
            EXPERIMENT / "metrics.json": json_text(metrics),
        }
    )


if __name__ == "__main__":
    run(main, RENDERED)
