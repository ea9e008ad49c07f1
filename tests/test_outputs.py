"""No output ever touches an input (analysis/outputs.py; ANALYSIS.md, "Outputs"): an output that
is, resolves to or links to an input is refused in one line, exit 2, before any work, the input's
bytes as they were; an existing output is replaced only with --force (overwrite=True in the
library); the extension decides the format or is refused; report's folder holds its own files
only; an input that is no regular file is refused at once."""

import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import plain_copy

import analysis
from analysis.cli import main

RUNS = Path(__file__).parent / "data" / "runs"
ROOT = Path(__file__).parent.parent


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def runs(tmp_path) -> Path:
    """A run directory, its export plain as profile writes it, and a loose export of it (the
    graph-level capture: the smallest)."""
    run_dir = tmp_path / "run"
    shutil.copytree(RUNS / "graphed-sync-graphlevel", run_dir,
                    ignore=shutil.ignore_patterns("capture.sqlite.xz"))
    plain_copy(RUNS / "graphed-sync-graphlevel" / "capture.sqlite.xz", run_dir / "capture.sqlite")
    shutil.copy(run_dir / "capture.sqlite", tmp_path / "good.sqlite")
    return tmp_path


def refused(result, *needles) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gapscope: error: "), result.output
    assert all(n in lines[0] for n in needles), lines[0]
    return lines[0]


# Each way an output could land on an input: exit 2, one line, the input's bytes unchanged.
ONTO_INPUT = [
    (["analyze", "{good}", "--perfetto", "{good}"], "is an input"),
    (["analyze", "{good}", "--plot", "{link}"], "is an input"),           # a symbolic link
    (["analyze", "{good}", "--plot", "{hard}", "--force"], "is an input"),  # a hard link
    (["analyze", "{good}", "--db", "{good}"], "is an input"),
    (["db", "add", "{good}", "{good}"], "is an input"),
    (["compare", "{good}", "--hardware-plot", "{good}", "--force"], "is an input"),
    (["compare", "{good}", "{run}", "--db", "{good}"], "is an input"),
    (["report", "{good}", "-o", "{tmp}/rep", "--perfetto", "{good}", "--force"], "is an input"),
    (["report", "{run}", "-o", "{tmp}/rep", "--db", "{run}/capture.sqlite"], "is an input"),
    # Not this command's input, but a run's own file: never an output, even with --force.
    (["analyze", "{good}", "--perfetto", "{run}/untraced.json", "--force"],
     "a run directory's own file"),
    (["db", "add", "{tmp}/sweep/capture.sqlite", "{tmp}/sweep"], "is an input"),
]


@pytest.mark.parametrize("args, said", ONTO_INPUT)
def test_an_output_onto_an_input_is_one_line_exit_2_and_the_input_unchanged(runs, args, said):
    good, run_dir = runs / "good.sqlite", runs / "run"
    (runs / "link.png").symlink_to(good)
    os.link(good, runs / "hard.png")
    (runs / "sweep").mkdir()
    shutil.copy(good, runs / "sweep" / "capture.sqlite")
    before = {p: sha(p) for p in [good, *run_dir.iterdir(), runs / "sweep" / "capture.sqlite"]}
    refused(run(*(a.format(good=good, run=run_dir, tmp=runs, link=runs / "link.png",
                           hard=runs / "hard.png") for a in args)), said)
    assert {p: sha(p) for p in before} == before
    assert not (runs / "rep" / "report.md").exists()


def test_standard_output_appended_to_its_input_is_refused_before_a_byte(runs):
    good = runs / "good.sqlite"
    before = sha(good)
    done = subprocess.run([sys.executable, "-m", "analysis.cli", "analyze", str(good)],
                          stdout=open(good, "ab"), stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"gapscope: error: standard output is {good}, an input: printing into it would "
        "destroy the capture; redirect it to another file"]
    assert sha(good) == before


