"""A device's identity: which part of a machine's description a configured device is.

It also says what "the same hardware" means: no clocks, temperatures, driver builds or host
names. The several-machines rules compare records by it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from roofline.device.description import AppleGpu, CpuInfo, Found, GpuInfo, Hardware, Identity
from roofline.device.hardware import live_hardware

if TYPE_CHECKING:  # omegaconf stays optional here: the GPU suite runs without it
    from omegaconf import DictConfig

    from roofline.configuration.params import ProbeDevice


def kind(dev: DictConfig | ProbeDevice) -> str:
    """ "cpu", "cuda", "rocm" or "mps", from a composed config (an enum) or a plain YAML dict."""
    return getattr(dev["kind"], "name", dev["kind"])


def find_device(dev: DictConfig | ProbeDevice, hardware: Hardware) -> Found | None:
    """The part of `hardware` that is this configured device, or None if it is not here."""
    rec = dev["recognise"]
    if kind(dev) == "cpu":
        if hardware["gpus"] and not rec.get("with_gpu_present"):
            return None
        if re.search(rec.get("cpu_model") or ".*", hardware["cpu"]["model"]):
            return hardware["cpu"]
        return None
    gpus = hardware.get("apple_gpus", []) if kind(dev) == "mps" else hardware["gpus"]
    return find_gpu(dev, gpus)


def find_gpu(
    dev: DictConfig | ProbeDevice, gpus: Sequence[GpuInfo | AppleGpu]
) -> GpuInfo | AppleGpu | None:
    """The first of `gpus` this configured GPU device recognises (`recognises`), or None."""
    return next((gpu for gpu in gpus if recognises(dev, gpu)), None)


def recognises(dev: DictConfig | ProbeDevice, gpu: GpuInfo | AppleGpu) -> bool:
    """Whether this configured GPU device is this GPU: of its vendor (an AMD GPU, which has an
    architecture, is a rocm device's; any other a cuda or mps one's), and with the architecture
    its `recognise.gpu_architecture` matches (gcnArchName without its feature flags: "gfx942"),
    or the name its `recognise.gpu_name` matches. By architecture because some ROCm builds name
    every AMD GPU "AMD Radeon Graphics"."""
    rec = dev["recognise"]
    architecture = cast(GpuInfo, gpu).get("architecture")
    if (kind(dev) == "rocm") != bool(architecture):
        return False
    by_architecture = rec.get("gpu_architecture")
    if by_architecture and architecture and re.search(by_architecture, architecture):
        return True
    by_name = rec.get("gpu_name")
    return bool(by_name and re.search(by_name, gpu["name"]))


def locate(
    dev: DictConfig | ProbeDevice, hardware: Hardware | None = None
) -> tuple[Found | None, Identity | None]:
    """(the device's part of this machine, its stable identity), or (None, None) if not here."""
    found = find_device(dev, hardware or live_hardware())
    return found, identity(kind(dev), found) if found else None


def identity(kind: str, found: Found) -> Identity:
    """The stable part of a device's description: what "the same hardware" means (`found`: the
    device's part of it, of the kind `kind` says).

    No clocks, temperatures, driver builds or host names, so re-probing the same machine gives
    the same fingerprint."""
    if kind == "cpu":
        cpu = cast(CpuInfo, found)
        # The machine's cores, and only where a fence (affinity, a quota) left fewer to this
        # run, those: a fence is how the machine was run, not another machine (same_machine).
        machine = cpu.get("machine_cores") or cpu["logical_cores"]
        out: Identity = {"model": cpu["model"], "logical_cores": machine, "isa": cpu["isa"]}
        if cpu["logical_cores"] < machine:
            out["usable_cores"] = cpu["logical_cores"]
        return out
    if kind == "mps":
        apple = cast(AppleGpu, found)
        return {"name": apple["name"], "memory_gib": round(apple["memory_bytes"] / 2**30)}
    gpu = cast(GpuInfo, found)
    if gpu.get("architecture"):  # an AMD GPU: its architecture says what NVIDIA's capability does
        return {
            "name": gpu["name"],
            "architecture": gpu["architecture"],
            "sm_count": gpu["sm_count"],
            "memory_gib": round(gpu["memory_bytes"] / 2**30),
        }
    return {
        "name": gpu["name"],
        "compute_capability": gpu["compute_capability"],
        "sm_count": gpu["sm_count"],
        "memory_gib": round(gpu["memory_bytes"] / 2**30),
    }


def same_machine(a: Identity | None, b: Identity | None) -> bool:
    """Whether two identities are one machine, whatever fence each run had: re-measuring it
    with another core count overwrites no other machine's results."""
    if a is None or b is None:
        return a is b
    return {k: v for k, v in a.items() if k != "usable_cores"} == {
        k: v for k, v in b.items() if k != "usable_cores"
    }


def describe(hardware_identity: Identity) -> str:
    if "model" in hardware_identity:
        usable = hardware_identity.get("usable_cores")
        fenced = f", {usable} usable" if usable else ""
        return f"{hardware_identity['model']} ({hardware_identity['logical_cores']} cores{fenced})"
    if "architecture" in hardware_identity:  # an AMD GPU
        return f"{hardware_identity['name']} ({hardware_identity['architecture']})"
    if "compute_capability" not in hardware_identity:  # Apple's GPU
        return f"{hardware_identity['name']} ({hardware_identity['memory_gib']} GiB shared)"
    return f"{hardware_identity['name']} (sm_{hardware_identity['compute_capability']})"


def describe_apart(here: Identity, recorded: Identity) -> tuple[str, str]:
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


def unmatched_gpus(
    devices: DictConfig | Mapping[str, ProbeDevice], hardware: Hardware
) -> list[GpuInfo]:
    """GPUs here that no configured device recognises."""
    gpu_devices = [d for d in devices.values() if kind(d) != "cpu"]
    return [g for g in hardware["gpus"] if not any(recognises(d, g) for d in gpu_devices)]
