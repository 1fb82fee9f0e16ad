"""Stage aggregate: every device's measurements (results.json, sweep.json) and its conf ->
results.csv, manifest.json, metrics.json."""

from roofline.aggregate import aggregate, load_record
from roofline.config import load_params
from roofline.paths import EXPERIMENT, results_path, sweep_path
from roofline.schema import write_json_atomic, write_text_atomic
from stages import run


def main() -> None:
    cfg = load_params()
    records = {name: load_record(name, results_path(name)) for name in cfg.devices}
    sweeps = {name: load_record(name, sweep_path(name)) for name in cfg.devices}
    table, manifest, metrics = aggregate(cfg, records, sweeps)
    write_text_atomic(EXPERIMENT / "results.csv", table.to_csv(index=False))
    write_json_atomic(EXPERIMENT / "manifest.json", manifest)
    write_json_atomic(EXPERIMENT / "metrics.json", metrics)


if __name__ == "__main__":
    run(main)
