"""Files read and written honestly: text in UTF-8 whatever the locale, new files with the mode a
plain open() gives, an unwritable folder and a corrupt or empty input each ended by one message
naming the file and the way out, never a traceback and never a silent success."""

import ast
import errno
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from roofline import check
from roofline.core import errors
from roofline.core.errors import SchemaError
from roofline.core.files import write_json_atomic, write_text_atomic
from roofline.core.measurement import RESTORE, knob_from_dict
from roofline.core.paths import EXPERIMENT, RECORDS
from roofline.interpretation.aggregate import load_record
from stages import RENDERED, aggregate
from stages import run as run_stage
from tests.golden import GPUS, HERE, gpu_record
from tests.machines import made_once

ROOT = Path(__file__).resolve().parents[1]
CODE = ("conf", "roofline", "stages", "hydra_plugins")
# A locale whose text encoding is ASCII, and Python left to use it: no UTF-8 mode, no coercion
# (LC_ALL set turns it off), no override of the standard streams' encoding.
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}
RENDER = ("aggregate", "plot", "report")


def make_project(where: Path) -> Path:
    """The lab's code, conf and params.yaml, with the golden pages' records (tests/golden) as
    every device's measurements: measured cpu, a100, h100 and h200, a pending mps."""
    from roofline.interpretation.lab_config import load_lab_params
    from roofline.machines.records import knobs_record, pending_record, sweep_record

    for part in CODE:
        shutil.copytree(ROOT / part, where / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "params.yaml", where)
    cfg = load_lab_params(where / "params.yaml")
    for name in cfg.devices:
        if name == "cpu":
            results = json.loads((HERE / "cpu.json").read_text(encoding="utf-8"))
        elif name in GPUS:
            results = gpu_record(name)
        else:
            results = pending_record(name, cfg.devices[name])
        records = {
            "benchmark": results,
            "sweep": sweep_record(name, "none", "measured"),
            "knobs": knobs_record(name, "none", "measured"),
        }
        for stage, record in records.items():
            write_json_atomic(where / RECORDS[stage](name), record)
    return where


