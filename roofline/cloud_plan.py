"""The plan of a cloud run, as pure functions: which devices to rent, the cheapest offer for
each (SkyPilot's catalogue, else the price its conf sets), what the plan costs and whether the
budget allows it, said before anything is launched (roofline.cloud launches it)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from roofline.core.errors import ConfigError
from roofline.interpretation.datasheets import judged
from roofline.machines.pipeline import (
    DEADLINE_FACTOR,
    IDLE_MINUTES,
    SETUP_MINUTES,
    task_path,
)
from roofline.machines.records import locked_fingerprint


@dataclass(frozen=True)
class PlanLine:
    """One pod of the plan: what it rents, where, at what price, for how long."""

    device: str
    accelerator: str  # SkyPilot's name for it
    minutes: float
    per_hour: float | None  # None: no price anywhere
    cloud: str | None = None  # None: not an offer from SkyPilot's catalogue (not launched)
    where: str = ""  # the offer's region / instance type, or where the price came from
    spot: bool = False
    resources: Any = None  # the sky.Resources a launch pins: cloud, accelerator, spot or not

    @property
    def estimate(self) -> float | None:
        return cost(self.per_hour, self.minutes)


def deadline_minutes(minutes: float) -> float:
    """How long a pod planned for `minutes` may run before its run is stopped."""
    return DEADLINE_FACTOR * minutes


def cost(per_hour: float | None, minutes: float) -> float | None:
    """Dollars for `minutes` at `per_hour`; None where the price is unknown."""
    return None if per_hour is None else per_hour * minutes / 60


def cluster(name: str) -> str:
    return f"roofline-{name}"


def is_pending(name: str) -> bool:
    """Whether git's dvc.lock records no measurement of the device: its benchmark ran under a
    "never measured" or "lost" fingerprint (roofline.machines.records), or it has no lock yet."""
    return (locked_fingerprint(name, "benchmark") or {}).get("status") != "recorded"


def rentable(devices: Sequence[str]) -> list[str]:
    """The devices with a SkyPilot task file (GPU devices with sky_accelerators)."""
    return [name for name in devices if task_path(name).exists()]


def chosen_devices(asked: Sequence[str], devices: Sequence[str]) -> list[str]:
    """The devices asked for (each must have a task file), or every pending rentable one."""
    gpus = rentable(devices)
    twice = sorted({name for name in asked if list(asked).count(name) > 1})
    if twice:  # one pod per device: a second would rent it again under the same cluster name
        raise ConfigError(f"named more than once: {', '.join(twice)} (each device is one pod)")
    for name in asked:
        if name not in gpus:
            raise ConfigError(
                f"no {task_path(name)}; task files exist for: {', '.join(gpus) or 'none'} (a GPU "
                "device gets one from its sky_accelerators: `uv run python -m roofline.compose`)"
            )
    return list(asked) or [name for name in gpus if is_pending(name)]


def cheapest_offer(task: Any, clouds: Sequence[Any]) -> tuple[Any, Any] | None:
    """(the cheapest launchable offer, the task's resources it answers) for the first of the
    task's resources (its accelerators, in the conf's order of preference) that any of these
    clouds offers, spot or on-demand, in any region; None where none does. These are the
    optimizer's own steps: each cloud's feasible resources, cheapest first, then their
    regions, each priced by the catalogue."""
    from sky.utils import resources_utils

    for requested in task.resources:
        offers = []
        for cloud in clouds:
            for spot in (False, True):
                feasible = cloud.get_feasible_launchable_resources(requested.copy(use_spot=spot))
                for cheapest in feasible.resources_list[:1]:
                    offers += resources_utils.make_launchables_for_valid_region_zones(cheapest)
        if offers:
            return min(offers, key=lambda offer: offer.get_cost(3600)), requested
    return None


def catalogue_line(name: str, clouds: Sequence[Any], minutes: float) -> PlanLine | None:
    import sky

    task = sky.Task.from_yaml(str(task_path(name)))
    found = cheapest_offer(task, clouds)
    if found is None:
        return None
    offer, requested = found
    (accelerator,) = offer.accelerators
    return PlanLine(
        device=name,
        accelerator=accelerator,
        minutes=minutes,
        per_hour=offer.get_cost(3600),
        cloud=str(offer.cloud),
        where=f"{offer.region}/{offer.instance_type}",
        spot=offer.use_spot,
        # Pinned to the offer's cloud and spot or not, not its region: a pre-empted managed
        # job may resume in another region.
        resources=requested.copy(cloud=offer.cloud, use_spot=offer.use_spot),
    )


def conf_line(name: str, dev: dict[str, Any], minutes: float, why: str) -> PlanLine:
    """The device priced as the lab's SKU, its first datasheet line (not launched)."""
    line = judged(name, dev, None)
    return PlanLine(
        device=name,
        accelerator=dev["sky_accelerators"][0],
        minutes=minutes,
        per_hour=line["cost_per_hour"],
        where=f"{why}; conf/device {line['sku']}",
    )


