"""Where a `dvc repro`'s time went: each stage process logs its imports and its work, keyed by
the DVC process that ran it, and the last stage says the whole, so that whoever slows the
pipeline next sees by how much. A measuring record keeps its own split (roofline.measuring)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

LOG = Path(".dvc/tmp/spent.jsonl")  # DVC's own scratch folder: never tracked, never pushed
SMALL_S = 0.5  # a stage's work under this (a pending device's) is counted with the rest


@dataclass(frozen=True)
class Run:
    """The `dvc repro` (or `dvc exp run`) a stage process belongs to."""

    key: str  # the DVC process: its pid and start, as the OS keeps them
    started: float  # its start, in time.time()'s seconds
    setup_s: float | None  # `uv run`'s own time before it started DVC; None without uv


@dataclass(frozen=True)
class StageTime:
    """One stage process: from its start to its main (imports), and its main (work)."""

    run: str  # its Run's key
    stage: str  # "benchmark cpu", "report"
    started: float
    imports_s: float
    work_s: float


class Process(NamedTuple):
    """A process as the run's accounting needs it."""

    key: str  # its pid and start as the OS counts it: the same whoever reads it
    parent: int | None
    started: float  # in time.time()'s seconds
    argv: list[str]


def process(pid: int) -> Process | None:
    """A process by pid, from Linux's /proc (psutil's import alone is 50 ms in every stage, and
    its start counts from a boot time rounded to the second); psutil's elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
        uptime = float(Path("/proc/uptime").read_text(encoding="utf-8").split()[0])
    except (OSError, IndexError, ValueError):
        return _by_psutil(pid)
    age = uptime - int(stat[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, since boot
    key = f"{pid}:{stat[19]}"
    return Process(key, int(stat[1]) or None, time.time() - age, argv.split("\0")[:-1])


def _by_psutil(pid: int) -> Process | None:
    import psutil  # macOS and Windows: no /proc

    try:
        found = psutil.Process(pid)
        started = found.create_time()
        return Process(f"{pid}:{started}", found.ppid() or None, started, found.cmdline())
    except psutil.Error:
        return None


def this_run() -> Run | None:
    """The DVC process this one was started by (through a shell), or None outside DVC."""
    here = process(os.getpid())
    while here is not None and here.parent is not None:
        parent = process(here.parent)
        if parent is None:
            return None
        if any(Path(part).name in ("dvc", "dvc.exe") for part in parent.argv[:3]):
            above = process(parent.parent) if parent.parent else None
            uv = above is not None and Path(above.argv[0] if above.argv else "").stem == "uv"
            setup = parent.started - above.started if uv and above else None
            return Run(parent.key, parent.started, setup)
        here = parent
    return None


def started_at() -> float:
    """When this process started, in time.time()'s seconds."""
    this = process(os.getpid())
    return this.started if this is not None else time.time()


@contextlib.contextmanager
def logged(stage: str, log: Path = LOG) -> Iterator[None]:
    """Time a stage's main and log it, with its imports, under the DVC run that started it
    (nothing is logged outside DVC, or where DVC's scratch folder is not there)."""
    begun, wall = time.perf_counter(), time.time()
    try:
        yield
    finally:
        # Never the stage's failure, nor a mask over it: timing is worth less than either.
        with contextlib.suppress(Exception):
            run = this_run() if log.parent.is_dir() else None
            if run is not None:
                started = started_at()
                work = time.perf_counter() - begun
                entry = StageTime(run.key, stage, started, wall - started, work)
                with log.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(asdict(entry)) + "\n")  # one short line: appended whole


def stages_of(run: Run, log: Path = LOG) -> list[StageTime]:
    """The stage processes of `run` logged so far, in the order they started."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        with contextlib.suppress(ValueError, TypeError):
            entry = StageTime(**json.loads(line))
            if entry.run == run.key:
                out.append(entry)
    return sorted(out, key=lambda s: s.started)


def said_at_end(
    stage: str, measured: dict[str, tuple[float, dict[str, float]]], log: Path = LOG
) -> str:
    """The summary, said by the last stage of a run (`stage`, its work so far counted); ""
    outside DVC. `measured`: each measured device's (when it was measured, its split), of
    which only those this run measured are said (a device pulled from a pod was not)."""
    run = this_run() if log.parent.is_dir() else None
    if run is None:
        return ""
    now = time.time()
    # Its imports are its time before the call; its work, the rest.
    started = started_at()
    own = StageTime(run.key, stage, started, 0.0, now - started)
    # A record's start is written to the second: a second's grace.
    here = {name: split for name, (at, split) in measured.items() if at >= run.started - 1}
    return summary(run, [*stages_of(run, log), own], now, here)


def summary(
    run: Run, stages: list[StageTime], now: float, measured: dict[str, dict[str, float]]
) -> str:
    """Where the run's time went, a line each: uv's set-up, DVC's own, the stages' imports,
    each stage's work (a benchmark that measured, split by what it measured: `measured`, by
    device; the other stages under SMALL_S together), and the total from uv's start (or
    DVC's) to `now`."""
    total = now - run.started + (run.setup_s or 0.0)
    in_stages = sum(s.imports_s + s.work_s for s in stages)
    lines = [f"where the time went ({total:.0f} s in all):"]
    if run.setup_s is not None:
        lines.append(f"  set-up (uv, before DVC started): {run.setup_s:.1f} s")
    lines.append(
        f"  DVC itself (the pipeline, hashes, locks): {now - run.started - in_stages:.1f} s"
    )
    imports = sum(s.imports_s for s in stages)
    lines.append(f"  imports, {len(stages)} stage processes: {imports:.1f} s")

    def split_of(s: StageTime) -> dict[str, float] | None:
        stage, _, device = s.stage.partition(" ")
        return measured.get(device) if stage == "benchmark" else None

    shown = [s for s in stages if s.work_s >= SMALL_S or split_of(s) is not None]
    for s in sorted(shown, key=lambda s: -s.work_s):
        parts = sorted((split_of(s) or {}).items(), key=lambda p: -p[1])
        said = ", ".join(f"{what} {sec:.1f} s" for what, sec in parts if sec >= 0.05)
        lines.append(f"  {s.stage}: {s.work_s:.1f} s" + (f" ({said})" if said else ""))
    if rest := [s for s in stages if s not in shown]:
        lines.append(f"  {len(rest)} other stages: {sum(s.work_s for s in rest):.1f} s")
    return "\n".join(lines)