def render(project: Path, env: dict[str, str]) -> list[subprocess.CompletedProcess]:
    """The render stages, as DVC runs them, in `project` under `env`."""
    return [
        subprocess.run(
            [sys.executable, "-m", f"stages.{stage}"],
            cwd=project,
            env=dict(os.environ, **env),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        for stage in RENDER
    ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    return make_project(tmp_path_factory.mktemp("recorded"))


@pytest.fixture(scope="session")
def rendered(shared) -> Path:
    """A project with its deliverables, rendered as usual: once for the run, whichever
    pytest-xdist workers run the tests that copy it (`made_once`)."""

    def make(project: Path) -> None:
        make_project(project)
        for stage, done in zip(RENDER, render(project, {}), strict=True):
            assert done.returncode == 0, f"{stage} failed:\n{done.stderr}"

    return made_once(shared, "recorded-and-rendered", make)


@pytest.mark.slow  # render stages run as processes: scheduled with the long tests
def test_the_render_stages_write_utf8_under_an_ascii_locale(recorded, tmp_path):
    said = subprocess.run(
        [sys.executable, "-c", "import locale; print(locale.getpreferredencoding(False))"],
        env=dict(os.environ, **C_LOCALE),
        capture_output=True,
        text=True,
        encoding="utf-8",
    ).stdout.strip()
    if said.lower().replace("-", "") == "utf8":
        pytest.skip(f"this platform's C locale is {said}: it cannot play an ASCII locale")
    project = shutil.copytree(recorded, tmp_path / "project")
    for stage, done in zip(RENDER, render(project, C_LOCALE), strict=True):
        assert done.returncode == 0, f"{stage} failed under LC_ALL=C ({said}):\n{done.stderr}"
    page = (project / EXPERIMENT / "REPORT.md").read_text(encoding="utf-8")
    assert "³" in page and "≥" in page  # 8192³, "≥ 600 TFLOP/s": no code page has both
    appendix = (project / EXPERIMENT / "REPORT-appendix.md").read_bytes()
    assert appendix.decode("utf-8")  # UTF-8, whatever the locale would have written
    assert (project / EXPERIMENT / "roofline.png").stat().st_size > 0


# What opens a file in text mode, and where its mode is given (positional index), if it can be.
TEXT_OPENERS = {"open": 1, "fdopen": 1, "NamedTemporaryFile": 0, "TemporaryFile": 0}
BINARY_BY_DEFAULT = {"NamedTemporaryFile", "TemporaryFile"}
CSV_PATHS = {"filepath_or_buffer": "read_csv", "path_or_buf": "to_csv"}  # (to_csv(): a str)


def text_mode(call: ast.Call, name: str, method: bool) -> bool:
    """Whether an open()-like call opens text: its mode (a literal) has no "b"."""
    index = TEXT_OPENERS[name] - (1 if method and name == "open" else 0)  # Path.open(mode)
    given = [k.value for k in call.keywords if k.arg == "mode"] + call.args[index : index + 1]
    if not given:
        return name not in BINARY_BY_DEFAULT
    mode = given[0]
    return not (isinstance(mode, ast.Constant) and "b" in str(mode.value))


def unencoded(source: str) -> list[str]:
    """The calls in `source` that read or write text without saying its encoding: read_text,
    write_text, open() and friends in text mode, pandas' read_csv and to_csv on a path."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or any(k.arg == "encoding" for k in node.keywords):
            continue
        func = node.func
        method = isinstance(func, ast.Attribute)
        name = func.attr if method else getattr(func, "id", "")
        if method and name == "open" and ast.unparse(func.value) == "os":
            continue  # os.open: a descriptor, no text
        on_a_path = node.args or any(k.arg in CSV_PATHS for k in node.keywords)
        text = name in ("read_text", "write_text") or (name in CSV_PATHS.values() and on_a_path)
        if name in TEXT_OPENERS:
            text = text_mode(node, name, method)
        if text:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_encoding_rule_catches_text_io_without_an_encoding():
    bad = """
path.read_text()
path.write_text(text)
open(path)
open(path, "w")
path.open("a")
os.fdopen(fd, "w")
tempfile.NamedTemporaryFile("w+")
pd.read_csv(path, sep=",")
table.to_csv(path, index=False)
"""
    assert len(unencoded(bad)) == 9, unencoded(bad)
    good = """
path.read_text(encoding="utf-8")
path.write_text(text, encoding="utf-8")
path.read_bytes()
open(path, "rb")
open(path, mode="wb")
path.open("rb")
os.open(path, os.O_RDONLY)
os.fdopen(fd, "wb")
tempfile.NamedTemporaryFile()
pd.read_csv(path, encoding="utf-8")
table.to_csv(index=False)
"""
    assert unencoded(good) == []


def test_every_text_file_the_project_reads_or_writes_says_utf8():
    found = {
        str(path.relative_to(ROOT)): calls
        for part in ("roofline", "stages", "hydra_plugins", "scripts")
        for path in sorted((ROOT / part).rglob("*.py"))
        if (calls := unencoded(path.read_text(encoding="utf-8")))
    }
    assert found == {}, 'give each an explicit encoding="utf-8"'


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_an_atomic_write_gives_the_mode_a_plain_open_gives(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "new.json", "{}\n")
        (tmp_path / "plain.json").write_text("{}\n", encoding="utf-8")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "plain.json").stat().st_mode) == mode


@pytest.fixture
def project(rendered, tmp_path, monkeypatch) -> Path:
    """A copy of the rendered project, as the working directory: records and deliverables."""
    copy = tmp_path / "project"
    shutil.copytree(rendered, copy)
    monkeypatch.chdir(copy)
    return copy


@pytest.mark.posix
def test_an_unwritable_experiments_folder_is_one_message_and_keeps_every_deliverable(
    project, monkeypatch, capsys
):
    before = {p.name: p.read_bytes() for p in (project / EXPERIMENT).iterdir() if p.is_file()}
    assert "results.csv" in before and "manifest.json" in before
    if os.geteuid() == 0:  # root creates files anywhere: play the kernel's check for a user
        real = os.open

        def as_a_user(path, flags, mode=0o777, *, dir_fd=None):
            if flags & os.O_CREAT and not Path(path).parent.stat().st_mode & stat.S_IWUSR:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real(path, flags, mode, dir_fd=dir_fd)

        monkeypatch.setattr(os, "open", as_a_user)
    (project / EXPERIMENT).chmod(0o555)
    try:
        with pytest.raises(SystemExit) as exit_:
            run_stage(aggregate.main, RENDERED)  # as its __main__ runs it
    finally:
        (project / EXPERIMENT).chmod(0o755)
    said = str(exit_.value)
    assert said.startswith(
        f"error: cannot write {EXPERIMENT}/results.csv: Permission denied in {EXPERIMENT}. "
        f"Make that folder writable (its permissions: `chmod u+w {EXPERIMENT}`"
    ), said
    assert said.endswith("nothing was written: the previous deliverables are as they were")
    assert "Traceback" not in capsys.readouterr().err
    after = {p.name: p.read_bytes() for p in (project / EXPERIMENT).iterdir() if p.is_file()}
    assert after == before  # every deliverable as it was, and no temporary file left


def checked(*args: str) -> tuple[int, str]:
    """`python -m roofline.check ARGS` in this process: (exit code, what it said)."""
    try:
        errors.run(lambda: check.main(list(args)))
    except SystemExit as exit_:
        code = exit_.code
        return (code, "") if isinstance(code, int) else (1, code)
    return 0, ""


def edit_manifest(edit) -> Path:
    path = EXPERIMENT / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    edit(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return path


def test_check_fails_where_nothing_it_was_asked_about_was_measured(project, capsys):
    assert checked("h100") == (0, "")  # measured and in band: as before
    assert "every measured device is inside its band" in capsys.readouterr().out
    pending = "mps: pending, nothing to check; `uv run dvc repro` on a machine with it measures it"
    assert checked("mps")[0] == 1
    assert capsys.readouterr().out == f"{pending}\n"
    assert checked("h100", "mps")[0] == 1  # the measured one passes; the one named is missing
    assert capsys.readouterr().out == f"{pending}\n"

    def nothing_measured(manifest):
        for entry in manifest["devices"].values():
            entry["status"] = "pending"
        manifest["devices"]["h100"]["status"] = "lost"

    manifest = json.loads(edit_manifest(nothing_measured).read_text(encoding="utf-8"))
    assert checked()[0] == 1
    said = capsys.readouterr().out
    each = ", ".join(f"{name} ({e['status']})" for name, e in sorted(manifest["devices"].items()))
    assert "h100 (lost)" in each and "cpu (pending)" in each
    assert said == (
        f"no device was measured, nothing to check: {each}; `uv run dvc repro` on a machine "
        "with one of them measures it\n"
    )
    assert checked("h100")[0] == 1
    assert capsys.readouterr().out.startswith("h100: lost, nothing to check; `uv run dvc repro`")


@pytest.mark.parametrize(
    ("corrupt", "said"),
    [
        ('{"devices": {"h100": ', "cannot be read as JSON (Expecting value"),
        ('["devices"]', "field devices: missing or not a JSON object"),
        ('{"devices": {"h100": {"status": "measured"}}}', "device h100: no kind, sku"),
        (lambda m: m["devices"]["h100"].pop("datasheet"), "device h100, field datasheet: missing"),
        (lambda m: m["devices"]["h100"].update(lab=None), "device h100, field lab: None; allowed"),
    ],
)
def test_a_corrupt_manifest_names_its_file_and_how_to_render_it_again(
    project, capsys, corrupt, said
):
    path = EXPERIMENT / "manifest.json"
    if callable(corrupt):
        edit_manifest(corrupt)
    else:
        path.write_text(corrupt, encoding="utf-8")
    code, message = checked("h100")
    assert code == 1 and message.startswith(f"error: {path}"), message
    assert said in message and "`uv run dvc repro --force -s aggregate`" in message
    assert "Traceback" not in capsys.readouterr().err


@pytest.fixture
def cpu_record(tmp_path):
    """The golden CPU record, to edit, and where load_record reads it."""
    record = json.loads((HERE / "cpu.json").read_text(encoding="utf-8"))
    path = tmp_path / "devices/cpu/results.json"
    path.parent.mkdir(parents=True)

    def read(edit) -> str:
        edit(record)
        path.write_text(json.dumps(record), encoding="utf-8")  # NaN and Infinity, as JSON may
        with pytest.raises(SchemaError) as err:
            load_record("cpu", path)
        return str(err.value)

    return path, read


@pytest.mark.parametrize(
    ("samples", "said"),
    [
        (
            [math.nan] * 3,
            "field samples_s: 3 of its 3 values are not finite numbers, the first nan",
        ),
        ([1e-3] * 150 + [math.inf], "1 of its 151 values are not finite numbers, the first inf"),
        ([1e-3] * 150 + [0.0, -1.0], "2 of its 152 samples are not > 0, the first 0.0"),
        ([], "field samples_s: [] in a measured row; allowed: the seconds of every timed call"),
    ],
)
def test_bad_samples_name_file_row_field_and_the_first_bad_value(cpu_record, samples, said):
    path, read = cpu_record
    message = read(lambda record: record["rows"][1].update(samples_s=samples))
    assert message.startswith(f"{path}, row 2, field samples_s: ") and said in message, message
    assert message.endswith(RESTORE) and "0.001" not in message  # never every sample


def test_bad_knob_samples_name_the_first_bad_value():
    knob = {
        "device": "cpu",
        "knob": "k",
        "baseline": "a",
        "variant": "b",
        "dtype": "float32",
        "m": 8,
        "n": 8,
        "k": 8,
        "status": "measured",
        "baseline_samples_s": [1e-3] * 50 + [-2.0],
        "variant_samples_s": [1e-3],
    }
    with pytest.raises(SchemaError) as err:
        knob_from_dict(knob, "knobs.json, row 4")
    assert str(err.value) == (
        "knobs.json, row 4, field baseline_samples_s: 1 of its 51 samples are not > 0, the first "
        f"-2.0; allowed: seconds > 0; {RESTORE}"
    )
    with pytest.raises(SchemaError, match="variant_samples_s: 0 samples in a measured knob"):
        knob_from_dict(knob | {"baseline_samples_s": [1e-3], "variant_samples_s": []}, "knobs")


@pytest.mark.parametrize("field", ["physical_cores", "logical_cores"])
@pytest.mark.parametrize("value", [0, -4, 2.0, "2", True])
def test_a_recorded_core_count_below_one_or_not_whole_is_refused_by_name(cpu_record, field, value):
    path, read = cpu_record
    message = read(lambda record: record["found"].update({field: value}))
    allowed = "a whole number >= 1" + (" or null" if field == "physical_cores" else "")
    assert message.startswith(f"{path}, field found.{field}: {value!r}; allowed: {allowed} (")
    assert "cores x clock x FLOP per cycle" in message and message.endswith(RESTORE)


def test_an_unknown_physical_core_count_is_allowed(cpu_record):
    path, _ = cpu_record
    record = json.loads((HERE / "cpu.json").read_text(encoding="utf-8"))
    record["found"]["physical_cores"] = None  # the probe could not tell
    path.write_text(json.dumps(record), encoding="utf-8")
    assert load_record("cpu", path)["found"]["physical_cores"] is None


@pytest.mark.posix
@pytest.mark.slow  # render stages run as processes: scheduled with the long tests
def test_a_run_under_umask_022_leaves_its_files_readable_by_others(recorded, tmp_path):
    # Everything is written atomically (a temporary file renamed): it must still get the mode a
    # plain open() gives, or other users of a shared pod cannot read the lab's files.
    project = tmp_path / "project"
    shutil.copytree(recorded, project)
    (project / "params.yaml").unlink()  # written afresh, as every deliverable is
    steps = ["roofline.compose", *(f"stages.{stage}" for stage in RENDER)]
    script = " && ".join(f"{sys.executable} -m {step}" for step in steps)
    done = subprocess.run(
        ["bash", "-c", f"umask 022 && {script}"], cwd=project, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    for name in ("params.yaml", f"{EXPERIMENT}/results.csv", f"{EXPERIMENT}/REPORT.md"):
        assert stat.S_IMODE((project / name).stat().st_mode) == 0o644, name


def edit_table(edit) -> Path:
    import pandas as pd

    path = EXPERIMENT / "results.csv"
    table = pd.read_csv(path, keep_default_na=False, dtype=str)
    edit(table)
    table.to_csv(path, index=False)
    return path


def first_measured(table, device: str = "h100") -> int:
    return int(((table["device"] == device) & (table["status"] == "measured")).to_numpy().argmax())


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        (
            "achieved_tflops",
            "-5",
            "achieved_tflops=-5.0; allowed: empty, or a finite number, 0 or more",
        ),
        ("mfu", "5.0", "mfu=5.0; allowed: empty, or 0 to 1"),
        ("median_s", "nan", "median_s=nan; allowed: empty, or a finite number, 0 or more"),
        ("power_w", "lots", "power_w=lots; allowed: empty, or a finite number, 0 or more"),
        ("m", "0", "m=0; allowed: empty, or a finite number, 1 or more"),
        ("device", "h1OO", "device='h1OO' is not in manifest.json (its devices: "),
    ],
)
def test_a_hand_edited_results_table_is_refused_by_check_plot_and_report_naming_the_cell(
    project, capsys, field, value, said
):
    from stages import plot, report

    line = {}

    def edit(table):
        line["row"] = first_measured(table)
        table.loc[line["row"], field] = value

    path = edit_table(edit)
    code, message = checked()
    assert code == 1 and message.startswith(f"error: {path}, line {line['row'] + 2}"), message
    assert said in message and "`uv run dvc repro --force -s aggregate`" in message
    before = {p.name: p.read_bytes() for p in (project / EXPERIMENT).iterdir() if p.is_file()}
    for stage in (plot.main, report.main):
        with pytest.raises(SchemaError, match=re.escape(said)):
            stage()
    assert "Traceback" not in capsys.readouterr().err
    after = {p.name: p.read_bytes() for p in (project / EXPERIMENT).iterdir() if p.is_file()}
    assert after == before  # nothing rendered from it