def make_plan(
    names: Sequence[str],
    devices: dict[str, dict[str, Any]],
    clouds: Sequence[str] | None,
    minutes: float,
) -> tuple[list[PlanLine], str | None]:
    """Each device's line, and a note where the catalogue was not asked or not reached."""

    def from_conf(why: str, note: str) -> tuple[list[PlanLine], str]:
        return [conf_line(n, devices[n], minutes, why) for n in names], note

    if clouds is None:
        return from_conf(
            "no cloud",
            "no enabled cloud known (no SkyPilot API server running: `uv run --group cloud sky "
            "check`, or name some with --clouds): prices from conf/device's cost_per_hour",
        )
    import requests

    found = [sky_cloud(cloud) for cloud in clouds]
    try:
        lines = []
        for name in names:
            offered = catalogue_line(name, found, minutes)
            lines.append(offered or conf_line(name, devices[name], minutes, "no offer"))
    except (requests.RequestException, OSError) as err:
        return from_conf(
            "offline",
            f"SkyPilot's catalogue could not be reached ({type(err).__name__}): prices from "
            "conf/device's cost_per_hour (the lab's SKU, the lab's 2025 table), not today's offers",
        )
    return lines, None


def sky_cloud(name: str) -> Any:
    """SkyPilot's cloud of this name (or alias); ConfigError naming the ones it knows."""
    import sky

    try:
        return sky.CLOUD_REGISTRY.from_str(name)
    except ValueError as err:  # SkyPilot's words name the clouds, and a close one
        known = ", ".join(sorted(sky.CLOUD_REGISTRY))
        close = difflib.get_close_matches(name.lower(), list(sky.CLOUD_REGISTRY), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(
            f"--clouds has {name!r}, not a cloud SkyPilot knows{hint}; allowed: {known}"
        ) from err


def total(amounts: Sequence[float | None]) -> float | None:
    """Their sum; None where any is unknown (never a partial sum as a total)."""
    return None if None in amounts else sum(a for a in amounts if a is not None)


def known_total(lines: Sequence[PlanLine]) -> tuple[float, list[str]]:
    """The sum of the estimates that are known, and the devices with no price anywhere."""
    known = sum(line.estimate for line in lines if line.estimate is not None)
    return known, [line.device for line in lines if line.estimate is None]


def dollars(amount: float | None) -> str:
    return "unknown" if amount is None else f"${amount:.2f}"


def show_plan(lines: Sequence[PlanLine], budget: float) -> str:
    rows = [("device", "accelerator", "cloud", "region/instance", "$/h", "", "min", "estimate")]
    for line in lines:
        rows.append(
            (
                line.device,
                line.accelerator,
                line.cloud or "-",
                line.where,
                "unknown" if line.per_hour is None else f"{line.per_hour:.2f}",
                "-" if line.cloud is None else "spot" if line.spot else "on-demand",
                f"{line.minutes:g}",
                dollars(line.estimate),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    text = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    priced, unpriced = known_total(lines)
    summed = dollars(priced)
    if unpriced:  # what is known, and what is not: never a partial sum as the total
        summed = f"at least ${priced:.2f} + unknown ({', '.join(unpriced)}: no price anywhere)"
    text.append(f"total: {summed}; budget ${budget:.2f}")
    longest = max((line.minutes for line in lines), default=0.0)
    text.append(
        f"(each pod's set-up is stopped at {SETUP_MINUTES} minutes and its run at twice its "
        f"minutes, {deadline_minutes(longest):g} at most, and the pod goes down after "
        f"{IDLE_MINUTES} idle minutes: a hung pod bills up to that, past this total)"
    )
    if any(line.spot for line in lines):
        text.append(
            "(spot pods run as managed jobs where SkyPilot has a storage cloud for their "
            "workdir: SkyPilot's jobs controller, a small VM, bills apart and is not in this "
            "total; elsewhere as plain spot clusters, which a pre-emption ends)"
        )
    return "\n".join(text)


def refusals(lines: Sequence[PlanLine], budget: float) -> list[str]:
    """Every reason this plan must not be launched (none: it may be)."""
    why = []
    unoffered = [line.device for line in lines if line.cloud is None]
    if unoffered:
        why.append(
            f"{', '.join(unoffered)}: no offer from SkyPilot's catalogue on the clouds asked "
            "(above); only an offer is launched (`sky check` enables clouds; name the devices "
            "to rent the others)"
        )
    known, unpriced = known_total(lines)  # what is known, judged all the same
    at_least = "at least " if unpriced else ""
    if budget == 0:
        why.append("the budget is $0.00 (--budget 0): a plan only")
    elif known > budget:
        why.append(
            f"the plan's total {at_least}{dollars(known)} is above the budget ${budget:.2f} "
            "(--budget)"
        )
    return why
