"""results.csv and knobs.csv as the plot, the report and the verdict read them back: the
columns aggregate writes (roofline/interpretation/rows.py), or an error naming the file and the
way out."""

from pathlib import Path

import pandas as pd

from roofline.core.errors import SchemaError
from roofline.interpretation.manifest import REMAKE
from roofline.interpretation.rows import CSV_COLUMNS, KNOB_COLUMNS


def load_table(path: Path, columns: list[str] = CSV_COLUMNS) -> pd.DataFrame:
    """results.csv (or knobs.csv, with KNOB_COLUMNS) as the plot and report read it (empty cells
    are missing, text is text), or SchemaError when it is not the table aggregate writes."""
    try:
        table = pd.read_csv(path, encoding="utf-8", keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as err:
        raise SchemaError(f"{path} cannot be read as a table ({err}); {REMAKE}") from err
    if list(table.columns) != columns:
        raise SchemaError(f"{path} does not have the columns aggregate writes; {REMAKE}")
    return table


def load_knobs(path: Path) -> pd.DataFrame:
    return load_table(path, KNOB_COLUMNS)
