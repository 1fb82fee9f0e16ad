"""Measure the lab's pending GPUs on rented pods through SkyPilot, side by side, within a budget,
and hand each device's dvc.lock back for you to commit, only from a pod that measured it.

    uv run --group cloud python -m roofline.cloud [DEVICE ...] [--budget 5] [--minutes 30]
                                                  [--clouds runpod,lambda] [--dry-run]

With no DEVICE: every GPU device with a task file (cloud/<device>.yaml, generated from its
conf's sky_accelerators) that git's dvc.lock records no measurement of (never measured, or
lost). Each is priced from SkyPilot's catalogue, through the functions its optimizer uses: the
cheapest offer, spot or on-demand, on the clouds `sky check` enabled (or --clouds), of the first
of its accelerator names any of them offers. The plan and its total are printed, and a total
above --budget is refused before anything is launched. Where the catalogue cannot be reached,
the plan shows conf/device's cost_per_hour instead and says so (or "unknown", which makes the
total unknown); such a plan, like a device no cloud offers, is shown but never launched.

A spot offer runs as a managed job, which SkyPilot restarts elsewhere when it is pre-empted; an
on-demand one as a cluster taken down when its job ends, or fails. Each pod pulls the recorded
results, runs `dvc repro` (which measures only its GPU), pushes, then leaves its device's
dvc.lock and results.json on the DVC remote under roofline-handback/<run id>/ (`--hand-back`,
the task's last step): a managed job leaves no cluster to fetch from. The launcher fetches
them from there and hands the lock back only when it records a finished measurement; one pod's
failure leaves the others'. At the end it prints what each pod cost against its estimate. The
DVC remote's keys go to the pods as SkyPilot secrets, from AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY in your shell; nothing is written to disk on the way."""

from __future__ import annotations

import argparse
import math
import os
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from roofline.cloud_plan import (
    PlanLine,
    chosen_devices,
    cluster,
    cost,
    deadline_minutes,
    dollars,
    make_plan,
    refusals,
    show_plan,
    total,
)
from roofline.configuration.measuring_config import device_config, to_plain
from roofline.core.errors import ConfigError, RooflineError, run
from roofline.core.files import write_texts_atomic
from roofline.core.paths import device_dir
from roofline.interpretation.lab_config import load_lab_params
from roofline.machines.handback import (
    HANDED_BACK,
    checked_run_id,
    fetch_handed_back,
    hand_back,
    handback_problem,
)
from roofline.machines.pipeline import DEADLINE_ENV, PLANNED_MINUTES, SECRETS, task_path

if TYPE_CHECKING:  # SkyPilot and DVC are imported where used: --help and a plan stay fast
    from dvc.data_cloud import Remote

# The lab's ceiling for its cloud runs: "Coste total en la nube: ~$2.30 (con 1 h de margen
# presupuestario: techo ~$5)", the lab text's cost table (Lab 00, /work/shared/seed/).
BUDGET = 5.0
MINUTES = float(PLANNED_MINUTES)
RUN_ENV = "ROOFLINE_HANDBACK"  # the launch's run id, set on the pod's task
LOGS = Path(".dvc/tmp/cloud")  # each pod's log (.dvc/tmp is git-ignored)
# The SkyPilot SDK calls a launch makes, by the name the seam gives each (SkyCalls).
SKY_CALLS = {
    "enabled_clouds": "sky.client.sdk.enabled_clouds",
    "launch": "sky.launch",
    "tail_logs": "sky.tail_logs",
    "down": "sky.down",
    "jobs_launch": "sky.jobs.launch",
    "jobs_tail_logs": "sky.jobs.tail_logs",
    "jobs_queue": "sky.jobs.queue_v2",
    "get": "sky.get",
    # The enabled clouds with object storage: a managed job's workdir goes through a bucket.
    "storage_clouds": "sky.data.storage.get_cached_enabled_storage_cloud_names_or_refresh",
}


class SkyCalls(Protocol):
    """The one seam: SkyPilot's SDK functions named in SKY_CALLS (real_sky()), or a test's
    stand-in held to their signatures (tests/fakes/sky)."""

    enabled_clouds: Callable[..., Any]
    launch: Callable[..., Any]
    tail_logs: Callable[..., Any]
    down: Callable[..., Any]
    jobs_launch: Callable[..., Any]
    jobs_tail_logs: Callable[..., Any]
    jobs_queue: Callable[..., Any]
    get: Callable[..., Any]
    storage_clouds: Callable[..., Any]


