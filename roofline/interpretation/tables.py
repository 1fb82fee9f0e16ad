"""results.csv and knobs.csv as the plot, the report and the verdict read them back: the
columns aggregate writes (roofline/interpretation/rows.py), or an error naming the file and the
way out."""

import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from roofline.core.errors import SchemaError
from roofline.interpretation.manifest import REMAKE
from roofline.interpretation.rows import CSV_COLUMNS, KNOB_COLUMNS, KnobRow, Row


def is_number(hint: object) -> bool:
    """int, float, or either or None."""
    if hint in (int, float):
        return True
    args = set(typing.get_args(hint))
    return (
        isinstance(hint, types.UnionType)
        and bool(args - {type(None)})
        and (args - {type(None)} <= {int, float})
    )


def numeric_columns(row_type: type, columns: list[str]) -> list[str]:
    """The table's columns whose type is a number (maybe missing), from the row's dataclass."""
    hints = typing.get_type_hints(row_type)
    return [
        f.name
        for f in dataclasses.fields(row_type)
        if f.name in columns and is_number(hints[f.name])
    ]


NUMBERS = {
    tuple(CSV_COLUMNS): numeric_columns(Row, CSV_COLUMNS),
    tuple(KNOB_COLUMNS): numeric_columns(KnobRow, KNOB_COLUMNS),
}
MFU_MAX = 1.0  # above its dense peak a result is flagged with its MFU left blank (rows.py)


def check_values(table: pd.DataFrame, path: Path, columns: list[str]) -> pd.DataFrame:
    """The table with its number columns as numbers, or SchemaError naming the first cell that
    is not a finite, non-negative number (row as the file counts its lines), or an MFU above 1."""
    for column in NUMBERS.get(tuple(columns), []):
        raw = table[column]
        numbers = pd.to_numeric(raw, errors="coerce")
        least = 1 if column in ("m", "n", "k") else 0  # a shape's sides are whole and positive
        bad = raw.notna() & ~numbers.between(least, math.inf, inclusive="left")  # nan, inf out
        if column == "mfu":
            bad |= numbers > MFU_MAX
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            allowed = (
                f"0 to {MFU_MAX:g}" if column == "mfu" else f"a finite number, {least} or more"
            )
            raise SchemaError(
                f"{path}, line {i + 2} ({table['device'].iloc[i]}): {column}={raw.iloc[i]}; "
                f"allowed: empty, or {allowed}; {REMAKE}"
            )
        table[column] = numbers
    return table


def load_table(
    path: Path, columns: list[str] = CSV_COLUMNS, devices: Iterable[str] | None = None
) -> pd.DataFrame:
    """results.csv (or knobs.csv, with KNOB_COLUMNS) as the plot and report read it (empty cells
    are missing, text is text), or SchemaError when it is not the table aggregate writes: its
    columns, its numbers, and (given the manifest's `devices`) the devices it names."""
    try:
        table = pd.read_csv(path, encoding="utf-8", keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as err:
        raise SchemaError(f"{path} cannot be read as a table ({err}); {REMAKE}") from err
    if list(table.columns) != columns:
        raise SchemaError(f"{path} does not have the columns aggregate writes; {REMAKE}")
    table = check_values(table, path, columns)
    if devices is not None:
        known = set(devices)
        unknown = [(i, d) for i, d in enumerate(table["device"]) if d not in known]
        if unknown:
            i, name = unknown[0]
            raise SchemaError(
                f"{path}, line {i + 2}: device={name!r} is not in manifest.json (its devices: "
                f"{', '.join(sorted(known)) or 'none'}); {REMAKE}"
            )
        # Aggregate writes a row for every point of every device, a pending one's too; a lost
        # one has none (knobs may have none at all: knobs=none).
        rowless = [
            name for name in known - set(table["device"]) if status_of(devices, name) != "lost"
        ]
        if columns == CSV_COLUMNS and rowless:
            rowless.sort()
            what = "has its header only" if table.empty else f"has no row of {rowless[0]}"
            raise SchemaError(
                f"{path} {what}, though manifest.json lists {', '.join(rowless)} (aggregate "
                f"writes a row for every point of every device, pending or measured); {REMAKE}"
            )
    return table


def status_of(devices: Iterable[str], name: str) -> str | None:
    """A device's status where `devices` is the manifest's (name -> entry, or its JSON)."""
    entry = devices.get(name) if isinstance(devices, Mapping) else None
    return entry.get("status") if isinstance(entry, Mapping) else getattr(entry, "status", None)


def load_knobs(path: Path, devices: Iterable[str] | None = None) -> pd.DataFrame:
    return load_table(path, KNOB_COLUMNS, devices)
