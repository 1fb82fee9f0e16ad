"""One measurement of a device at a time on a machine.

Two at once (two clones, experiments run in parallel) would each measure a share of the
machine and record it as clean. So a measuring stage holds its device's lock, machine-wide,
while it measures and writes. A second one waits, and says which process it waits for."""

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

from filelock import FileLock, Timeout

from roofline.core.errors import ConfigError, RecordError, WriteError
from roofline.core.files import write_text_atomic

# How long a waiter gives the lock's new holder to name itself: it writes its `.holder` file
# just after taking the lock, and a waiter can arrive in between.
NAMING_S = 2.0


class Holder(TypedDict):
    """Who holds a device's lock, as its `.holder` file says (for whoever waits)."""

    stage: str
    pid: int
    cwd: str
    since: str  # when it took the lock, local time


# The holds live in one folder per machine, whatever TMPDIR a shell or tool sets (macOS gives
# each user their own): /tmp on Linux and macOS, %PROGRAMDATA% on Windows. HOLD_DIR_ENV moves
# them, for what is not one machine's measurement (the tests' private clones).
HOLD_DIR_ENV = "ROOFLINE_HOLD_DIR"
# How long a second measurement waits for the first before it gives up, in seconds (a whole
# GPU benchmark at the lab's sizes takes minutes); HOLD_WAIT_ENV changes it.
HOLD_WAIT_S = 3600.0
HOLD_WAIT_ENV = "ROOFLINE_HOLD_WAIT_S"


def hold_dir(windows: bool = os.name == "nt") -> Path:
    if os.environ.get(HOLD_DIR_ENV):
        return Path(os.environ[HOLD_DIR_ENV])
    if windows:
        return Path(os.environ.get("PROGRAMDATA", r"C:\ProgramData"))
    return Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())


def lock_path(name: str) -> Path:
    return hold_dir() / f"roofline-measuring-{name}.lock"


def wait_s() -> float:
    text = os.environ.get(HOLD_WAIT_ENV, str(HOLD_WAIT_S))
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ConfigError(f"{HOLD_WAIT_ENV}={text!r}: allowed, a number of seconds, 0 or more")
    return seconds


def holder(path: Path, patience_s: float = NAMING_S) -> str:
    """Who holds the lock at `path`, as its `.holder` file says; waits up to `patience_s` for
    a holder that has taken the lock but not yet named itself."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            who: Holder = json.loads(path.with_suffix(".holder").read_text(encoding="utf-8"))
            return f"its {who['stage']} (pid {who['pid']}, in {who['cwd']}, since {who['since']})"
        except (OSError, ValueError, KeyError):
            if time.monotonic() >= deadline:
                return f"another process (it holds {path})"
            time.sleep(0.05)


@contextlib.contextmanager
def holding(name: str, stage: str, measuring: bool = True) -> Iterator[None]:
    """The device's lock for this block (when `measuring`): taken at once if it is free, else
    waited for."""
    if not measuring:
        yield
        return
    path = lock_path(name)
    patience = wait_s()
    lock = FileLock(str(path), mode=0o666)  # one machine's lock, whoever measures on it
    try:
        lock.acquire(timeout=0)
    except Timeout:
        who = holder(path)
        print(
            f"{name}: waiting for {who}, which is measuring it on this machine: two "
            "measurements at once would each get a share of it (giving up after "
            f"{patience:g} s, {HOLD_WAIT_ENV})",
            file=sys.stderr,
            flush=True,
        )
        try:
            lock.acquire(timeout=patience)
        except Timeout:
            raise RecordError(
                f"{name}: gave up after {patience:g} s waiting for {who} (its hold: {path}); "
                "nothing was measured: let it finish or end it, then run again"
            ) from None
    named = path.with_suffix(".holder")
    try:
        since = time.strftime("%Y-%m-%dT%H:%M:%S")
        who: Holder = {"stage": stage, "pid": os.getpid(), "cwd": os.getcwd(), "since": since}
        # Who holds it is a courtesy to whoever waits: a refused write measures all the same.
        with contextlib.suppress(OSError, WriteError):
            write_text_atomic(named, json.dumps(who))  # a waiter reads it whole or not at all
        yield
    finally:
        with contextlib.suppress(OSError):  # never names a holder that has gone
            named.unlink(missing_ok=True)
        lock.release()