def real_sky() -> SkyCalls:
    import importlib
    from types import SimpleNamespace

    def resolve(dotted: str) -> Callable[..., Any]:
        module, name = dotted.rsplit(".", 1)
        return getattr(importlib.import_module(module), name)

    return SimpleNamespace(**{name: resolve(path) for name, path in SKY_CALLS.items()})  # type: ignore[return-value]


def missing_before_launch(environ: dict[str, str], default_remote: str | None) -> list[str]:
    """What the pod will need and this machine cannot give it (checked before renting)."""
    missing = [
        f"{secret} is not set in this shell (the pod pushes its results with it)"
        for secret in SECRETS
        if not environ.get(secret)
    ]
    if not default_remote:
        missing.append(
            "no default DVC remote is set in .dvc/config (the pod pushes its results there): "
            "`uv run dvc remote add -d NAME URL`, then commit .dvc/config"
        )
    return missing


@dataclass(frozen=True)
class Outcome:
    """What one pod did: how long it ran, what it handed back or why nothing."""

    line: PlanLine
    minutes: float
    lock: str | None = None  # the dvc.lock handed back
    problem: str | None = None  # why nothing was handed back
    recoveries: int = 0  # a managed job's restarts after pre-emption
    log: Path | None = None
    billing: str | None = None  # a pod or job that may still be up and billing, and its command

    @property
    def cost(self) -> float | None:
        return cost(self.line.per_hour, self.minutes)


def pod_task(line: PlanLine, run_id: str, environ: dict[str, str]) -> Any:
    """The device's task file, pinned to the plan's offer, with the secrets and run id."""
    import sky

    task = sky.Task.from_yaml(str(task_path(line.device)))
    task.set_resources(line.resources)
    task.update_secrets({secret: environ[secret] for secret in SECRETS})
    deadline_s = round(deadline_minutes(line.minutes) * 60)
    task.update_envs({RUN_ENV: run_id, DEADLINE_ENV: str(deadline_s)})
    return task


def take_down(sky_calls: SkyCalls, name: str) -> str | None:
    """Take a cluster down (a failed launch leaves it up); why it could not be, or None."""
    from sky import exceptions

    try:
        sky_calls.get(sky_calls.down(name))
    except exceptions.ClusterDoesNotExist:
        return None  # already down: launched with down=True, its job ended
    except Exception as err:  # said, never swallowed: it may still bill
        return f"could not take {name} down ({type(err).__name__}: {err}): `sky down {name}`"
    return None


def run_pod(
    line: PlanLine,
    sky_calls: SkyCalls,
    remote: Remote,
    clock: Callable[[], float],
    environ: dict[str, str],
    logs: Path,
) -> Outcome:
    """Launch one pod, follow it to its end, and fetch what it handed back."""
    run_id = f"{line.device}-{uuid.uuid4().hex[:12]}"
    log = logs / f"{line.device}.log"
    started, code, recoveries, billing = clock(), None, 0, None
    job_ids: list[int] = []
    try:
        task = pod_task(line, run_id, environ)
        with log.open("w", encoding="utf-8") as out:
            # A spot offer runs as a managed job (restarted after a pre-emption) where SkyPilot
            # has a storage cloud for its workdir; elsewhere (RunPod, Lambda alone) as a plain
            # spot cluster, which a pre-emption ends.
            if line.spot and sky_calls.storage_clouds():
                job_ids, _ = sky_calls.get(sky_calls.jobs_launch(task, name=cluster(line.device)))
                code = sky_calls.jobs_tail_logs(job_id=job_ids[0], follow=True, output_stream=out)
                records = sky_calls.get(sky_calls.jobs_queue(refresh=False, job_ids=job_ids))[0]
                recoveries = sum(record.recovery_count or 0 for record in records)
            else:
                try:
                    job_id, _ = sky_calls.get(
                        sky_calls.launch(task, cluster_name=cluster(line.device), down=True)
                    )
                    code = sky_calls.tail_logs(
                        cluster(line.device), job_id, True, output_stream=out
                    )
                finally:
                    billing = take_down(sky_calls, cluster(line.device))
    except Exception as err:  # one pod's failure leaves the others'
        if job_ids:  # launched, then lost from sight: the managed job runs on
            billing = f"its managed job {job_ids[0]} may still run: `sky jobs cancel {job_ids[0]}`"
        why = f"its launch failed ({type(err).__name__}: {err})"
        return Outcome(line, (clock() - started) / 60, problem=why, log=log, billing=billing)
    minutes = (clock() - started) / 60
    # What it handed back is fetched even where its cluster would not go down: it was paid for.
    files: dict[str, bytes | None] = {}
    try:
        files = fetch_handed_back(run_id, remote)
    except Exception as err:  # the remote, not the pod: said, and the other pods' kept
        problem = f"what it left could not be fetched ({type(err).__name__}: {err})"
    else:
        problem = handback_problem(line.device, files["dvc.lock"], files["results.json"])
    lock = None if problem else (files["dvc.lock"] or b"").decode()
    if problem and code:
        problem = f"its job ended with exit code {code}; {problem}"
    return Outcome(
        line,
        minutes,
        lock=lock,
        problem=problem,
        recoveries=recoveries,
        log=log,
        billing=billing,
    )


