"""SkyPilot's SDK calls that roofline.cloud makes (its SKY_CALLS), played: the same names,
parameters and defaults, the same return shapes (request ids, then what `sky.get` returns for
each), SkyPilot's own exceptions and records, and pods that run a played script instead of
renting anything. tests/test_cloud.py holds every played call to the installed SkyPilot.

Read from sky/client/sdk.py and sky/jobs/client/sdk.py (0.14.1):
- a call returns a request id at once; `get` waits for it and returns its result or raises
  its error (an unknown id: RuntimeError "Failed to get request ...");
- `launch` provisions and submits the task's job, and returns (job id, handle); a failed
  provisioning leaves the cluster in place ("for debugging"); `down=True` takes the cluster
  down once its job ends; `down` of a cluster that is not there raises ClusterDoesNotExist;
- `tail_logs(..., follow=True)` returns the job's exit code (JobExitCode: 0 succeeded, 100
  failed); so does `jobs.tail_logs`, once the managed job ends, after any recoveries;
- `jobs.queue_v2` returns (records, total, status counts, total before filters), each record a
  ManagedJobRecord with its recovery_count."""

from __future__ import annotations

import io
import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sky import Task, exceptions
from sky.jobs import ManagedJobStatus
from sky.jobs.client.sdk import AUTO_JOB_GROUP
from sky.jobs.constants import DEFAULT_MANAGED_JOB_FIELDS
from sky.schemas.api.responses import ManagedJobRecord
from sky.server.common import RequestId
from sky.utils.common import OptimizeTarget

SUCCEEDED, FAILED = exceptions.JobExitCode.SUCCEEDED, exceptions.JobExitCode.FAILED
# SkyPilot's words where no cloud is enabled for storage (sky/data/storage.py).
NO_STORAGE = "No cloud access available for storage. Please check your cloud credentials."


@dataclass
class Pod:
    """What the pod launched for a device does. Each start takes `minutes` of played time and
    meets the next fate in `runs`: "measured" (its script runs: it measures and hands back),
    "fails" (its run exits non-zero, nothing handed back) or "preempted" (a spot pod taken
    away mid-run; only a managed job starts it again, elsewhere)."""

    script: Callable[[Task], None]  # what the task's run does on a pod that measures
    runs: Sequence[str] = ("measured",)
    minutes: float = 30.0
    provisioning_error: Exception | None = None  # what `get(launch(...))` raises instead
    # What following its logs raises once it is launched (a jobs controller that is not up:
    # sky.exceptions.ClusterNotUpError); the job itself runs on, and bills.
    follow_error: Exception | None = None
    down_error: Exception | None = None  # what `get(down(...))` raises: the cluster stays up


@dataclass
class Job:
    device: str
    task: Task
    managed: bool
    recoveries: int = 0
    status: ManagedJobStatus = ManagedJobStatus.PENDING


