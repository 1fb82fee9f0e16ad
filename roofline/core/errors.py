"""Errors that end a stage or command with their message alone: each names the value or state at
fault, what is allowed, and the way out. `run` reports every one of them the same way, for stages
and commands alike."""

import errno
import os
import signal
import stat
import sys
import threading
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


class Interrupted(KeyboardInterrupt):
    """An interrupt, said by `run` as "interrupted" and this message: a signal other than
    Ctrl-C's ("by SIGTERM"), or what was written before it landed (`written`)."""

    def __init__(self, said: str, written: bool = False) -> None:
        super().__init__(said)
        self.written = written


def on_interrupt() -> Callable[[], None]:
    """From here on, an interrupt says one line, and SIGTERM (what `timeout`, systemd and a
    pre-empted pod send) ends the process as Ctrl-C does: through every `finally`, so no
    temporary file is left. Returns what puts the previous handlers back."""
    hook, term = sys.excepthook, None
    if threading.current_thread() is threading.main_thread():
        term = signal.signal(signal.SIGTERM, terminated)
    sys.excepthook = one_line

    def restore() -> None:
        sys.excepthook = hook
        if term is not None:
            signal.signal(signal.SIGTERM, term)

    return restore


def terminated(signum: int, frame: object) -> None:
    raise Interrupted("by SIGTERM")


def one_line(kind: type[BaseException], value: BaseException, tb: object) -> None:
    """sys.excepthook: an interrupt outside `run` (while a stage imports) as one line."""
    if issubclass(kind, KeyboardInterrupt):
        print(interrupted(value, "nothing was written"), file=sys.stderr)
    else:
        sys.__excepthook__(kind, value, tb)  # type: ignore[arg-type]


def interrupted(err: BaseException, kept: str) -> str:
    said = f" {err}" if isinstance(err, Interrupted) else ""
    return f"interrupted{said}; {kept}" if kept else f"interrupted{said}"


def stdout_is_full() -> bool:
    """Whether standard output is what ran out of space: a device (a terminal never does;
    /dev/full always does) or a file on a full file system. If so it is set aside, so that
    Python's own flush at exit says nothing more."""
    try:
        fd = sys.stdout.fileno()
        found = os.fstat(fd)
        full = stat.S_ISCHR(found.st_mode) or (
            stat.S_ISREG(found.st_mode) and os.fstatvfs(fd).f_bavail == 0
        )
    except (OSError, ValueError, AttributeError):  # no descriptor; Windows has no statvfs
        return False
    if full:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    return full


def run(main: Callable[[], object], kept: str = "") -> None:
    """Run a command's main: a RooflineError ends it with its message alone; an interrupt,
    out-of-memory or CUDA error ends it saying what happened, then `kept` (what was left as
    it was, when the caller knows)."""
    after = f"\n{kept}" if kept else ""
    restore = on_interrupt()
    try:
        main()
        sys.stdout.flush()  # a full standard output said here, not by Python at exit
    except RooflineError as err:
        sys.exit(f"error: {err}{after}")
    except KeyboardInterrupt as err:
        written = isinstance(err, Interrupted) and err.written  # files.atomic_paths
        sys.exit(interrupted(err, "" if written else kept))
    except (MemoryError, RuntimeError, OSError) as err:  # out of memory, CUDA, a full disk
        too_big = getattr(err, "errno", None) == errno.EFBIG
        if too_big:  # `ulimit -f`: Python ignores SIGXFSZ, so the write fails instead
            sys.exit(
                f"failed: {err.strerror}: {err.filename or 'a file'} would pass this shell's "
                f"file-size limit (`ulimit -f`); raise it (`ulimit -f unlimited`), then run "
                f"again{after}"
            )
        full = getattr(err, "errno", None) == errno.ENOSPC
        if full and stdout_is_full():  # a redirect to a full file or device: not our disk
            sys.exit(
                f"failed: standard output could not be written ({err.strerror}): it goes to a "
                f"full file or device (`> /dev/full`?); nothing else was short of space{after}"
            )
        if not full:  # a full disk is said whole by the message; the rest may be a bug
            traceback.print_exc()
        hint = "; free some disk space, then run again" if full else ""
        sys.exit(f"failed: {type(err).__name__}: {err}{hint}{after}")
    finally:
        restore()
