"""Manifest entries for tests: the fields a test names, as manifest.json holds them, completed
with a plain value for every field it leaves out, and read as the plot and report read them."""

from typing import Any

from roofline.interpretation.manifest import DeviceEntry, entry_from_json

# Every field of a device's entry, whatever its status, plainly.
ENTRY = {
    "sku": "H100 SXM5 80GB",
    "kind": "cuda",
    "status": "measured",
    "show_pending": True,
    "cost_per_hour_usd": None,
    "datasheet": {
        "sku_name": None,
        "source": "",
        "missing": None,
        "peak_tflops": {},
        "memory_bandwidth_gbps": None,
        "peak_clock_mhz": None,
        "sm_count": None,
        "published": [],
    },
    "lab": {"band_tflops": {}, "done_tflops": {}, "written_for": None, "line": None},
}
# ...and of a measured one's run.
RUN = {
    "hardware": {},
    "details": {},
    "measured_at": "2026-12-01T12:00:00+00:00",
    "git_revision": None,
    "versions": {},
    "environment": {},
    "threads": None,
    "wall_s": 1.0,
    "run_cost_usd": None,
    "peaks_used": {},
    "memory_copy": {
        "bytes_moved": 1.0,
        "median_s": 1.0,
        "min_s": 1.0,
        "max_s": 1.0,
        "spread": 0.0,
        "gbps": 1.0,
    },
    "lab_checks": [],
}


def entry(**fields: Any) -> DeviceEntry:
    """A device's entry with these fields; a JSON object's given fields replace the plain one's
    and leave its others (datasheet={"peak_clock_mhz": 1830} keeps the rest of the datasheet)."""
    plain = ENTRY | (RUN if fields.get("status", "measured") == "measured" else {})
    data = {
        key: value | fields[key]
        if isinstance(value, dict) and isinstance(fields.get(key), dict)
        else fields.get(key, value)
        for key, value in plain.items()
    }
    return entry_from_json(data | {k: v for k, v in fields.items() if k not in plain}, "a test")
