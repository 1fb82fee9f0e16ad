"""Stage aggregate: every device's results.json -> results.csv and manifest.json."""

from roofline.aggregate import load_results, manifest, results_table
from roofline.config import load_params
from roofline.paths import EXPERIMENT, results_path
from roofline.schema import write_json_atomic, write_text_atomic
from stages import run


def main() -> None:
    cfg = load_params()
    records = {name: load_results(name, results_path(name)) for name in cfg.devices}
    write_text_atomic(EXPERIMENT / "results.csv", results_table(records).to_csv(index=False))
    write_json_atomic(EXPERIMENT / "manifest.json", manifest(cfg, records))


if __name__ == "__main__":
    run(main)
