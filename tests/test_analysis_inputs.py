"""What a new user meets first (issue 21): gzipped exports, a steps pattern per input and
errors that name it, the range names of a trace, the commands `gapscope db` lists, the notes on
a loose steps pattern, what `db add` says, labels without the file's suffixes."""

import gzip
import hashlib
import json
import lzma
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from synth import causes_trace
from test_analysis_cli import cli_inproc

from analysis.cli import main, split_pattern
from analysis.readers import compressed, kineto, nsys, reader_for
from analysis.readers.runs import resolve_run

DATA = Path(__file__).parent / "data"
STATIC = DATA / "h200-eager-static-bs16.sqlite.xz"
ROOT = DATA.parent.parent


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _cli(*args) -> subprocess.CompletedProcess:
    """Through `python -m analysis.cli`: one call a test where the exact stderr is the point;
    the others run in this process (cli_inproc, the same main())."""
    return subprocess.run([sys.executable, "-m", "analysis.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _gzip(src: Path, dst: Path) -> Path:
    """dst: the xz'd export src, gzipped instead."""
    with lzma.open(src, "rb") as f, gzip.open(dst, "wb") as g:
        shutil.copyfileobj(f, g)
    return dst


def test_a_gzipped_export_gives_the_numbers_of_the_export_and_stays_as_it_was(tmp_path,
                                                                                monkeypatch):
    gz = _gzip(STATIC, tmp_path / "static.sqlite.gz")
    before = _sha(gz)
    plain = json.loads(run("analyze", STATIC, "--format", "json").output)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    compressed.release()  # copies made before this test are elsewhere
    assert reader_for(gz) is nsys
    result = run("analyze", gz, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["summary"] == plain["summary"]
    assert run("analyze", gz).output.startswith("static: device 0, 20 steps")  # the label
    # One decompressed copy a process, removed at exit (or by release()); the original as it was.
    assert _sha(gz) == before
    assert [len(list(d.iterdir())) for d in scratch.iterdir()] == [1]
    compressed.release()
    assert list(scratch.iterdir()) == []
    # In a run directory, capture.sqlite.gz is the capture where there is no capture.sqlite.
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(gz, d / "capture.sqlite.gz")
    (d / "run.json").write_text(json.dumps({"config": {"variant": "static"}}))
    assert resolve_run(str(d)).trace_path == d / "capture.sqlite.gz"
    assert run("analyze", d).output.startswith("run: device 0, 20 steps")


def test_a_truncated_gzipped_export_is_one_line_naming_it(tmp_path):
    gz = _gzip(STATIC, tmp_path / "whole.sqlite.gz")
    cut = tmp_path / "cut.sqlite.gz"
    cut.write_bytes(gz.read_bytes()[: gz.stat().st_size // 2])
    result = cli_inproc("analyze", cut)
    assert result.returncode == 2
    assert result.stderr.startswith(f"gapscope: error: {cut}: damaged or truncated gzip")
    assert len(result.stderr.splitlines()) == 1


def test_a_gzipped_torch_profiler_trace_still_goes_to_its_reader(tmp_path):
    from synth_kineto import from_synth

    path = from_synth(causes_trace()).write(tmp_path / "torchprof.json.gz")
    assert reader_for(path) is kineto
    result = run("analyze", path)
    assert result.exit_code == 0, result.output
    # The label is the name without .json.gz (a plot was torchprof.json-device0.png).
    assert result.output.startswith("torchprof: device 0, 2 steps, torch.profiler trace")


def _decode_trace():
    """causes_trace with its steps named `decode N` (a loop of one's own)."""
    t = causes_trace()
    t.strings = {{"Step 1": "decode 1", "Step 2": "decode 2"}.get(k, k): v
                 for k, v in t.strings.items()}
    return t


def test_each_input_can_have_its_own_steps_pattern(tmp_path):
    mine = causes_trace().write(tmp_path / "mine.sqlite")
    theirs = _decode_trace().write(tmp_path / "theirs.sqlite")
    # One pattern for all fails on the second input, and the error names it.
    result = cli_inproc("compare", mine, theirs)
    assert result.returncode == 2
    # With the default pattern and no match, the steps are inferred; too few launches to.
    assert result.stderr.startswith(f"gapscope: error: {theirs}: no step ranges, and no "
                                    "repeating structure to infer steps from")
    assert "'decode N' ×2" in result.stderr
    out = run("compare", mine, f"{theirs}:^decode (\\d+)$", "--format", "json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert [(r["label"], r["steps"]) for r in data] == [("mine", 2), ("theirs", 2)]
    assert data[0]["period_ns_median"] == data[1]["period_ns_median"] == 65
    report = run("report", mine, f"{theirs}:^decode (\\d+)$", "-o", tmp_path / "out")
    assert report.exit_code == 0, report.output


def test_the_pattern_is_split_from_the_longest_path_that_exists(tmp_path):
    path = causes_trace().write(tmp_path / "a:b.sqlite")
    assert split_pattern(str(path)) == (str(path), None)
    assert split_pattern(f"{path}:^x(?:y)$") == (str(path), "^x(?:y)$")
    assert split_pattern(str(tmp_path / "missing.sqlite")) == (
        str(tmp_path / "missing.sqlite"), None)


def test_ranges_lists_each_name_with_its_count_and_what_the_steps_pattern_takes():
    result = run("ranges", STATIC, "--shapes")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "      20 * Step N",
        "      20   Model Forward",
        "      20   Check Stop Condition",
        "60 ranges, 3 kinds of name; * the steps pattern '^Step (\\d+)$' takes 20 of them"]
    lines = run("ranges", STATIC, "--steps", "Forward").output.splitlines()
    assert lines[0] == "      20 * Model Forward" and lines[2] == "       1   Step 31"
    assert lines[-1].startswith("60 ranges, 22 names; * the steps pattern 'Forward' takes 20")


def test_a_loose_or_groupless_steps_pattern_gets_a_note():
    result = cli_inproc("analyze", STATIC, "--steps", "Forward|Check")
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "gapscope: note: h200-eager-static-bs16: the steps pattern 'Forward|Check' has no group, "
        "so the steps are numbered 1 to 40 in the order they start; a group such as "
        "'^Step (\\d+)$' takes the numbers in their names",
        "gapscope: note: h200-eager-static-bs16: the steps pattern 'Forward|Check' took 40 "
        "ranges of 2 kinds of name as steps ('Model Forward' ×20, 'Check Stop Condition' ×20); "
        "anchor it to the step ranges' names, e.g. '^Step (\\d+)$'"]
    # 'e' matches all three kinds, but the forwards and checks lie inside the Step ranges: a
    # step holds no step, so it takes the 20 steps (numbered by order, with no group).
    loose = cli_inproc("analyze", STATIC, "--steps", "e")
    assert loose.stderr.splitlines() == [
        "gapscope: note: h200-eager-static-bs16: the steps pattern 'e' has no group, so the "
        "steps are numbered 1 to 20 in the order they start; a group such as '^Step (\\d+)$' "
        "takes the numbers in their names"]
    assert _cli("analyze", STATIC).stderr == ""


def test_db_lists_its_own_commands_only():
    result = cli_inproc("db", "--help")
    commands = result.stdout.split("Commands:")[1].split()
    assert commands[0] == "add" and not {"doctor", "profile", "study"} & set(commands)
    wrong = cli_inproc("db", "doctor")
    assert wrong.returncode == 2 and wrong.stderr == "gapscope: error: No such command 'doctor'.\n"


def test_db_add_says_what_it_added_and_what_the_database_holds(tmp_path):
    db = tmp_path / "runs.db"
    a = causes_trace().write(tmp_path / "a.sqlite")
    other = causes_trace()
    other.launch(160, 161, 170, 180)  # another trace: another run
    b = other.write(tmp_path / "b.sqlite")
    assert _cli("db", "add", db, a, b).stderr == (
        f"gapscope: added 2 runs to {db}, which holds 2 runs\n")
    # A trace added again replaces its rows: the database still holds two.
    again = cli_inproc("db", "add", db, a).stderr
    assert again == f"gapscope: added 1 run to {db}, which holds 2 runs\n"
