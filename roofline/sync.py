"""`dvc push` / `dvc pull`, with a failure that names the remote and what to check.

    uv run python -m roofline.sync push [-r REMOTE]
    uv run python -m roofline.sync pull [-r REMOTE] [--allow-missing]

DVC does the transfer. A pull fetches everything before it checks anything out, so a pull
whose fetch fails leaves the workspace as it was; one whose remote lacks an output checks out
the rest, and says what it checked out, what it lacks and what DVC removed. A push never touches
the workspace."""

import argparse
import os
from typing import NotRequired, TypedDict
from urllib.parse import urlparse

from dvc.exceptions import CheckoutError
from dvc.repo import Repo

from roofline.core.errors import ConfigError, RooflineError, run

CHECKS = {
    "s3": "the bucket exists and `endpointurl` (R2, B2, MinIO) is reachable from here; credentials: "
    "`uv run dvc remote modify --local {name} access_key_id ...` and `secret_access_key ...`, "
    "or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the environment",
    "gs": "the bucket exists; credentials: `uv run dvc remote modify --local {name} "
    "credentialpath /path/to/key.json`, or GOOGLE_APPLICATION_CREDENTIALS",
    "ssh": "`ssh` to the host works with the same user and key "
    "(`uv run dvc remote modify --local {name} keyfile ...`) and the path exists there",
    "": "the path exists and is writable from here",
}


class CheckoutStats(TypedDict):
    """How many files a checkout changed, by kind (DVC's `repo.checkout` result's stats)."""

    modified: int
    added: int
    deleted: int


class CheckoutResult(TypedDict):
    """What DVC's `repo.checkout` returns, and a CheckoutError carries: the outputs it changed,
    by kind; those it could not check out (`failed`) where it raised."""

    modified: list[str]
    added: list[str]
    deleted: list[str]
    stats: CheckoutStats
    failed: NotRequired[list[str]]


class Pulled(CheckoutStats):
    """What a pull did: the files fetched, then the checkout's stats."""

    fetched: int


def remote_of(repo: Repo, name: str | None) -> tuple[str, str]:
    """(name, URL) of the remote a push or pull would use."""
    remotes = repo.config["remote"]
    name = name or repo.config["core"].get("remote")
    known = ", ".join(remotes) or "none"
    if not name:
        raise ConfigError(
            f"no default DVC remote is set (remotes configured: {known}). Add one with "
            "`uv run dvc remote add -d NAME URL`, or name one with `-r NAME` "
            "(docs/several-machines.md: laptop -> pod -> laptop)"
        )
    if name not in remotes:
        raise ConfigError(
            f"no DVC remote {name!r}; remotes configured: {known}. Add it with "
            f"`uv run dvc remote add {name} URL` (docs/several-machines.md: laptop -> pod -> laptop)"
        )
    return name, remotes[name]["url"]


def explain(verb: str, name: str, url: str, err: BaseException) -> str:
    scheme = urlparse(url).scheme if "://" in url else ""
    checks = CHECKS.get(scheme, CHECKS[""]).format(name=name)
    return (
        f"{verb} with remote '{name}' ({url}) failed: {type(err).__name__}: {err}\n"
        f"Check: {checks}.\nThe workspace is as it was."
    )


def listed(paths: list[str]) -> str:
    return ", ".join(sorted(os.path.relpath(p) for p in paths)) or "none"


def lacking(
    name: str, url: str, result: CheckoutResult, present: set[str], cached: set[str]
) -> str:
    """A checkout that failed after a fetch (DVC's CheckoutError result), in one paragraph:
    the outputs the remote lacks, what was checked out and removed meanwhile, the way out.
    `present`: the outputs in the workspace before it; `cached`: those DVC's cache has now."""
    failed = [os.path.relpath(p) for p in result.get("failed", [])]
    lacks = [p for p in failed if p not in cached]
    said = [
        f"pull with remote '{name}' ({url}) could not check out every output its dvc.lock files name"
    ]
    if lacks:
        said.append(f"the remote lacks {listed(lacks)}, and so does this machine's DVC cache")
    if unwritten := [p for p in failed if p in cached]:  # its data is here: writing it failed
        said.append(
            f"{listed(unwritten)} could not be written although DVC's cache has them (check "
            "the folders' permissions and free space, then `uv run dvc checkout`)"
        )
    changed = [
        f"{kind} {listed(result[kind])}"
        for kind in ("added", "modified", "deleted")
        if result.get(kind)
    ]
    said.append(f"it checked out: {'; '.join(changed)}" if changed else "it checked out nothing")
    if removed := [p for p in failed if p in present]:
        said.append(
            f"DVC removed {listed(removed)} from the workspace, which it could not check out "
            "(the version that was there stays in DVC's cache)"
        )
    elif not changed:
        said.append("the workspace is as it was")
    return (
        "; ".join(said)
        + ". The way out: push the missing outputs from the machine that has them (`uv run "
        "python -m roofline.sync push` there), or re-measure them there (`uv run dvc repro`), "
        "then pull again; `uv run python -m roofline.sync pull --allow-missing` takes what the "
        "remote has without them (docs/several-machines.md: missing and lost records)."
    )


def pull(repo: Repo, name: str, url: str, allow_missing: bool) -> Pulled:
    """Fetch, then check out: a fetch that fails has changed nothing here; a checkout that
    fails has changed what it says."""
    try:
        fetched = repo.fetch(remote=name)
    except Exception as err:  # DVC and its filesystems raise many kinds; each is reported alike
        raise RooflineError(explain("pull", name, url, err)) from err
    present = {
        os.path.relpath(out.fs_path) for out in repo.index.outs if os.path.exists(out.fs_path)
    }
    try:
        result: CheckoutResult = repo.checkout(allow_missing=allow_missing)
    except CheckoutError as err:
        cached = {
            os.path.relpath(out.fs_path)
            for out in repo.index.outs
            if out.use_cache and out.cache_path and os.path.exists(out.cache_path)
        }
        raise RooflineError(lacking(name, url, err.result, present, cached)) from err
    except Exception as err:
        raise RooflineError(
            f"pull with remote '{name}' ({url}) fetched {fetched} file(s), then its checkout "
            f"failed: {type(err).__name__}: {err}. Some outputs may have been checked out before "
            "it stopped: `uv run dvc status` lists those that differ from dvc.lock, and "
            "`uv run dvc checkout` finishes the checkout once the cause is fixed."
        ) from err
    return Pulled(fetched=fetched, **result["stats"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("verb", choices=["push", "pull"])
    parser.add_argument("-r", "--remote", help="a remote name (default: the default remote)")
    parser.add_argument(
        "--allow-missing", action="store_true", help="pull: skip outputs never pushed"
    )
    args = parser.parse_args(argv)
    repo = Repo(".")
    name, url = remote_of(repo, args.remote)
    if args.verb == "pull":
        done: Pulled | int = pull(repo, name, url, args.allow_missing)
    else:
        try:
            done = repo.push(remote=name)
        except Exception as err:  # DVC and its filesystems raise many kinds; each alike
            raise RooflineError(explain(args.verb, name, url, err)) from err
    print(f"{args.verb} with remote '{name}' ({url}): {done}")


if __name__ == "__main__":
    run(main)
