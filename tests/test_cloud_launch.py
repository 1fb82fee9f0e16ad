"""The launcher, offline: SkyPilot's own Task, Resources, clouds and catalogue functions price
the plan from a played catalogue (vms.csv rows for RunPod and Lambda, read where SkyPilot reads
its catalogue), and its SDK calls are played (tests/fakes/sky), each held to the installed
SkyPilot's signature and return shape. The hand-back travels through a real DVC remote: a
local folder, and S3 played by moto's server."""

import collections.abc
import importlib
import inspect
import json
import shutil
import typing
from pathlib import Path

import pytest

sky = pytest.importorskip(
    "sky", reason="SkyPilot is the optional `cloud` group: uv sync --group cloud"
)

from dvc.repo import Repo  # noqa: E402
from sky.server.common import RequestId  # noqa: E402

from roofline.cloud import RUN_ENV, SKY_CALLS, main  # noqa: E402
from roofline.cloud_plan import chosen_devices  # noqa: E402
from roofline.core.errors import ConfigError, RooflineError  # noqa: E402
from roofline.core.paths import device_dir  # noqa: E402
from roofline.machines.handback import fetch_handed_back, hand_back  # noqa: E402
from tests.fakes.sky.played_sky import PlayedSky, Pod  # noqa: E402
from tests.test_cloud import pod_lock, under  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GPUS = ("a100", "h100", "h200")
# Played offers, not real ones: round prices, to read the plan by. RunPod offers H100-SXM spot
# and on-demand and a plain A100-80GB; Lambda (no spot) the SXM A100 and H100, and the H200.
RUNPOD = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Region,SpotPrice,Price,AvailabilityZone,GpuInfo
1x_H100-SXM_SECURE,H100-SXM,1.0,16.0,125.0,US,1.50,3.00,US-GA-1,
1x_H100-SXM_SECURE,H100-SXM,1.0,16.0,125.0,CA,2.00,3.20,CA-MTL-1,
1x_A100-80GB_SECURE,A100-80GB,1.0,8.0,60.0,US,,1.00,US-GA-1,
"""
LAMBDA = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice
gpu_1x_h100_sxm5,H100-SXM,1.0,26.0,225.0,3.50,us-east-1,,
gpu_1x_a100_sxm4,A100-80GB-SXM,1.0,30.0,200.0,2.00,us-east-1,,
gpu_1x_h200,H200-SXM,1.0,26.0,225.0,4.00,us-east-1,,
"""


def offline(*args, **kwargs):
    import requests

    raise requests.ConnectionError("played: no network")


