"""Which files a module runs, read from its import statements.

A stage's key hashes them (roofline/machines/keys.py). The pipeline files list them as the
stage's code."""

import functools
import itertools
from collections.abc import Callable
from pathlib import Path

from roofline.core.paths import posix

OUR_PACKAGES = ("roofline", "stages")


def module_file(module: str, root: Path) -> Path | None:
    """The file of a dotted module name under `root`, or None where there is none."""
    if not all(part.isidentifier() for part in module.split(".")):
        return None  # not a module's name (":f", "a..b", "x.*")
    base = Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if (root / candidate).is_file():
            return candidate
    return None


def imported_modules(path: Path) -> frozenset[str]:
    """Dotted names of our modules that a file imports, anywhere in it, or starts as a process
    of its own (`[sys.executable, "-m", "roofline.measuring.capped", ...]`)."""
    return frozenset(n for n in imports_in(path.read_text(encoding="utf-8")) if ours(n))


def ours(name: str) -> bool:
    return name.split(".")[0] in OUR_PACKAGES


@functools.cache  # the measuring stages share most files: each is parsed once per process
def imports_in(text: str) -> frozenset[str]:
    """Every dotted name a file's text imports, or starts with `-m`; a relative import keeps
    its leading dots (".helper", "..pkg.mod"), for `absolute` to resolve."""
    import ast  # here: the probe imports this module on every `dvc repro`

    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            join = "" if base.endswith(".") else "."
            names |= {base} | {f"{base}{join}{alias.name}" for alias in node.names}
        elif isinstance(node, ast.List | ast.Tuple):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            names |= {module for flag, module in itertools.pairwise(words) if flag == "-m"}
    return frozenset(name for name in names if isinstance(name, str) and name.strip("."))


def absolute(name: str, package: str) -> str:
    """A name `imports_in` found, made absolute from the importing module's `package`."""
    if not name.startswith("."):
        return name
    rest = name.lstrip(".")
    up = len(name) - len(rest) - 1
    parts = package.split(".") if package else []
    base = parts[: len(parts) - up] if up else parts
    return ".".join([*base, rest] if rest else base)


def file_closure(module: str, root: Path, keep: Callable[[str], bool]) -> list[str]:
    """Every repository file that `python -m module` runs, following the imports `keep`
    accepts: the module, what it imports, and so on, with the packages' __init__ files. A file
    that does not parse (a syntax error, not UTF-8) is listed, and its imports not followed."""
    seen: set[Path] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        packages = [".".join(parts[:i]) for i in range(1, len(parts))]
        for dotted in [*packages, name]:
            path = module_file(dotted, root)
            if path is None or path in seen:
                continue
            seen.add(path)
            package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
            try:
                found = imports_in((root / path).read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue  # hashed as it is; what it would import is not known
            todo += sorted(n for n in (absolute(i, package) for i in found) if n and keep(n))
    return sorted(posix(path) for path in seen)


def code_deps(module: str, root: Path) -> list[str]:
    """Every file of ours that `python -m module` runs."""
    return file_closure(module, root, ours)


def digest(data: bytes) -> str:
    import hashlib  # here: the probe's fast path imports this module and needs none

    return hashlib.sha256(data).hexdigest()[:16]


def files_digest(files: list[str] | list[Path], root: Path = Path(".")) -> str:
    """The hash of files by path and content. The same on every system: paths with "/", lines
    ending in "\n" (a Windows checkout's CRLF files are the same files)."""
    return digest(
        b"".join(
            Path(f).as_posix().encode() + b"\0" + (root / f).read_bytes().replace(b"\r\n", b"\n")
            for f in files
        )
    )


def stats(paths: list[Path], root: Path = Path(".")) -> list[list]:
    """[path from `root`, size, mtime] of each file (None, None where there is none): how a
    cache kept beside its answer tells that nothing it was made from has changed."""
    out = []
    for path in paths:
        try:
            st = (root / path).stat()
            out.append([str(path), st.st_size, st.st_mtime_ns])
        except OSError:
            out.append([str(path), None, None])
    return out
