"""`dvc push` / `dvc pull`, with a failure that names the remote and what to check.

    uv run python -m roofline.sync push [-r REMOTE]
    uv run python -m roofline.sync pull [-r REMOTE] [--allow-missing]

DVC does the transfer. A pull fetches everything before it checks anything out, so a failed
pull leaves the workspace as it was; a push never touches it."""

import argparse
from urllib.parse import urlparse

from dvc.repo import Repo

from roofline.errors import ConfigError, RooflineError, run

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


def remote_of(repo: Repo, name: str | None) -> tuple[str, str]:
    """(name, URL) of the remote a push or pull would use."""
    remotes = repo.config["remote"]
    name = name or repo.config["core"].get("remote")
    known = ", ".join(remotes) or "none"
    if not name:
        raise ConfigError(
            f"no default DVC remote is set (remotes configured: {known}). Add one with "
            "`uv run dvc remote add -d NAME URL`, or name one with `-r NAME` "
            "(README: laptop -> pod -> laptop)"
        )
    if name not in remotes:
        raise ConfigError(
            f"no DVC remote {name!r}; remotes configured: {known}. Add it with "
            f"`uv run dvc remote add {name} URL` (README: laptop -> pod -> laptop)"
        )
    return name, remotes[name]["url"]


def explain(verb: str, name: str, url: str, err: BaseException) -> str:
    scheme = urlparse(url).scheme if "://" in url else ""
    checks = CHECKS.get(scheme, CHECKS[""]).format(name=name)
    return (
        f"{verb} with remote '{name}' ({url}) failed: {type(err).__name__}: {err}\n"
        f"Check: {checks}.\nThe workspace is as it was."
    )


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
    try:
        if args.verb == "push":
            done = repo.push(remote=name)
        else:
            done = repo.pull(remote=name, allow_missing=args.allow_missing)
    except Exception as err:  # DVC and its filesystems raise many kinds; each is reported alike
        raise RooflineError(explain(args.verb, name, url, err)) from err
    print(
        f"{args.verb} with remote '{name}' ({url}): {done if isinstance(done, int) else done.get('stats', done)}"
    )


if __name__ == "__main__":
    run(main)
