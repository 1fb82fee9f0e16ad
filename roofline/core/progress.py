"""A progress bar over measured points, with the time left; none when stderr is not a
terminal (CI logs, pipes), where each point's one-line summary is all that is printed."""

import sys
from collections.abc import Iterable
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


def progress(items: Iterable[T], desc: str, total: int | None = None) -> tqdm:
    return tqdm(
        items,
        desc=desc,
        total=total,
        unit="point",
        file=sys.stderr,
        dynamic_ncols=True,
        disable=not sys.stderr.isatty(),
        bar_format="{l_bar}{bar}| {n}/{total} [{elapsed}<{remaining}]{postfix}",
    )


def say(line: str) -> None:
    """Print above a running bar (or plainly, when there is none)."""
    tqdm.write(line)
