"""One measurement of a device at a time on a machine: two at once (two clones, experiments run
from a queue in parallel) would each measure a share of the machine and record it as clean. A
measuring stage holds its device's lock, machine-wide, while it measures and writes; a second
one waits for it, saying which process it waits for."""

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

from roofline.core.errors import WriteError
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


def lock_path(name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"roofline-measuring-{name}.lock"


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
    lock = FileLock(str(path), mode=0o666)  # one machine's lock, whoever measures on it
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(
            f"{name}: waiting for {holder(path)}, which is measuring it on this machine: two "
            "measurements at once would each get a share of it",
            file=sys.stderr,
            flush=True,
        )
        lock.acquire()
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