def launch_all(
    lines: Sequence[PlanLine],
    sky_calls: SkyCalls,
    remote: Remote,
    clock: Callable[[], float],
    environ: dict[str, str],
) -> list[Outcome]:
    """Every pod at once, each followed in its own thread; their outcomes in plan order."""
    LOGS.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(len(lines), 1)) as pool:
        futures = [
            pool.submit(run_pod, line, sky_calls, remote, clock, environ, LOGS) for line in lines
        ]
        return [future.result() for future in futures]


def show_costs(outcomes: Sequence[Outcome]) -> str:
    text = []
    for done in outcomes:
        line = done.line
        resumed = f", resumed {done.recoveries}x after pre-emption" if done.recoveries else ""
        text.append(
            f"{line.device}: {done.minutes:.1f} min at {dollars(line.per_hour)}/h = "
            f"{dollars(done.cost)} (estimate {dollars(line.estimate)}{resumed}): "
            + ("measured" if done.lock else f"not measured: {done.problem} (log: {done.log})")
            + (f"; ⚠ {done.billing}" if done.billing else "")
        )
    spent = total([done.cost for done in outcomes])
    estimated = total([done.line.estimate for done in outcomes])
    text.append(
        f"total: {dollars(spent)} (estimate {dollars(estimated)}), by this machine's clock from "
        "each launch to its job's end: the cloud's bill is the word"
    )
    return "\n".join(text)


