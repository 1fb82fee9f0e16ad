"""Results travel through a real S3 protocol server on loopback (moto's server mode, as dvc-s3's own
tests use), and a push or pull that fails names the remote and leaves the workspace as it was."""

import json
import sys

import boto3
import pytest
from dvc.repo import Repo
from moto.server import ThreadedMotoServer

from roofline.measuring.provenance import RECORDED_ENV
from tests.machines import (
    DEVICES,
    LAPTOP,
    clone,
    dvc,
    git,
    make_project,
    measured_benchmarks,
    raw,
    run,
)

pytestmark = pytest.mark.slow
KEYS = {"access_key_id": "laptop-key", "secret_access_key": "laptop-secret-never-in-git"}
NO_AMBIENT_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": None,
    "AWS_SECRET_ACCESS_KEY": None,
    "AWS_SESSION_TOKEN": None,
    "AWS_PROFILE": None,
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_MAX_ATTEMPTS": "1",  # a refused connection is said at once, not after retries
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.fixture(scope="module")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    ).create_bucket(Bucket="roofline")
    yield endpoint
    server.stop()


def credentials(clone_path):
    """Each machine keeps its keys in .dvc/config.local, which git never sees: what
    `dvc remote modify --local store OPTION VALUE` writes, through DVC's own API in this process
    (a DVC process for each option took a second)."""
    with Repo(str(clone_path)) as repo, repo.config.edit("local") as local:
        local["remote"]["store"] = dict(KEYS)


def sync(clone_path, *args, **kw):
    return run(
        clone_path, sys.executable, "-m", "roofline.sync", *args, env=NO_AMBIENT_CREDENTIALS, **kw
    )


def test_results_round_trip_through_s3_byte_identical(tmp_path, s3_endpoint):
    origin = make_project(tmp_path, "s3://roofline/cache", endpointurl=s3_endpoint)
    laptop = clone(origin, tmp_path / "laptop", pull=False)
    credentials(laptop)
    dvc(
        laptop,
        "repro",
        hardware=LAPTOP,
        env={"AWS_SECRET_ACCESS_KEY": "env-secret-123", "OMP_NUM_THREADS": "2"},
    )
    assert "push with remote 'store' (s3://roofline/cache)" in sync(laptop, "push")
    git(laptop, "add", "-A")
    git(laptop, "commit", "-qm", "laptop: measure cpu")
    git(laptop, "push", "-q", "origin", "main")
    # No credential in any committed file or deliverable; the environment is recorded by name.
    committed = git(laptop, "ls-files").split()
    written = [p for p in (laptop / "experiments").rglob("*") if p.is_file()]
    for path in [laptop / name for name in committed] + written:
        text = path.read_bytes()
        assert (
            b"laptop-secret" not in text
            and b"env-secret-123" not in text
            and b"laptop-key" not in text
        ), path
    manifest = json.loads((laptop / "experiments/x4-roofline/manifest.json").read_text())
    env = manifest["devices"]["cpu"]["environment"]
    assert env["OMP_NUM_THREADS"] == "2" and env["ROOFLINE_HARDWARE"] == "laptop-hardware.json"
    assert set(env) <= set(RECORDED_ENV)

    other = clone(origin, tmp_path / "other", pull=False)
    credentials(other)
    sync(other, "pull")
    for device in ("cpu", "h100", "podhost"):
        assert raw(other, device) == raw(laptop, device)
        assert (other / DEVICES / device / "fingerprint.json").read_bytes() == (
            laptop / DEVICES / device / "fingerprint.json"
        ).read_bytes()
    same = {"OMP_NUM_THREADS": "2"}  # what it was measured under: nothing to measure again
    assert measured_benchmarks(dvc(other, "repro", hardware=LAPTOP, env=same)) == set()

    # Missing credentials: said with the remote's name and what to check; nothing changes.
    bare = clone(origin, tmp_path / "no-keys", pull=False)
    code, out = sync(bare, "pull", check=False)
    assert code != 0
    assert "pull with remote 'store' (s3://roofline/cache) failed" in out and "access_key_id" in out
    assert "The workspace is as it was." in out
    assert not (bare / DEVICES / "cpu/results.json").exists()
    assert git(bare, "status", "--porcelain") == ""


def on_s3(laptop, endpoint: str):
    """A rendered project's copy (records to push, nothing measured) with the S3 remote."""
    with Repo(str(laptop)) as repo, repo.config.edit() as project:
        project["remote"]["store"] |= {"url": "s3://roofline/cache", "endpointurl": endpoint}
    credentials(laptop)
    return laptop


def test_wrong_credentials_are_named_and_the_workspace_kept(rendered, s3_endpoint, monkeypatch):
    import moto.settings

    laptop = on_s3(rendered, s3_endpoint)
    before = raw(laptop, "cpu")
    monkeypatch.setattr(
        moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0
    )  # the server now checks keys
    code, out = sync(laptop, "push", check=False)
    assert code != 0 and "push with remote 'store' (s3://roofline/cache) failed" in out
    assert "PermissionError: The AWS Access Key Id you provided does not exist" in out
    assert "secret_access_key" in out and "The workspace is as it was." in out
    assert raw(laptop, "cpu") == before


def test_an_unreachable_remote_is_named_and_the_workspace_kept(rendered):
    laptop = on_s3(rendered, "http://127.0.0.1:9")  # the discard port
    before = raw(laptop, "cpu")
    code, out = sync(laptop, "push", check=False)
    assert code != 0 and "push with remote 'store' (s3://roofline/cache) failed" in out
    assert "endpointurl" in out and "The workspace is as it was." in out
    assert raw(laptop, "cpu") == before
