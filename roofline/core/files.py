"""Files, written atomically with the user's umask and read as UTF-8: a reader never sees half
a file, and an interrupted write leaves the old one whole."""

import contextlib
import errno
import json
import os
import secrets
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from roofline.core.errors import Interrupted, SchemaError, WriteError


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise SchemaError(
            f"{path} is not valid JSON ({err}); restore it with `uv run dvc checkout --force {path}`"
        ) from err


@contextlib.contextmanager
def atomic_paths(*paths: Path) -> Iterator[list[Path]]:
    """A temporary path beside each of `paths` to write to; all renamed onto theirs when the
    block ends, and all removed if it fails: readers see the old files or the new ones, never
    half of one, and a failure part-way through the block changes none of them."""
    temps = []
    try:
        for path in paths:
            temps.append(new_file_beside(path))
        yield temps
        with signals_held() as came:  # renamed as a set: an interrupt waits for the last
            for tmp, path in zip(temps, paths, strict=True):
                os.replace(tmp, path)
    except BaseException:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        raise
    if came:
        names = ", ".join(path.name for path in paths)
        raise Interrupted(f"once every file was written ({names}: the new ones)", written=True)


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """SIGINT and SIGTERM held while the block runs (a few renames), and listed: the caller
    says they came once it is done. Only the main thread can hold them; elsewhere none is."""
    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield came
        return
    # One ignored here (a job started with `&` ignores SIGINT) stays ignored.
    held = [
        sig for sig in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(sig) != signal.SIG_IGN
    ]
    before = {sig: signal.signal(sig, lambda signum, _: came.append(signum)) for sig in held}
    try:
        yield came
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


# Refusals to create a file that its folder's permissions, or a read-only file system, make.
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def new_file_beside(path: Path) -> Path:
    """A new, empty, hidden file in `path`'s folder (made if missing), created as a plain open()
    creates one: mode 0o666 less the umask, applied by the OS (tempfile's are 0o600, and reading
    the umask means changing it for every thread). WriteError where the folder is not writable."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{path.suffix}")
            try:
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                return tmp
            except FileExistsError:
                continue  # another writer's name: draw again
    except OSError as err:
        if err.errno not in UNWRITABLE:
            raise
        folder = Path(err.filename).parent if err.filename else path.parent
        raise WriteError(
            f"cannot write {path}: {err.strerror} in {folder}. Make that folder writable (its "
            f"permissions: `chmod u+w {folder}`; or its file system, where it is mounted "
            "read-only), then run again"
        ) from err


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """atomic_paths for one file."""
    with atomic_paths(path) as (tmp,):
        yield tmp


def json_text(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json_text(data))


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_texts_atomic(texts: dict[Path, str]) -> None:
    """Several files, all or none (atomic_paths)."""
    with atomic_paths(*texts) as temps:
        for tmp, text in zip(temps, texts.values(), strict=True):
            tmp.write_text(text, encoding="utf-8")


def keep_cache(path: Path, data: Any) -> None:
    """A cache under .dvc/tmp, written whole (two probes at once: either one's file); outside a
    DVC repository nothing is kept."""
    if path.parent.is_dir():
        write_json_atomic(path, data)