def test_an_existing_output_is_replaced_only_with_force(runs):
    good = runs / "good.sqlite"
    for option, name in (("--plot", "p.png"), ("--perfetto", "t.json")):
        (runs / name).write_text("mine\n")
        refused(run("analyze", good, option, runs / name), f"{option} {runs / name}: exists; "
                "--force replaces it")
        assert (runs / name).read_text() == "mine\n"
    (runs / "hw.png").write_text("mine\n")
    refused(run("compare", RUNS / "fused-metrics", "--hardware-plot", runs / "hw.png"),
            "exists; --force replaces it")
    assert (runs / "hw.png").read_text() == "mine\n"
    done = run("analyze", good, "--plot", runs / "p.png", "--perfetto", runs / "t.json",
               "--force")
    assert done.exit_code == 0, done.output
    assert (runs / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((runs / "t.json").read_text())["traceEvents"]
    # Written whole or not at all: no temporary file is left beside them.
    assert sorted(p.name for p in runs.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("option, name, message", [
    ("--plot", "plot.txt", "end the name in .png, .svg, .pdf"),
    ("--perfetto", "t.txt", "end the name in .json, .json.gz"),
    ("--db", "runs.json", "end the name in .db, .sqlite, .sqlite3"),
])
def test_an_extension_that_names_no_format_is_one_line(runs, option, name, message):
    refused(run("analyze", runs / "good.sqlite", option, runs / name),
            f"{option} {runs / name}: the extension names no format it writes; {message}")
    assert not (runs / name).exists()


def test_the_extension_decides_the_format(runs):
    good = runs / "good.sqlite"
    done = run("analyze", good, "--plot", runs / "p.svg", "--perfetto", runs / "t.json.gz")
    assert done.exit_code == 0, done.output
    assert (runs / "p.svg").read_text().lstrip().startswith("<?xml")
    with gzip.open(runs / "t.json.gz", "rt") as f:
        assert json.load(f)["traceEvents"]
    assert run("analyze", good, "--plot", runs / "p.pdf").exit_code == 0
    assert (runs / "p.pdf").read_bytes()[:5] == b"%PDF-"


def test_an_input_that_is_no_regular_file_is_refused_at_once(tmp_path):
    fifo = tmp_path / "f.sqlite"
    os.mkfifo(fifo)
    refused(run("analyze", fifo), f"{fifo}: a FIFO, not a capture")
    refused(run("compare", fifo, RUNS / "fused"), f"{fifo}: a FIFO, not a capture")
    refused(run("analyze", "/dev/null"), "/dev/null: a device, not a capture")
    with pytest.raises(analysis.TraceError, match="a FIFO, not a capture"):
        analysis.load(fifo)


def test_a_report_folder_holds_this_report_s_files_only(runs, tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    first = run("report", RUNS / "fused", runs / "run", "-o", out, "--perfetto", out / "t.json")
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in out.iterdir()) == [
        "fused-device0.png", "notes.txt", "report.md", "run-device0.png", "summary.json",
        "t.json"]
    # Again into it: refused without --force, the earlier report as it was.
    before = sha(out / "report.md")
    refused(run("report", RUNS / "fused", "-o", out), f"-o {out}: holds an earlier report "
            "(report.md and 4 more files); --force replaces it (its own files only)")
    assert sha(out / "report.md") == before
    # With --force: the earlier report's own files replaced or removed, the foreign one kept.
    again = run("report", RUNS / "fused", "-o", out, "--force")
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in out.iterdir()) == [
        "fused-device0.png", "notes.txt", "report.md", "summary.json"]
    assert (out / "notes.txt").read_text() == "mine\n"
    assert (out / "report.md").read_text().rstrip().endswith(
        "<!-- gapscope report files: report.md summary.json fused-device0.png -->")


def test_a_report_into_its_run_directory_touches_none_of_the_run_s_files(runs):
    run_dir = runs / "run"
    before = {p.name: sha(p) for p in run_dir.iterdir()}
    done = run("report", run_dir, "-o", run_dir)
    assert done.exit_code == 0, done.output
    assert {p.name: sha(p) for p in run_dir.iterdir() if p.name in before} == before
    assert sorted(set(p.name for p in run_dir.iterdir()) - set(before)) == [
        "report.md", "run-device0.png", "summary.json"]


def test_the_library_refuses_the_same_outputs_with_trace_error(runs):
    a = analysis.load(runs / "run")
    good = runs / "run" / "capture.sqlite"
    before = sha(good)
    with pytest.raises(analysis.TraceError, match="plot.path. .*: is an input"):
        a.plot(good, overwrite=True)
    with pytest.raises(analysis.TraceError, match="no folder /nonexistent to write it in"):
        a.plot("/nonexistent/x.png")
    with pytest.raises(analysis.TraceError, match="end the name in .png, .svg, .pdf"):
        a.plot(runs / "x.txt")
    a.to_perfetto(runs / "t.json.gz")
    with gzip.open(runs / "t.json.gz", "rt") as f:
        assert json.load(f)["traceEvents"]
    with pytest.raises(analysis.TraceError, match="exists; overwrite=True replaces it"):
        a.to_perfetto(runs / "t.json.gz")
    a.to_perfetto(runs / "t.json.gz", overwrite=True)
    with pytest.raises(analysis.TraceError, match="no gapscope results database"):
        analysis.Database(runs / "good.sqlite")
    with pytest.raises(analysis.TraceError, match="a run directory's own file"):
        analysis.Database(good)
    assert sha(good) == before
    conn = sqlite3.connect(runs / "good.sqlite")
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'runs'").fetchone() == (0,)
    conn.close()


def test_a_report_md_of_someone_else_is_replaced_with_force_and_its_figures_kept(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "report.md").write_text("# my notes\n![mine](mine.png)\n")
    (out / "mine.png").write_bytes(b"png")
    refused(run("report", RUNS / "fused", "-o", out), "holds an earlier report")
    assert (out / "report.md").read_text().startswith("# my notes")
    assert run("report", RUNS / "fused", "-o", out, "--force").exit_code == 0
    assert (out / "mine.png").read_bytes() == b"png"


def test_study_replaces_an_earlier_results_md_only_with_force(tmp_path):
    from study.cli import study as study_command

    def run_study(*args):
        return CliRunner().invoke(study_command, [str(a) for a in args])

    study, out = tmp_path / "study", tmp_path / "out"
    study.mkdir()
    out.mkdir()
    (out / "RESULTS.md").write_text("mine\n")
    refused(run_study(study, "-o", out), f"-o {out / 'RESULTS.md'}: exists; --force replaces it")
    assert (out / "RESULTS.md").read_text() == "mine\n"
    fifo = tmp_path / "notes.md"
    os.mkfifo(fifo)
    refused(run_study(study, "-o", tmp_path / "new", "--notes", fifo),
            f"{fifo}: a FIFO, not a Markdown file of notes")