@pytest.fixture
def catalogue(tmp_path, monkeypatch):
    """SkyPilot's catalogue folder, played: the CSVs where sky.catalog.common reads them. A file
    with no .meta/ checksum is one a user wrote, which SkyPilot never re-downloads; a missing
    one it would download, which fails here as it does offline."""
    import requests
    from sky.catalog import common

    folder = tmp_path / "catalogs"
    for cloud, rows in (("runpod", RUNPOD), ("lambda", LAMBDA)):
        (folder / cloud).mkdir(parents=True)
        (folder / cloud / "vms.csv").write_text(rows, encoding="utf-8")
    monkeypatch.setattr(requests, "get", offline)
    monkeypatch.setattr(common, "_ABSOLUTE_VERSIONED_CATALOG_DIR", str(folder))
    for cloud in ("runpod", "lambda"):  # each cloud's table is opened when its module loads
        module = importlib.import_module(f"sky.catalog.{cloud}_catalog")
        table = common.read_catalog(f"{cloud}/vms.csv", module._PULL_FREQUENCY_HOURS)
        monkeypatch.setattr(module, "_df", table)
    return folder


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A laptop's checkout: the lab's params, the three GPUs' task files, no lock for any (all
    pending), a DVC repo with a local default remote, and the remote's keys in the shell."""
    work = tmp_path / "lab"
    (work / "cloud").mkdir(parents=True)
    shutil.copy(ROOT / "params.yaml", work / "params.yaml")
    for name in GPUS:
        shutil.copy(ROOT / f"cloud/{name}.yaml", work / "cloud")
        (work / device_dir(name)).mkdir(parents=True)
    repo = Repo.init(work, no_scm=True)
    with repo.config.edit() as conf:
        conf["remote"]["store"] = {"url": str(tmp_path / "remote")}
        conf["core"]["remote"] = "store"
    monkeypatch.chdir(work)
    monkeypatch.setenv("SKY_RUNTIME_DIR", str(tmp_path / "sky"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "played-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "played-secret")
    return work


def measures(work: Path, pods: Path):
    """A pod's run that measures its device: it writes a finished measurement's results and
    lock in its own checkout, then hands them back as the task's last step does."""

    def script(task):
        name = task.envs["DEVICE"]
        # Its run is stopped at twice the plan's 30 minutes (roofline.machines.pipeline.POD_RUN).
        assert task.envs["ROOFLINE_DEADLINE_S"] == "3600"
        folder = pods / name / device_dir(name)
        folder.mkdir(parents=True, exist_ok=True)
        measured = {"device": name, "status": "measured", "fingerprint": under("2.15.0")}
        results = json.dumps(measured).encode()
        (folder / "results.json").write_bytes(results)
        (folder / "dvc.lock").write_text(pod_lock(under("2.15.0"), results, device=name))
        hand_back(name, task.envs[RUN_ENV], Repo(work).cloud.get_remote(), root=pods / name)

    return script


def test_dry_run_prices_every_pending_gpu_from_the_catalogue(lab, catalogue, capsys):
    played = PlayedSky(pods={})
    main(["--dry-run", "--clouds", "runpod,lambda"], sky_calls=played)
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()}
    # The first accelerator name any cloud offers, at its cheapest: Lambda's SXM A100, though
    # RunPod's plain A100-80GB costs less (the conf prefers the SXM card).
    assert rows["a100"][1:6] == [
        "A100-80GB-SXM",
        "Lambda",
        "us-east-1/gpu_1x_a100_sxm4",
        "2.00",
        "on-demand",
    ]
    assert rows["a100"][-1] == "$1.00"
    assert rows["h100"][1:6] == ["H100-SXM", "RunPod", "US/1x_H100-SXM_SECURE", "1.50", "spot"]
    assert rows["h100"][-2:] == ["30", "$0.75"]
    assert rows["h200"][1:6] == ["H200-SXM", "Lambda", "us-east-1/gpu_1x_h200", "4.00", "on-demand"]
    assert "total: $3.75; budget $5.00" in out
    assert "jobs controller" in out  # a spot pod's managed job: its controller bills apart
    assert (
        "each pod's set-up is stopped at 30 minutes and its run at twice its minutes, 60 at most"
    ) in out  # never for ever
    assert "a launch would stop here" not in out
    assert played.launched == []

    # On RunPod alone there is no H200 offer: conf/device has no price for it either.
    main(["--dry-run", "--clouds", "runpod"], sky_calls=played)
    out = capsys.readouterr().out
    assert "total: at least $1.25 + unknown (h200: no price anywhere)" in out
    assert "a launch would stop here: h200: no offer from SkyPilot's catalogue" in out


def test_offline_the_plan_falls_back_to_the_conf_prices_and_says_so(lab, catalogue, capsys):
    shutil.rmtree(catalogue / "lambda")  # a table SkyPilot must download: offline, it cannot
    main(["a100", "h100", "h200", "--dry-run", "--clouds", "lambda"], sky_calls=PlayedSky({}))
    out = capsys.readouterr().out
    assert "SkyPilot's catalogue could not be reached (ConnectionError)" in out
    assert "prices from conf/device's cost_per_hour" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "conf/device A100 SXM4 80GB" in rows["a100"] and "$0.75" in rows["a100"]
    assert "$1.50" in rows["h100"] and "unknown" in rows["h200"]
    assert "total: at least $2.25 + unknown (h200: no price anywhere)" in out
    # Such a plan is never launched: it prices no offer.
    with pytest.raises(RooflineError, match="nothing was launched: a100, h100, h200: no offer"):
        main(["--clouds", "lambda"], sky_calls=(played := PlayedSky({})))
    assert played.launched == []


def test_a_budget_below_the_total_refuses_before_anything_is_launched(lab, catalogue, capsys):
    played = PlayedSky(pods={name: Pod(measures(lab, lab.parent / "pods")) for name in GPUS})
    with pytest.raises(RooflineError, match=r"total \$3.75 is above the budget \$3.00"):
        main(["--budget", "3"], sky_calls=played, clock=played.clock)
    assert played.launched == [] and "total: $3.75" in capsys.readouterr().out
    assert not list(lab.glob("experiments/x4-roofline/devices/*/dvc.lock"))


def test_pods_run_side_by_side_and_one_failure_leaves_the_others(lab, catalogue, capsys):
    script = measures(lab, lab.parent / "pods")
    played = PlayedSky(
        pods={
            # Lambda has no A100 to give: SkyPilot's launch fails, leaving the cluster up.
            "a100": Pod(
                script, provisioning_error=sky.exceptions.ResourcesUnavailableError("played")
            ),
            # RunPod spot, a managed job (AWS's S3 holds its workdir): pre-empted once,
            # resumed elsewhere, then measured.
            "h100": Pod(script, runs=["preempted", "measured"], minutes=30),
            "h200": Pod(script, runs=["measured"], minutes=40),  # Lambda, on-demand
        },
        storage=("AWS",),
    )
    with pytest.raises(RooflineError, match=r"not measured: a100 \(above"):
        main([], sky_calls=played, clock=played.clock)
    out = capsys.readouterr().out
    assert sorted(played.launched) == sorted(GPUS)
    assert played.taken_down == ["roofline-a100"]  # a failed launch is taken down, never left
    assert played.clusters == {}
    for name in ("h100", "h200"):  # handed back: the lock the pod wrote
        lock = (lab / device_dir(name) / "dvc.lock").read_text()
        assert lock == (lab.parent / "pods" / name / device_dir(name) / "dvc.lock").read_text()
    assert not (lab / device_dir("a100") / "dvc.lock").exists()
    lines = {line.split(":")[0]: line for line in out.splitlines()}
    assert "its launch failed (ResourcesUnavailableError: played)" in lines["a100"]
    # What each pod cost: its minutes (by the clock of the thread that followed it) at its
    # price, against the estimate; the pre-empted one ran twice.
    assert lines["h100"].startswith(
        "h100: 60.0 min at $1.50/h = $1.50 (estimate $0.75, resumed 1x after pre-emption): measured"
    )
    assert lines["h200"].startswith("h200: 40.0 min at $4.00/h = $2.67 (estimate $2.00): measured")
    assert "total: $4.17 (estimate $3.75)" in out
    assert "uv run dvc pull && uv run dvc repro" in out  # the one command that renders the lab


def test_a_spot_offer_without_a_storage_cloud_runs_as_a_plain_spot_cluster(lab, catalogue, capsys):
    # RunPod and Lambda alone have no object storage: a managed job could not upload its
    # workdir (SkyPilot's NoCloudAccessError), so the RunPod spot H100 is a plain cluster.
    played = PlayedSky(pods={"h100": Pod(measures(lab, lab.parent / "pods"))})
    main(["h100"], sky_calls=played, clock=played.clock)
    (job,) = played.jobs.values()
    assert not job.managed and all(r.use_spot for r in job.task.resources)
    assert played.clusters == {}  # launched with down=True: gone once its job ended
    assert (lab / device_dir("h100") / "dvc.lock").exists()
    with pytest.raises(sky.exceptions.NoCloudAccessError):  # what a managed job would meet
        played.get(played.jobs_launch(job.task, name="roofline-h100"))


def test_a_pod_whose_run_fails_hands_nothing_back(lab, catalogue, capsys):
    played = PlayedSky(pods={"h200": Pod(measures(lab, lab.parent / "pods"), runs=["fails"])})
    with pytest.raises(RooflineError, match="not measured: h200"):
        main(["h200", "--clouds", "lambda"], sky_calls=played, clock=played.clock)
    out = capsys.readouterr().out
    assert "its job ended with exit code 100; the pod handed back no dvc.lock" in out
    assert not (lab / device_dir("h200") / "dvc.lock").exists()


def test_a_pod_lost_from_sight_or_left_up_is_named_with_the_command_that_stops_it(
    lab, catalogue, capsys
):
    script = measures(lab, lab.parent / "pods")
    played = PlayedSky(
        pods={
            # Lambda's A100 fails to provision, and taking its cluster down fails too.
            "a100": Pod(
                script,
                provisioning_error=sky.exceptions.ResourcesUnavailableError("played"),
                down_error=RuntimeError("played: the API server went away"),
            ),
            # RunPod spot: the managed job starts, then its controller cannot be followed.
            "h100": Pod(script, follow_error=sky.exceptions.ClusterNotUpError("played")),
            "h200": Pod(script),
        },
        storage=("AWS",),
    )
    with pytest.raises(RooflineError, match=r"not measured: a100, h100"):
        main([], sky_calls=played, clock=played.clock)
    lines = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines()}
    # The launch's failure, and beside it what may still bill, never one hiding the other.
    assert "its launch failed (ResourcesUnavailableError: played)" in lines["a100"]
    assert (
        "⚠ could not take roofline-a100 down (RuntimeError: played: the API server"
        in (lines["a100"])
    )
    assert "`sky down roofline-a100`" in lines["a100"]
    (job,) = [i for i, job in played.jobs.items() if job.device == "h100"]
    assert "its launch failed (ClusterNotUpError: played)" in lines["h100"]
    assert f"⚠ its managed job {job} may still run: `sky jobs cancel {job}`" in lines["h100"]
    assert lines["h200"].endswith("measured")  # the others' are handed back


