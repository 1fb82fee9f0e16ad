"""Interrupts honoured everywhere: Ctrl-C while a stage imports says one line, files written as
a set are renamed as a set, SIGTERM leaves no temporary file, and the work an interrupt cannot
stop (one call of the textbook loop, a knob too big for memory) is bounded before it starts."""

import os
import signal
import subprocess
import sys

import pytest

from roofline.core import errors, files
from roofline.core.errors import ConfigError, Interrupted
from stages import RENDERED
from tests.machines import ROOT

# What a stage run as DVC runs it inherits: this checkout on the path, and nothing else of ours.
STAGE_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ROOFLINE_HARDWARE")}


def test_ctrl_c_while_a_stage_imports_says_one_line(tmp_path):
    # pandas, played by a package that is interrupted while it imports: Ctrl-C landing there.
    (tmp_path / "pandas").mkdir()
    (tmp_path / "pandas/__init__.py").write_text("raise KeyboardInterrupt\n")
    done = subprocess.run(
        [sys.executable, "-m", "stages.aggregate"],
        cwd=ROOT,
        env=STAGE_ENV | {"PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert done.stderr == "interrupted; nothing was written\n"


def test_an_interrupt_between_renames_waits_for_the_whole_set(tmp_path, monkeypatch):
    paths = [tmp_path / name for name in ("results.csv", "manifest.json", "metrics.json")]
    for path in paths:
        path.write_text("old")
    rename = os.replace

    def interrupted_rename(src, dst):
        rename(src, dst)
        if dst == paths[0]:  # Ctrl-C lands after the first deliverable is in place
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(os, "replace", interrupted_rename)
    with pytest.raises(SystemExit) as ended:
        errors.run(lambda: files.write_texts_atomic(dict.fromkeys(paths, "new")), RENDERED)
    assert [p.read_text() for p in paths] == ["new"] * 3  # all three, never one of them
    assert str(ended.value) == (
        "interrupted once every file was written (results.csv, manifest.json, metrics.json: "
        "the new ones)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)
    # Back to Python's own handler once the set is in place.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupt_before_the_renames_leaves_every_file_as_it_was(tmp_path):
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in paths:
        path.write_text("old")
    with pytest.raises(KeyboardInterrupt), files.atomic_paths(*paths) as temps:
        temps[0].write_text("new")
        raise KeyboardInterrupt
    assert [p.read_text() for p in paths] == ["old", "old"]
    assert sorted(tmp_path.iterdir()) == sorted(paths)
    assert not isinstance(KeyboardInterrupt(), Interrupted)


# A stage's last step, played: its deliverable half written when the signal comes.
WRITING = """
import sys, time
from pathlib import Path
from roofline.core import errors
from roofline.core.files import atomic_paths

def main():
    with atomic_paths(Path(sys.argv[1])) as (tmp,):
        tmp.write_text("half")
        print("writing", flush=True)
        time.sleep(60)

errors.run(main, "nothing was written: the previous deliverables are as they were")
"""


@pytest.mark.posix
def test_sigterm_mid_write_ends_as_ctrl_c_does_and_leaves_no_temporary_file(tmp_path):
    # `timeout`, systemd and a pre-empted pod send SIGTERM: `git add -A` must find nothing.
    report = tmp_path / "REPORT.md"
    report.write_text("the previous page")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITING, str(report)],
        cwd=ROOT,
        env=STAGE_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout.readline() == "writing\n"
    writer.send_signal(signal.SIGTERM)
    _, said = writer.communicate(timeout=60)
    assert writer.returncode == 1
    assert said == (
        "interrupted by SIGTERM; nothing was written: the previous deliverables are as they were\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["REPORT.md"]
    assert report.read_text() == "the previous page"


@pytest.mark.posix
def test_a_file_past_the_shells_size_limit_is_said_with_the_limit(tmp_path):
    import resource

    script = (
        "import sys; from pathlib import Path; from roofline.core import errors; "
        "from roofline.core.files import write_text_atomic; "
        "errors.run(lambda: write_text_atomic(Path(sys.argv[1]), 'x' * 100_000), "
        "'nothing was written: the previous results are as they were')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "results.json")],
        cwd=ROOT,
        env=STAGE_ENV,
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536)),
    )
    assert done.returncode == 1
    assert done.stderr == (
        "failed: File too large: a file would pass this shell's file-size limit (`ulimit -f`); "
        "raise it (`ulimit -f unlimited`), then run again\n"
        "nothing was written: the previous results are as they were\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_textbook_loop_is_bounded_at_composition():
    # One call of it is one C call that Ctrl-C cannot stop: 4096^3 ran 11.5 minutes after it.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "roofline.compose",
            "--check",
            "knobs=lab",
            "knobs.cpu.naive_shape=[4096,4096,4096]",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert (
        "knobs.cpu.naive_shape=[4096, 4096, 4096]; allowed: M x N x K at most 512^3 "
        "(134,217,728): the textbook loop runs about a GFLOP/s, and one call of it cannot be "
        "interrupted"
    ) in done.stdout + done.stderr


def test_a_knob_shape_past_the_devices_memory_is_refused_before_any_knob_runs():
    from omegaconf import OmegaConf

    from roofline.measuring.benchmark import check_knobs_fit

    knobs = OmegaConf.create(
        {"cpu": {"shape": [100000, 100000, 100000], "naive_shape": [256, 256, 256]}, "cuda": {}}
    )
    with pytest.raises(ConfigError) as refused:
        check_knobs_fit(knobs, "cpu", 16 << 30)
    said = str(refused.value)
    assert said.startswith(
        "knobs.cpu.shape=[100000, 100000, 100000]: float32 needs 200.0 GB with its check; "
        "allowed: at most 80% of this device's 17.2 GB"
    ), said
    check_knobs_fit(OmegaConf.create({"cpu": {}, "cuda": {"shape": [8192] * 3}}), "cuda", 80 << 30)
    check_knobs_fit(knobs, "mps", 16 << 30)  # no knobs on an Apple GPU: nothing to hold


@pytest.mark.posix
def test_a_copy_without_git_gets_dvcs_words_and_the_documented_way_out_works(tmp_path):
    # `git archive` (or a zip download) has no .git: DVC refuses before any code of the lab's
    # runs, so docs/several-machines.md ("When a run fails") quotes its words and the way out.
    copy = tmp_path / "lab"
    copy.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(copy)], input=archive.stdout, check=True)
    dvc = [sys.executable, "-m", "dvc", "status"]
    done = subprocess.run(dvc, cwd=copy, env=STAGE_ENV, capture_output=True, text=True)
    assert done.returncode != 0 and f"{copy} is not a git repository" in done.stderr
    docs = (ROOT / "docs/several-machines.md").read_text()
    way_out = "git init && git add -A && git commit -qm lab"
    assert "is not a git repository" in docs and way_out in docs
    env = STAGE_ENV | {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a"}
    env |= {"GIT_COMMITTER_EMAIL": "a@b"}
    subprocess.run(["sh", "-c", way_out], cwd=copy, env=env, check=True, capture_output=True)
    done = subprocess.run(dvc, cwd=copy, env=STAGE_ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_signal_ignored_before_the_renames_stays_ignored(tmp_path, monkeypatch):
    # A job started with `&` from a script ignores SIGINT: a Ctrl-C meant for the shell is not
    # this run's to act on.
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    rename = os.replace

    def interrupted_rename(src, dst):
        rename(src, dst)
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(os, "replace", interrupted_rename)
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        files.write_texts_atomic(dict.fromkeys(paths, "new"))
    finally:
        signal.signal(signal.SIGINT, before)
    assert [p.read_text() for p in paths] == ["new", "new"]
