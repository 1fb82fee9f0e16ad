"""Stage aggregate: every device's results.json and sweep.json -> results.csv, manifest.json,
metrics.json."""

from roofline.aggregate import load_results, manifest, metrics, results_table
from roofline.config import load_params
from roofline.paths import EXPERIMENT, results_path, sweep_path
from roofline.schema import write_json_atomic, write_text_atomic
from stages import run


def main() -> None:
    cfg = load_params()
    records = {name: load_results(name, results_path(name)) for name in cfg.devices}
    sweeps = {name: load_results(name, sweep_path(name)) for name in cfg.devices}
    table = results_table(records, sweeps)
    write_text_atomic(EXPERIMENT / "results.csv", table.to_csv(index=False))
    write_json_atomic(EXPERIMENT / "manifest.json", manifest(cfg, records, sweeps))
    write_json_atomic(EXPERIMENT / "metrics.json", metrics(table))


if __name__ == "__main__":
    run(main)