def test_only_gpus_with_no_measurement_on_record_are_pending(lab):
    def lock(name, status):
        path = lab / device_dir(name) / "dvc.lock"
        fingerprint = f"experiments/x4-roofline/devices/{name}/fingerprint.json"
        path.write_text(
            f"schema: '2.0'\nstages:\n  benchmark:\n    params:\n      {fingerprint}:\n"
            f"        status: {status}\n",
            encoding="utf-8",
        )

    lock("h100", "recorded")
    lock("h200", "lost")  # its records are nowhere: measuring it again is the way out
    assert chosen_devices([], ["cpu", *GPUS]) == ["a100", "h200"]
    assert chosen_devices(["h100"], ["cpu", *GPUS]) == ["h100"]  # asked: measured again
    with pytest.raises(
        ConfigError, match=r"no cloud/cpu\.yaml; task files exist for: a100, h100, h200"
    ):
        chosen_devices(["cpu"], ["cpu", *GPUS])


def test_the_hand_back_travels_through_an_s3_remote(tmp_path, monkeypatch):
    """The route a managed job's pod hands back by: its DVC remote, here S3 played by moto."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            monkeypatch.setenv(key, "played")  # the secrets a pod gets
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="roofline"
        )
        repo = Repo.init(tmp_path / "checkout", no_scm=True)
        with repo.config.edit() as conf:
            conf["remote"]["store"] = {"url": "s3://roofline/store", "endpointurl": endpoint}
            conf["core"]["remote"] = "store"
        pod = tmp_path / "pod"
        (pod / device_dir("h100")).mkdir(parents=True)
        (pod / device_dir("h100") / "dvc.lock").write_text("schema: '2.0'\n")
        (pod / device_dir("h100") / "results.json").write_bytes(b'{"status": "measured"}')
        remote = Repo(tmp_path / "checkout").cloud.get_remote()
        hand_back("h100", "h100-run1", remote, root=pod)
        assert fetch_handed_back("h100-run1", remote) == {
            "dvc.lock": b"schema: '2.0'\n",
            "results.json": b'{"status": "measured"}',
        }
        assert fetch_handed_back("h100-run2", remote) == {"dvc.lock": None, "results.json": None}
    finally:
        server.stop()


def test_the_pod_step_without_a_run_id_hands_nothing_back(lab, monkeypatch, capsys):
    monkeypatch.delenv(RUN_ENV, raising=False)
    main(["--hand-back", "h100"])
    assert "nothing handed back" in capsys.readouterr().out


# The played SDK, held to the installed SkyPilot.


def real(name: str):
    module, attr = SKY_CALLS[name].rsplit(".", 1)
    return getattr(importlib.import_module(module), attr)


def parameters(function) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", sorted(SKY_CALLS))
def test_each_played_call_has_skypilots_parameters(name):
    assert parameters(getattr(PlayedSky(pods={}), name)) == parameters(real(name))


def conforms(value, hint) -> bool:
    """Whether a value has the shape of SkyPilot's annotation (the parts these calls use)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return value is None
    if isinstance(hint, (typing.ForwardRef, typing.TypeVar)):
        return value is not None  # a SkyPilot object (a handle) the launcher never reads
    if origin is typing.Union:
        return any(conforms(value, arg) for arg in args)
    if origin is tuple:
        return (
            isinstance(value, tuple)
            and len(value) == len(args)
            and all(conforms(v, a) for v, a in zip(value, args, strict=True))
        )
    if origin is list:
        return isinstance(value, list) and all(conforms(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            conforms(k, args[0]) and conforms(v, args[1]) for k, v in value.items()
        )
    if origin is collections.abc.Iterator:
        return isinstance(value, collections.abc.Iterator)
    return isinstance(value, origin or hint)


def test_each_played_call_returns_what_skypilot_returns(lab, catalogue):
    """Every call, played once: a request id where SkyPilot returns one, and what `get` then
    gives has the shape of the request's documented result."""
    played = PlayedSky(pods={"h100": Pod(lambda task: None, runs=["measured"])}, storage=("AWS",))
    task = sky.Task.from_yaml("cloud/h100.yaml")
    task.set_resources(sky.Resources(infra="runpod", accelerators="H100-SXM:1", use_spot=True))
    task.update_secrets({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    calls = {
        "enabled_clouds": lambda: played.enabled_clouds(),
        "storage_clouds": lambda: played.storage_clouds(),
        "jobs_launch": lambda: played.jobs_launch(task, name="roofline-h100"),
        "jobs_tail_logs": lambda: played.jobs_tail_logs(job_id=next(iter(played.jobs))),
        "jobs_queue": lambda: played.jobs_queue(refresh=False),
    }
    cluster_task = sky.Task.from_yaml("cloud/h100.yaml")
    cluster_task.set_resources(sky.Resources(infra="lambda", accelerators="H100-SXM:1"))
    cluster_task.update_secrets({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    calls |= {
        "launch": lambda: played.launch(cluster_task, cluster_name="roofline-h100"),
        "tail_logs": lambda: played.tail_logs(
            "roofline-h100", played.clusters["roofline-h100"], True
        ),
        "down": lambda: played.down("roofline-h100"),
    }
    assert set(calls) == set(SKY_CALLS) - {"get"}
    for name, call in calls.items():
        hint = inspect.signature(real(name)).return_annotation
        value = call()
        if typing.get_origin(hint) is RequestId:
            assert isinstance(value, RequestId), name
            value, hint = played.get(value), typing.get_args(hint)[0]
        assert conforms(value, hint), (name, value, hint)
    with pytest.raises(RuntimeError, match="Failed to get request"):
        played.get(RequestId("never-issued"))
    with pytest.raises(sky.exceptions.ClusterDoesNotExist):
        played.get(played.down("roofline-h100"))  # taken down already


# ---- money guarded at the door (bad input refused before anything is priced or launched) --


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--budget", "nan", "is not a budget in dollars"),
        ("--budget", "-5", "is not a budget in dollars"),
        ("--budget", "inf", "is not a budget in dollars"),
        ("--minutes", "-600", "is not a number of minutes"),
        ("--minutes", "nan", "is not a number of minutes"),
        ("--minutes", "1e309", "is not a number of minutes"),
        ("--minutes", "0", "is not a number of minutes"),
        ("--budget", "", "is not a budget in dollars"),
        ("--clouds", ",,", "names no cloud (e.g. runpod,lambda)"),
    ],
)
def test_a_budget_or_minutes_not_finite_and_positive_is_refused_before_anything(
    lab, catalogue, capsys, flag, value, said
):
    played = PlayedSky(pods={name: Pod(measures(lab, lab.parent / "pods")) for name in GPUS})
    with pytest.raises(SystemExit) as ended:
        main(["--clouds", "runpod,lambda", flag, value], sky_calls=played, clock=played.clock)
    assert ended.value.code == 2  # argparse's usage error, naming the value
    err = capsys.readouterr().err
    assert f"argument {flag}: '{value}' {said}" in err
    assert played.launched == []


def test_a_cloud_skypilot_does_not_know_is_refused_with_the_ones_it_does(lab, catalogue):
    played = PlayedSky(pods={})
    with pytest.raises(ConfigError) as refused:
        main(["h100", "--dry-run", "--clouds", "runpod,runpd"], sky_calls=played)
    said = str(refused.value)
    assert said.startswith(
        "--clouds has 'runpd', not a cloud SkyPilot knows (did you mean runpod?); allowed: aws, "
    ), said
    assert "lambda" in said and "runpod" in said and played.launched == []


def test_a_device_named_twice_is_refused_not_rented_twice(lab, catalogue):
    played = PlayedSky(pods={"h100": Pod(measures(lab, lab.parent / "pods"))})
    with pytest.raises(ConfigError, match=r"named more than once: h100 \(each device is one pod\)"):
        main(["h100", "h200", "h100"], sky_calls=played, clock=played.clock)
    assert played.launched == []


def test_the_budget_is_judged_on_what_is_known_and_every_reason_is_listed_at_once(
    lab, catalogue, capsys, monkeypatch
):
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    played = PlayedSky(pods={})
    # On RunPod alone: $1.25 known for a100 and h100, h200 has no price anywhere.
    main(["--dry-run", "--clouds", "runpod", "--budget", "1"], sky_calls=played)
    stops = [
        line for line in capsys.readouterr().out.splitlines() if "a launch would stop here" in line
    ]
    assert len(stops) == 3, stops
    assert "AWS_SECRET_ACCESS_KEY is not set" in stops[0]
    assert "h200: no offer" in stops[1]
    assert "total at least $1.25 is above the budget $1.00" in stops[2]
    with pytest.raises(RooflineError) as refused:
        main(["--clouds", "runpod", "--budget", "1"], sky_calls=played)
    said = str(refused.value)
    assert said.startswith("nothing was launched: AWS_SECRET_ACCESS_KEY is not set")
    assert "h200: no offer" in said and "at least $1.25 is above the budget" in said
    assert played.launched == []


def test_a_budget_of_zero_plans_only(lab, catalogue, capsys):
    played = PlayedSky(pods={name: Pod(measures(lab, lab.parent / "pods")) for name in GPUS})
    with pytest.raises(RooflineError, match=r"the budget is \$0\.00 \(--budget 0\): a plan only"):
        main(["--budget", "0", "--clouds", "runpod,lambda"], sky_calls=played)
    assert "total: $3.75; budget $0.00" in capsys.readouterr().out
    assert played.launched == []


def test_without_skypilot_a_dry_run_prices_from_the_conf_and_a_launch_says_how_in_one_line(
    lab, capsys, monkeypatch
):
    import sys

    for module in [m for m in sys.modules if m == "sky" or m.startswith("sky.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "sky", None)  # `import sky` fails as where it is absent
    main(["h100", "--dry-run", "--clouds", "nosuchcloud"])
    out = capsys.readouterr().out
    assert "SkyPilot is not installed" in out and "uv run --group cloud" in out
    assert "prices from conf/device's cost_per_hour; --clouds nosuchcloud not checked" in out
    assert "conf/device H100 SXM5 80GB" in out and "$1.50" in out
    with pytest.raises(ConfigError, match="nothing was launched: SkyPilot is not installed"):
        main(["h100"])


# ---- each pod's hand-back stands alone -----------------------------------------------------


def leaves(work: Path, pods: Path, lock: bytes | None, results: bytes | None):
    """A pod's run that hands back what it is given, whatever it is."""

    def script(task):
        name = task.envs["DEVICE"]
        folder = pods / name / device_dir(name)
        folder.mkdir(parents=True, exist_ok=True)
        for file, data in (("dvc.lock", lock), ("results.json", results)):
            if data is not None:
                (folder / file).write_bytes(data)
        hand_back(name, task.envs[RUN_ENV], Repo(work).cloud.get_remote(), root=pods / name)

    return script


@pytest.mark.parametrize(
    ("lock", "results", "said"),
    [
        (b"schema: '2.0'\n", b"{not json", "its results.json is not JSON"),
        (b"schema: '2.0'\n", b"[1, 2]", "its results.json is not a results record (a JSON list)"),
        (b"stages: [a\n", b'{"status": "measured"}', "its dvc.lock is not YAML"),
        (b"just a string", b'{"status": "measured"}', "its dvc.lock is not a DVC lock file"),
        (b"\xff\xfe\x00", b'{"status": "measured"}', "its dvc.lock is not UTF-8 text"),
        (b"schema: '2.0'\n", None, "the pod handed back dvc.lock, not both"),
    ],
)
def test_a_malformed_hand_back_is_named_with_its_pod_and_the_others_locks_are_written(
    lab, catalogue, capsys, lock, results, said
):
    played = PlayedSky(
        pods={
            "h100": Pod(leaves(lab, lab.parent / "pods", lock, results)),
            "h200": Pod(measures(lab, lab.parent / "pods")),
        }
    )
    with pytest.raises(RooflineError, match=r"not measured: h100 \(above"):
        main(["h100", "h200", "--clouds", "runpod,lambda"], sky_calls=played, clock=played.clock)
    lines = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert f"not measured: {said}" in lines["h100"]
    assert not (lab / device_dir("h100") / "dvc.lock").exists()
    assert (lab / device_dir("h200") / "dvc.lock").read_text() == (
        lab.parent / "pods" / "h200" / device_dir("h200") / "dvc.lock"
    ).read_text()


def test_the_pod_step_says_which_files_it_left_and_refuses_a_run_id_that_is_a_path(
    lab, monkeypatch, capsys
):
    monkeypatch.setenv(RUN_ENV, "h100-run1")
    main(["--hand-back", "h100"])  # the pod's run failed before it wrote either
    assert "h100: nothing left on the DVC remote under h100-run1; not there to leave: " in (
        capsys.readouterr().out
    )
    (lab / device_dir("h100") / "dvc.lock").write_text("schema: '2.0'\n")
    main(["--hand-back", "h100"])
    assert "dvc.lock left on the DVC remote under h100-run1; not there to leave: results.json" in (
        capsys.readouterr().out
    )
    for run_id in ("../../escape", "a/b", ".."):
        monkeypatch.setenv(RUN_ENV, run_id)
        with pytest.raises(ConfigError, match="is not a plain name"):
            main(["--hand-back", "h100"])
    assert not list(lab.parent.glob("**/escape"))


def test_the_pod_step_with_no_dvc_remote_says_so_in_one_line(lab, monkeypatch):
    with Repo(lab).config.edit() as conf:
        del conf["core"]["remote"]
    monkeypatch.setenv(RUN_ENV, "h100-run1")
    with pytest.raises(RooflineError, match=r"^no DVC remote: nothing handed back"):
        main(["--hand-back", "h100"])
