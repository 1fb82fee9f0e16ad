"""Errors that end a stage or command with their message alone: each names the value or state at
fault, what is allowed, and the way out. `run` reports every one of them the same way, for stages
and commands alike."""

import errno
import sys
import traceback
from collections.abc import Callable


class RooflineError(Exception):
    """A refusal with a message meant for the user, not a traceback."""


class ConfigError(RooflineError, ValueError):
    """A config value that is not allowed."""


class SchemaError(RooflineError, ValueError):
    """A results file that does not follow the results schema."""


class HardwareError(RooflineError):
    """What this machine is cannot be told, or cannot run what was asked of it."""


class WriteError(RooflineError):
    """A file this run must write cannot be written where it goes (its folder's permissions, a
    read-only file system)."""


class RecordError(RooflineError):
    """The recorded state of a device forbids this run on this machine (the several-machines
    rules): measuring here would overwrite or mislabel another machine's results."""


def run(main: Callable[[], object], kept: str = "") -> None:
    """Run a command's main: a RooflineError ends it with its message alone; an interrupt,
    out-of-memory or CUDA error ends it saying what happened, then `kept` (what was left as
    it was, when the caller knows)."""
    after = f"\n{kept}" if kept else ""
    try:
        main()
    except RooflineError as err:
        sys.exit(f"error: {err}{after}")
    except KeyboardInterrupt:
        sys.exit(f"interrupted; {kept}" if kept else "interrupted")
    except (MemoryError, RuntimeError, OSError) as err:  # out of memory, CUDA, a full disk
        full = getattr(err, "errno", None) == errno.ENOSPC
        if not full:  # a full disk is said whole by the message; the rest may be a bug
            traceback.print_exc()
        hint = "; free some disk space, then run again" if full else ""
        sys.exit(f"failed: {type(err).__name__}: {err}{hint}{after}")
