"""Recombine every device's results.json into results.csv and manifest.json."""

from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from roofline.config import to_plain
from roofline.errors import SchemaError
from roofline.schema import CSV_COLUMNS, read_json, row_from_dict

LAB = "x4-roofline: dense matmul, FP16 8192^3 on GPUs (FP32 through the BLAS on a CPU)"


def load_results(name: str, path: Path) -> dict[str, Any]:
    """A device's results.json, each row checked against the schema."""
    if not path.exists():
        raise SchemaError(f"{path} is missing: run `uv run dvc pull` or `uv run dvc repro`")
    record = read_json(path)
    if not isinstance(record, dict) or record.get("device") != name or "rows" not in record:
        raise SchemaError(f"{path}: not a results record for device {name!r}")
    record["rows"] = [
        row_from_dict(row, f"{path}, row {i + 1}") for i, row in enumerate(record["rows"])
    ]
    for i, row in enumerate(record["rows"]):
        if row.device != name:
            raise SchemaError(f"{path}, row {i + 1}: device {row.device!r}, expected {name!r}")
    return record


def results_table(records: dict[str, dict[str, Any]]) -> pd.DataFrame:
    rows = [vars(row) for record in records.values() for row in record["rows"]]
    table = pd.DataFrame(rows, columns=CSV_COLUMNS)
    return table.astype({"m": "Int64", "n": "Int64", "k": "Int64", "repeats": "Int64"})


def manifest(cfg: DictConfig, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    devices = {}
    for name, record in records.items():
        dev = cfg.devices[name]
        entry = {
            "sku": dev.sku,
            "kind": dev.kind.name,
            "status": record["status"],
            "cost_per_hour_usd": dev.cost_per_hour,
            "datasheet": {
                "peak_tflops": to_plain(dev.peak_tflops),
                "memory_bandwidth_gbps": dev.memory_bandwidth_gbps,
            },
            "lab": {
                "band_tflops": to_plain(dev.lab_band_tflops),
                "done_tflops": to_plain(dev.lab_done_tflops),
            },
        }
        if record["status"] == "measured":
            run = record["run"]
            hours = run["wall_s"] / 3600
            peaks = {
                r.dtype: {"tflops": r.peak_tflops, "source": r.peak_source}
                for r in record["rows"]
                if r.status == "measured"
            }
            entry |= {
                "hardware": record["hardware"],
                "details": record.get("found", {}),
                "measured_at": run["started_at"],
                "git_revision": run["git_revision"],
                "versions": run["versions"],
                "threads": run["threads"],
                "wall_s": run["wall_s"],
                "run_cost_usd": None if dev.cost_per_hour is None else dev.cost_per_hour * hours,
                "peaks_used": peaks,
                "memory_copy": {
                    k: record["memory"][k]
                    for k in ("bytes_moved", "median_s", "min_s", "max_s", "spread", "gbps")
                },
            }
        devices[name] = entry
    return {"lab": LAB, "bench": to_plain(cfg.bench), "devices": devices}
