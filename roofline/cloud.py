"""Measure a device on a rented pod through SkyPilot (cloud/<device>.yaml, generated from its
conf file), after saying what it should cost, and hand the device's dvc.lock back for you to
commit.

    uv run --group cloud python -m roofline.cloud h100 [--minutes 30] [--dry-run]

SkyPilot picks the cheapest cloud it has credentials for (`sky check`); the pod pulls the
recorded results, runs `dvc repro` (which measures only its GPU) and pushes to the DVC remote.
The DVC remote's keys go to the pod as SkyPilot secrets, from AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY in your shell; nothing is written to disk on the way."""

import argparse
import shlex
import subprocess

from roofline.config import device_config, load_params
from roofline.errors import ConfigError, RooflineError, run
from roofline.paths import device_dir
from roofline.pipeline import SECRETS, task_path


def expected_cost(cost_per_hour: float | None, minutes: float) -> str:
    if cost_per_hour is None:
        return "unknown: no cost_per_hour in conf/device for this device; SkyPilot's table shows the price"
    return f"about ${cost_per_hour * minutes / 60:.2f} ({minutes:g} min at ${cost_per_hour:g}/h, conf/device)"


def commands(name: str) -> list[list[str]]:
    cluster, lock = f"roofline-{name}", device_dir(name) / "dvc.lock"
    secrets = [arg for secret in SECRETS for arg in ("--secret", secret)]
    return [
        ["sky", "launch", "-c", cluster, str(task_path(name)), *secrets],
        [
            "rsync",
            "-a",
            f"{cluster}:sky_workdir/{lock}",
            str(lock),
        ],  # SkyPilot sets up ssh to the cluster
        ["sky", "down", "-y", cluster],
    ]


def say_and_run(command: list[str], dry_run: bool) -> None:
    print(f"$ {shlex.join(command)}", flush=True)
    if not dry_run:
        subprocess.run(command, check=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("device", help="a GPU device with a cloud/<device>.yaml")
    parser.add_argument(
        "--minutes", type=float, default=30, help="expected time on the pod (default 30)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the cost and the commands only"
    )
    args = parser.parse_args(argv)
    dev = device_config(load_params(), args.device)
    if not task_path(args.device).exists():
        known = ", ".join(sorted(p.stem for p in task_path(args.device).parent.glob("*.yaml")))
        raise ConfigError(
            f"no {task_path(args.device)}; task files exist for: {known} (a GPU device gets one "
            "from its sky_accelerators: `uv run python -m roofline.compose`)"
        )
    print(
        f"{args.device} ({dev.sku}): expected cost {expected_cost(dev.cost_per_hour, args.minutes)}"
    )
    launch, fetch, down = commands(args.device)
    try:
        for command in (launch, fetch):
            say_and_run(command, args.dry_run)
    except subprocess.CalledProcessError as err:
        raise RooflineError(
            f"`{shlex.join(err.cmd)}` failed ({err.returncode}); the pod was taken down, "
            "nothing here changed"
        ) from err
    finally:
        say_and_run(down, args.dry_run)  # never leave a pod billing
    lock = device_dir(args.device) / "dvc.lock"
    print(
        f"then: git add {lock} && git commit -m 'measure {args.device}' && uv run dvc pull && uv run dvc repro"
    )


if __name__ == "__main__":
    run(main)