def finite(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def dollars_allowed(text: str) -> float:
    """--budget: a finite number of dollars, 0 or more (0 plans only)."""
    return finite(text, "a budget in dollars (a finite number, 0 or more; 0 plans only)")


def minutes_allowed(text: str) -> float:
    """--minutes: a finite number of minutes, more than 0."""
    value = finite(text, "a number of minutes (finite, more than 0)")
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes (more than 0)")
    return value


def clouds_allowed(text: str) -> list[str]:
    """--clouds: one cloud's name or more, comma-separated."""
    clouds = [cloud.strip() for cloud in text.split(",") if cloud.strip()]
    if not clouds:
        raise argparse.ArgumentTypeError(f"{text!r} names no cloud (e.g. runpod,lambda)")
    return clouds


NO_SKYPILOT = (
    "SkyPilot is not installed (it is the optional `cloud` group): "
    "uv run --group cloud python -m roofline.cloud ..."
)


def skypilot_installed() -> bool:
    try:
        import sky  # noqa: F401
    except ImportError:
        return False
    return True


def known_clouds(args: argparse.Namespace, sky_calls: SkyCalls) -> list[str] | None:
    """The clouds to price on: --clouds, else `sky check`'s. A dry run asks only an API
    server already running (it starts none); None where none is known."""
    if args.clouds:
        return args.clouds
    if args.dry_run:
        from sky.server import common

        if common.get_api_server_status().status != common.ApiServerStatus.HEALTHY:
            return None
    return sky_calls.get(sky_calls.enabled_clouds())


def pod_hand_back(name: str) -> None:
    """`--hand-back DEVICE`, the pod's last step: says which files it left and which it had not."""
    from dvc.config import NoRemoteError
    from dvc.repo import Repo

    run_id = os.environ.get(RUN_ENV)
    if not run_id:
        print(f"{RUN_ENV} is not set (a launch by hand): nothing handed back; commit the lock here")
        return
    checked_run_id(run_id)
    try:
        remote = Repo(".").cloud.get_remote()
    except NoRemoteError:
        raise RooflineError(
            "no DVC remote: nothing handed back (`uv run dvc remote add -d NAME URL`)"
        ) from None
    left = hand_back(name, run_id, remote)
    missing = [file for file in HANDED_BACK if file not in left]
    said = f"{' and '.join(left)} left" if left else "nothing left"
    print(
        f"{name}: {said} on the DVC remote under {run_id}"
        + (f"; not there to leave: {', '.join(missing)}" if missing else "")
    )


def main(
    argv: list[str] | None = None,
    sky_calls: SkyCalls | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "devices",
        nargs="*",
        help="GPU devices with a cloud/<device>.yaml (default: every pending one)",
    )
    parser.add_argument(
        "--budget",
        type=dollars_allowed,
        default=BUDGET,
        help=f"dollars (default {BUDGET:g}, the lab's; 0 plans only)",
    )
    parser.add_argument(
        "--minutes",
        type=minutes_allowed,
        default=MINUTES,
        help=f"expected time per pod (default {MINUTES:g})",
    )
    parser.add_argument(
        "--clouds",
        type=clouds_allowed,
        help="price on these clouds (comma-separated), not `sky check`'s",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan only")
    parser.add_argument("--hand-back", metavar="DEVICE", help=argparse.SUPPRESS)  # the pod's
    args = parser.parse_args(argv)
    if args.hand_back:
        return pod_hand_back(args.hand_back)
    params = load_lab_params()
    devices = {name: to_plain(device_config(params, name)) for name in params.devices}
    names = chosen_devices(args.devices, list(devices))
    if not names:
        print("every GPU device is measured: nothing to rent")
        return
    from dvc.repo import Repo  # here: --help stays fast

    repo = Repo(".")
    environ = dict(os.environ)
    missing = missing_before_launch(environ, repo.config["core"].get("remote"))
    installed = sky_calls is not None or skypilot_installed()
    if not installed and not args.dry_run:
        raise ConfigError(f"nothing was launched: {NO_SKYPILOT}")
    sky_calls = sky_calls or (real_sky() if installed else None)
    clouds = known_clouds(args, sky_calls) if sky_calls else None
    lines, note = make_plan(names, devices, clouds, args.minutes)
    if not installed:
        note = f"{NO_SKYPILOT}: prices from conf/device's cost_per_hour"
        if args.clouds:  # nothing here can check them, or price on them
            note += f"; --clouds {','.join(args.clouds)} not checked"
    if note:
        print(note)
    print(show_plan(lines, args.budget))
    why = [*missing, *refusals(lines, args.budget)]
    if args.dry_run:
        for problem in why:
            print(f"a launch would stop here: {problem}")
        return
    if why:
        raise RooflineError("nothing was launched: " + "; ".join(why))
    outcomes = launch_all(lines, sky_calls, repo.cloud.get_remote(), clock, environ)
    print(show_costs(outcomes))
    handed = {device_dir(d.line.device) / "dvc.lock": d.lock for d in outcomes if d.lock}
    write_texts_atomic(handed)  # all or none, each with the user's umask
    locks = [str(lock) for lock in handed]
    if locks:
        measured = " ".join(done.line.device for done in outcomes if done.lock)
        print(
            f"Handed back: git add {' '.join(locks)} && git commit -m 'measure {measured}'; "
            "then render the lab: uv run dvc pull && uv run dvc repro"
        )
    failed = [done.line.device for done in outcomes if not done.lock]
    if failed:
        raise RooflineError(
            f"not measured: {', '.join(failed)} (above, with each log); nothing of theirs changed here"
        )


if __name__ == "__main__":
    run(main)
