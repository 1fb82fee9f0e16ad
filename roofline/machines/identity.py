"""A device's identity: which part of a machine's description a configured device is, and
what "the same hardware" means (no clocks, temperatures, driver builds or host names), as the
several-machines rules compare records by it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from roofline.device.hardware import live_hardware

if TYPE_CHECKING:  # omegaconf stays optional here: the GPU suite runs without it
    from omegaconf import DictConfig


def kind(dev: DictConfig | dict) -> str:
    """ "cpu", "cuda" or "mps", from a composed config (an enum) or a plain YAML dict."""
    return getattr(dev["kind"], "name", dev["kind"])


def find_device(dev: DictConfig | dict, hardware: dict[str, Any]) -> dict[str, Any] | None:
    """The part of `hardware` that is this configured device, or None if it is not here."""
    rec = dev["recognise"]
    if kind(dev) == "cpu":
        if hardware["gpus"] and not rec.get("with_gpu_present"):
            return None
        if re.search(rec.get("cpu_model") or ".*", hardware["cpu"]["model"]):
            return hardware["cpu"]
        return None
    gpus = hardware.get("apple_gpus", []) if kind(dev) == "mps" else hardware["gpus"]
    for gpu in gpus:
        if rec.get("gpu_name") and re.search(rec["gpu_name"], gpu["name"]):
            return gpu
    return None


def locate(
    dev: DictConfig | dict, hardware: dict[str, Any] | None = None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the device's part of this machine, its stable identity), or (None, None) if not here."""
    found = find_device(dev, hardware or live_hardware())
    return found, identity(kind(dev), found) if found else None


def identity(kind: str, found: dict[str, Any]) -> dict[str, Any]:
    """The stable part of a device's description: what "the same hardware" means.

    No clocks, temperatures, driver builds or host names, so re-probing the same machine gives
    the same fingerprint."""
    if kind == "cpu":
        # The machine's cores, and only where a fence (affinity, a quota) left fewer to this
        # run, those: a fence is how the machine was run, not another machine (same_machine).
        machine = found.get("machine_cores") or found["logical_cores"]
        fenced = (
            {"usable_cores": found["logical_cores"]} if found["logical_cores"] < machine else {}
        )
        return {"model": found["model"], "logical_cores": machine, "isa": found["isa"]} | fenced
    if kind == "mps":
        return {"name": found["name"], "memory_gib": round(found["memory_bytes"] / 2**30)}
    return {
        "name": found["name"],
        "compute_capability": found["compute_capability"],
        "sm_count": found["sm_count"],
        "memory_gib": round(found["memory_bytes"] / 2**30),
    }


def same_machine(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two identities are one machine, whatever fence each run had: re-measuring it
    with another core count overwrites no other machine's results."""
    if a is None or b is None:
        return a is b
    return {k: v for k, v in a.items() if k != "usable_cores"} == {
        k: v for k, v in b.items() if k != "usable_cores"
    }


def describe(hardware_identity: dict[str, Any]) -> str:
    if "model" in hardware_identity:
        usable = hardware_identity.get("usable_cores")
        fenced = f", {usable} usable" if usable else ""
        return f"{hardware_identity['model']} ({hardware_identity['logical_cores']} cores{fenced})"
    if "compute_capability" not in hardware_identity:  # Apple's GPU
        return f"{hardware_identity['name']} ({hardware_identity['memory_gib']} GiB shared)"
    return f"{hardware_identity['name']} (sm_{hardware_identity['compute_capability']})"


def describe_apart(here: dict[str, Any], recorded: dict[str, Any]) -> tuple[str, str]:
    """Two identities described so that a reader sees how they differ (the same model can
    differ in the instruction sets a VM exposes, or in its core count)."""
    a, b = describe(here), describe(recorded)
    if a != b:
        return a, b
    keys = [
        key for key in sorted(here.keys() | recorded.keys()) if here.get(key) != recorded.get(key)
    ]
    return (
        f"{a} [{'; '.join(f'{k}: {here.get(k)}' for k in keys)}]",
        f"{b} [{'; '.join(f'{k}: {recorded.get(k)}' for k in keys)}]",
    )


def unmatched_gpus(devices: DictConfig | dict, hardware: dict[str, Any]) -> list[dict[str, Any]]:
    """GPUs here that no configured device recognises."""
    patterns = [d["recognise"].get("gpu_name") for d in devices.values()]
    patterns = [p for p in patterns if p]
    return [g for g in hardware["gpus"] if not any(re.search(p, g["name"]) for p in patterns)]
