"""Recombine every device's results.json and sweep.json into results.csv, manifest.json and
metrics.json."""

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


def results_table(*groups: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Every row of every record (the lab's, then the sweeps'), in the schema's columns."""
    rows = [
        vars(row) for records in groups for record in records.values() for row in record["rows"]
    ]
    table = pd.DataFrame(rows, columns=CSV_COLUMNS)
    return table.astype({"m": "Int64", "n": "Int64", "k": "Int64", "repeats": "Int64"})


def metrics(table: pd.DataFrame) -> dict[str, Any]:
    """MFU and TFLOP/s of each device's measured lab rows, for `dvc metrics show / diff`."""
    lab = table[(table.status == "measured") & (table.series == "lab")]
    out: dict[str, Any] = {}
    for r in lab.itertuples():
        key = (
            r.dtype
            if len(lab[(lab.device == r.device) & (lab.dtype == r.dtype)]) == 1
            else f"{r.dtype}_{r.m}x{r.n}x{r.k}"
        )
        out.setdefault(r.device, {})[key] = {
            "tflops": r.achieved_tflops,
            "mfu": None if pd.isna(r.mfu) else r.mfu,
        }
    return out


def manifest(
    cfg: DictConfig,
    records: dict[str, dict[str, Any]],
    sweeps: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
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
                "environment": run.get("environment", {}),
                "threads": run["threads"],
                "wall_s": run["wall_s"],
                "run_cost_usd": None if dev.cost_per_hour is None else dev.cost_per_hour * hours,
                "peaks_used": peaks,
                "memory_copy": {
                    k: record["memory"][k]
                    for k in ("bytes_moved", "median_s", "min_s", "max_s", "spread", "gbps")
                },
            }
        sweep = (sweeps or {}).get(name)
        if sweep and sweep["status"] == "measured" and sweep["sweep"] != "none":
            entry["sweep"] = {
                "name": sweep["sweep"],
                "measured_at": sweep["run"]["started_at"],
                "wall_s": sweep["run"]["wall_s"],
                "git_revision": sweep["run"]["git_revision"],
            }
        devices[name] = entry
    return {"lab": LAB, "bench": to_plain(cfg.bench), "sweep": cfg.sweep.name, "devices": devices}