@dataclass
class PlayedSky:
    pods: dict[str, Pod]
    clouds: Sequence[str] = ("RunPod", "Lambda")  # `sky check`'s, as enabled_clouds names them
    # ...and those enabled for storage (sky check's STORAGE capability: AWS with S3 keys, say,
    # whether or not it rents here). RunPod and Lambda have none.
    storage: Sequence[str] = ()
    launched: list[str] = field(default_factory=list)  # what was rented, in order
    taken_down: list[str] = field(default_factory=list)
    clusters: dict[str, int] = field(default_factory=dict)  # up: name -> its job id
    jobs: dict[int, Job] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._requests: dict[str, Callable[[], Any]] = {}
        self._ids = itertools.count(1)
        self._guard = threading.Lock()
        self._now = threading.local()  # each pod is followed in its own thread
        self._down_when_done: set[str] = set()  # clusters launched with down=True

    # The played clock: time passes for the thread that follows a pod while it runs.
    def clock(self) -> float:
        return getattr(self._now, "seconds", 0.0)

    def _request(self, result: Callable[[], Any]) -> RequestId:
        with self._guard:
            request_id = RequestId(f"played-{next(self._ids)}")
            self._requests[request_id] = result
        return request_id

    def _job(self, device: str, task: Task, managed: bool) -> int:
        if not isinstance(task, Task):
            raise ValueError(f"expected a sky.Task, got {type(task).__name__}")
        with self._guard:
            job_id = next(self._ids)
            self.jobs[job_id] = Job(device, task, managed)
            self.launched.append(device)
        return job_id

    def _device(self, task: Task) -> str:
        device = task.envs.get("DEVICE")
        if device not in self.pods:
            raise ValueError(f"no played pod for the task's DEVICE {device!r}")
        return device

    def _follow(self, job_id: int, output_stream: io.TextIOBase | None) -> int:
        """Run the job's pod to its end, as each start's fate says; its exit code."""
        job = self.jobs[job_id]
        pod = self.pods[job.device]
        out = output_stream or io.StringIO()
        for fate in pod.runs:
            self._now.seconds = self.clock() + pod.minutes * 60
            if fate == "preempted":
                if not job.managed:
                    raise ValueError("a played cluster is on-demand: it is never pre-empted")
                job.recoveries += 1
                job.status = ManagedJobStatus.RECOVERING
                out.write("the spot pod was pre-empted; recovering\n")
                continue
            if fate == "measured" and all(job.task.secrets.values()):  # it pushes with them
                pod.script(job.task)
                job.status = ManagedJobStatus.SUCCEEDED
                out.write("measured and handed back\n")
                return SUCCEEDED
            job.status = ManagedJobStatus.FAILED
            out.write("the run failed\n")
            return FAILED
        raise ValueError(f"the played pod for {job.device} ran out of fates: {pod.runs}")

    # sky.client.sdk.enabled_clouds
    def enabled_clouds(self, workspace: str | None = None, expand: bool = False) -> RequestId:
        return self._request(lambda: list(self.clouds))

    # sky.data.storage.get_cached_enabled_storage_cloud_names_or_refresh: the enabled clouds
    # with object storage (RunPod and Lambda have none), not a request: a plain call.
    def storage_clouds(self, raise_if_no_cloud_access: bool = False) -> list[str]:
        clouds = list(self.storage)
        if raise_if_no_cloud_access and not clouds:
            raise exceptions.NoCloudAccessError(NO_STORAGE)
        return clouds

    # sky.launch
    def launch(
        self,
        task,
        cluster_name=None,
        retry_until_up=False,
        idle_minutes_to_autostop=None,
        wait_for=None,
        dryrun=False,
        down=False,
        backend=None,
        optimize_target=OptimizeTarget.COST,
        no_setup=False,
        clone_disk_from=None,
        fast=False,
        resize=False,
        _need_confirmation=False,
        _is_launched_by_jobs_controller=False,
        _is_launched_by_sky_serve_controller=False,
        _disable_controller_check=False,
        _file_mounts_blob_id=None,
        _extra_launch_context=None,
        _include_credentials=False,
    ) -> RequestId:
        device = self._device(task)
        pod = self.pods[device]
        job_id = self._job(device, task, managed=False)
        self.clusters[cluster_name] = job_id
        if down:
            self._down_when_done.add(cluster_name)

        def result():
            if pod.provisioning_error:
                raise pod.provisioning_error  # the cluster stays, as SkyPilot leaves it
            return job_id, None

        return self._request(result)

    # sky.tail_logs
    def tail_logs(
        self, cluster_name, job_id, follow, tail=0, output_stream=None, *, preload_content=True
    ) -> int:
        if self.clusters.get(cluster_name) != job_id:
            raise exceptions.ClusterDoesNotExist(f"Cluster {cluster_name!r} does not exist.")
        code = self._follow(job_id, output_stream)
        if cluster_name in self._down_when_done:
            self.clusters.pop(cluster_name)  # launched with down=True: gone once its job ends
        return code

    # sky.down
    def down(self, cluster_name, purge=False, graceful=False, graceful_timeout=None) -> RequestId:
        def result():
            job_id = self.clusters.get(cluster_name)
            refused = job_id is not None and self.pods[self.jobs[job_id].device].down_error
            if refused:
                raise refused
            if self.clusters.pop(cluster_name, None) is None:
                raise exceptions.ClusterDoesNotExist(f"Cluster {cluster_name!r} does not exist.")
            self.taken_down.append(cluster_name)

        return self._request(result)

    # sky.jobs.launch
    def jobs_launch(
        self,
        task,
        name=None,
        pool=None,
        num_jobs=None,
        job_group=AUTO_JOB_GROUP,
        _need_confirmation=False,
    ) -> RequestId:
        device = self._device(task)
        if not all(r.use_spot for r in task.resources):
            raise ValueError("roofline.cloud runs only spot offers as managed jobs")
        job_id = self._job(device, task, managed=True)

        def result():
            # The controller uploads the task's workdir to a bucket first
            # (controller_utils.maybe_translate_local_file_mounts_and_sync_up): no storage cloud
            # enabled, no bucket, no job.
            if task.workdir and not self.storage_clouds():
                raise exceptions.NoCloudAccessError(NO_STORAGE)
            return [job_id], None

        return self._request(result)

    # sky.jobs.tail_logs
    def jobs_tail_logs(
        self,
        name=None,
        job_id=None,
        follow=True,
        controller=False,
        refresh=False,
        tail=None,
        tail_offset=None,
        output_stream=None,
        task=None,
        *,
        preload_content=True,
    ) -> int | None:
        if job_id not in self.jobs or not self.jobs[job_id].managed:
            raise ValueError(f"Job {job_id} not found.")
        if self.pods[self.jobs[job_id].device].follow_error:
            raise self.pods[self.jobs[job_id].device].follow_error
        return self._follow(job_id, output_stream) if follow else None

    # sky.jobs.queue_v2
    def jobs_queue(
        self,
        refresh,
        skip_finished=False,
        all_users=False,
        job_ids=None,
        limit=None,
        fields=DEFAULT_MANAGED_JOB_FIELDS,
        sort_by=None,
        sort_order=None,
        statuses=None,
        submitted_after=None,
        submitted_before=None,
        infra_match=None,
        name_match=None,
    ) -> RequestId:
        def result():
            records = [
                ManagedJobRecord(
                    job_id=job_id,
                    job_name=f"roofline-{job.device}",
                    status=job.status,
                    recovery_count=job.recoveries,
                )
                for job_id, job in self.jobs.items()
                if job.managed and (job_ids is None or job_id in job_ids)
            ]
            counts: dict[str, int] = {}
            for record in records:
                counts[record.status.value] = counts.get(record.status.value, 0) + 1
            return records, len(records), counts, len(records)

        return self._request(result)

    # sky.get
    def get(self, request_id):
        if request_id not in self._requests:
            raise RuntimeError(f"Failed to get request {request_id}: 404 not found")
        return self._requests[request_id]()
