"""The shapes of what the several-machines rules keep. Types only.

A stage's record (results.json, sweep.json, knobs.json), the fingerprint it was measured
under, its stage keys, and dvc.lock as DVC writes it. The rules (records) and the keys (keys)
both import them."""

from typing import Any, NotRequired, TypedDict

from roofline.core.measurement import CopyCeiling, GpuStepSides, StepSides
from roofline.device.backends import Library
from roofline.device.cache_ceilings import CacheBandwidth
from roofline.device.description import Found, Identity
from roofline.device.peakflops import CpuClock, FmaCeiling, FmaClock
from roofline.device.perf_counters import PerfCounters


class StageKey(TypedDict):
    """What a measuring stage's measurement depends on (roofline/machines/keys.py)."""

    code: str  # the hash of the lab's code the stage runs
    params: str  # ...and of the settings it is measured under
    own: NotRequired[dict[str, str]]  # each backend of your own -> the hash of its files


class Fingerprint(TypedDict):
    """What a device's measurements depend on; DVC reads it as the measuring stages' params."""

    device: str
    status: str  # "recorded", NEVER or LOST
    hardware: Identity | None
    torch: str | None
    # Each measuring stage's key; a digest (a never-measured device's) or LOST where none.
    measures: dict[str, StageKey | str]


class RunInfo(TypedDict):
    """When, how long, at which revision and with what software a run measured."""

    started_at: str
    wall_s: float
    git_revision: str | None
    versions: dict[str, str | None]
    environment: dict[str, str]
    threads: int | None  # a CPU's: torch's threads
    # Seconds each part of the run took (each point, the copy, a CPU's clock, FMA and caches):
    # where the time went, for whoever slows it next. Older records have none.
    spent: NotRequired[dict[str, float]]
    # Each later run that measured only kernels of your own again (their files changed): its
    # run info, with the backends it measured; the latest for each backend.
    remeasured: NotRequired[list[dict[str, Any]]]


class Record(TypedDict):
    """A measuring stage's record (results.json, sweep.json, knobs.json), in SCHEMA_VERSION:
    what aggregate reads back. Its rows are checked apart, row by row (roofline.core.measurement)."""

    schema: int
    device: str
    status: str  # one of KNOWN
    rows: NotRequired[list[dict[str, Any]]]  # asdict() of Measurement or KnobMeasurement
    fingerprint: NotRequired[Fingerprint]  # what it was measured under
    run: NotRequired[RunInfo]
    hardware: NotRequired[Identity | None]  # results.json: the hardware's identity
    found: NotRequired[Found]  # ...its description as probed
    memory: NotRequired[CopyCeiling]  # ...the copy bandwidth
    clock: NotRequired[CpuClock]  # ...a CPU's
    fma: NotRequired[FmaCeiling]  # ...a CPU's
    fma_clock: NotRequired[FmaClock]  # ...a CPU's clock under that FMA load
    steps: NotRequired[StepSides]  # ...a CPU's breakdown: threads, one thread, in L2
    gpu_steps: NotRequired[GpuStepSides]  # a GPU's breakdown: the data's power, launches
    caches: NotRequired[list[CacheBandwidth]]  # ...a CPU's read bandwidth per cache level
    counters: NotRequired[PerfCounters]  # ...whether a CPU's own counters were readable
    libraries: NotRequired[dict[str, Library]]  # ...each backend's, by its name
    sweep: NotRequired[str]  # sweep.json: the sweep's name
    knobs: NotRequired[str]  # knobs.json: the knobs' name
    tunableop_results: NotRequired[str | None]  # ...TunableOp's results file, as text


class LockedFile(TypedDict):
    """A dependency or output as dvc.lock records it (DVC's lock file schema, DATA_SCHEMA)."""

    path: str
    hash: NotRequired[str]  # the hash's name: "md5"
    md5: NotRequired[str]
    size: NotRequired[int]
    nfiles: NotRequired[int]  # a folder's


class LockedStage(TypedDict, total=False):
    """A stage as dvc.lock records it (DVC's LOCK_FILE_STAGE_SCHEMA)."""

    cmd: str
    deps: list[LockedFile]
    params: dict[str, dict[str, object]]  # params file -> each param's value as it ran
    outs: list[LockedFile]


class LockFile(TypedDict):
    """A dvc.lock file (DVC's LOCKFILE_SCHEMA)."""

    schema: str  # "2.0"
    stages: dict[str, LockedStage]
