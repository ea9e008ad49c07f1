"""The results database (`--db`, `gapscope db add`, `compare --db`) and directory sweeps."""

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import plain_copy

from analysis.cli import main

RUNS = Path(__file__).parent / "data" / "runs"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def query(path, sql):
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def counts(path, key="label") -> dict:
    sql = f"SELECT {key}, count(*) FROM {{}} JOIN runs USING (run_id, device) GROUP BY {key}"
    return {t: dict(query(path, sql.format(t))) for t in ("steps", "gaps", "streams")}


@pytest.fixture
def two_runs_db(tmp_path):
    db = tmp_path / "runs.db"
    result = run("db", "add", db, RUNS / "static", RUNS / "graphed")
    assert result.exit_code == 0, result.output
    return db


def test_the_database_holds_every_row_the_json_has(two_runs_db):
    expected = {}
    for name in ("static", "graphed"):
        out = json.loads(run("analyze", RUNS / name, "--format", "json").stdout)
        expected[name] = out
    assert counts(two_runs_db) == {
        "steps": {n: len(o["steps"]["step"]) for n, o in expected.items()},
        "gaps": {n: len(o["gaps"]["gap_ns"]) for n, o in expected.items()},
        "streams": {n: len(o["streams"]["per_stream"]) for n, o in expected.items()},
    }
    (row,) = query(two_runs_db, "SELECT config_variant, config_batch, versions_torch, window_ns, "
                                "idle_ns_by_cause_sync, untraced_ms_per_step_median, trace_hash "
                                "FROM runs WHERE label = 'static'")
    s = expected["static"]["summary"]
    assert row[:6] == ("static", 32, "2.11.0+cu130", s["window_ns"],
                       s["idle_ns_by_cause"]["sync"], 5.74724199)
    stored = (RUNS / "static" / "capture.sqlite.xz").read_bytes()  # the file as given, xz'd
    assert row[6] == hashlib.sha256(stored).hexdigest()
    gaps = query(two_runs_db, "SELECT sum(gap_ns), count(DISTINCT cause) FROM gaps JOIN runs "
                              "USING (run_id, device) WHERE label = 'graphed'")
    assert gaps == [(expected["graphed"]["summary"]["idle_ns"], 1)]


def test_adding_a_run_again_replaces_it_from_any_path(two_runs_db, tmp_path):
    before = counts(two_runs_db, "run_id")
    copy = tmp_path / "elsewhere"
    shutil.copytree(RUNS / "static", copy)
    assert run("db", "add", two_runs_db, RUNS / "static", copy).exit_code == 0
    assert counts(two_runs_db, "run_id") == before
    assert query(two_runs_db, "SELECT count(*) FROM runs") == [(2,)]
    assert query(two_runs_db, "SELECT trace FROM runs WHERE label = 'elsewhere'") == [
        (str((copy / "capture.sqlite.xz").resolve()),)]


def test_a_key_new_in_a_later_run_becomes_a_column(two_runs_db, tmp_path):
    later = tmp_path / "later"
    shutil.copytree(RUNS / "fused", later)
    info = json.loads((later / "run.json").read_text())
    info["config"]["kv_layout"] = "paged"
    (later / "run.json").write_text(json.dumps(info))
    assert run("analyze", later, "--db", two_runs_db).exit_code == 0
    assert query(two_runs_db, "SELECT label, config_kv_layout FROM runs ORDER BY rowid") == [
        ("static", None), ("graphed", None), ("later", "paged")]


def test_compare_from_the_database_matches_compare_of_the_traces(two_runs_db):
    direct = run("compare", RUNS / "static", RUNS / "graphed").stdout
    stored = run("compare", "--db", two_runs_db)
    assert stored.exit_code == 0, stored.output
    assert stored.stdout == direct
    only = run("compare", "--db", two_runs_db, "--where", "config_variant = 'graphed'").stdout
    assert only.splitlines()[0].split() == ["graphed"]


@pytest.mark.parametrize("args, message", [
    (["--where", "no_such_column = 1"], "cannot read the runs (no such column: no_such_column)"),
    (["--where", "config_batch = 999"], "no run matches 'config_batch = 999'"),
])
def test_compare_db_errors_are_one_line(two_runs_db, args, message):
    result = run("compare", "--db", two_runs_db, *args)
    assert result.exit_code == 2
    assert result.output == f"gapscope: error: {two_runs_db}: {message}\n"


def test_a_sqlite_file_that_is_no_results_database_is_one_line(tmp_path):
    other = tmp_path / "export.sqlite"
    plain_copy(RUNS / "static" / "capture.sqlite.xz", other)
    result = run("compare", "--db", other)
    assert result.exit_code == 2
    assert result.output == (f"gapscope: error: {other}: not a gapscope results database (no "
                             "runs table); write one with --db or `gapscope db add`\n")


def test_a_directory_of_runs_is_one_row_a_run_in_100_columns(tmp_path):
    sweep = tmp_path / "sweep"
    names = ["fused", "fused-b2", "graphed", "graphed-sync"]
    for repeat in range(2):
        for name in names:
            (sweep / f"r{repeat}").mkdir(parents=True, exist_ok=True)
            (sweep / f"r{repeat}" / name).symlink_to(RUNS / name)
    result = run("compare", sweep, "--db", tmp_path / "sweep.db")
    assert result.exit_code == 0, result.output
    progress = [line for line in result.stderr.splitlines() if "analysed" in line]
    assert progress[0] == f"gapscope: analysed 1/8: {sweep / 'r0' / 'fused'}"
    assert len(progress) == 8
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "steps", "period"]
    assert [line.split()[0] for line in lines[1:9]] == [
        f"r{r}/{n}" for r in range(2) for n in names]
    assert max(len(line) for line in lines) <= 100
    assert query(tmp_path / "sweep.db", "SELECT count(*) FROM runs") == [(4,)]


def test_an_empty_directory_is_one_line(tmp_path):
    result = run("compare", tmp_path)
    assert result.exit_code == 2
    assert "no run directory (capture.sqlite) or export (.sqlite) under it" in result.output


def test_csv_prints_the_table_asked_for(tmp_path):
    gaps = run("analyze", RUNS / "graphed", "--format", "csv", "--table", "gaps").stdout
    lines = gaps.splitlines()
    assert lines[0].startswith("step,start_ns,end_ns,gap_ns")
    summary = json.loads(run("analyze", RUNS / "graphed", "--format", "json").stdout)["summary"]
    assert len(lines) - 1 == summary["gaps"]
    streams = run("analyze", RUNS / "graphed", "--format", "csv", "--table", "streams").stdout
    assert streams.splitlines()[0] == "stream,ops,busy_ns,device"


def test_study_of_a_directory_of_runs_tables_them_all_and_stores_them(tmp_path):
    from study.cli import study

    sweep = tmp_path / "sweep"
    for batch in ("b1", "b2"):
        (sweep / batch).mkdir(parents=True)
        for name in ("fused", "graphed"):
            (sweep / batch / name).symlink_to(RUNS / name)
    result = CliRunner().invoke(study, [str(sweep), "-o", str(tmp_path / "out"),
                                        "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "RESULTS.md").read_text()
    assert text.startswith("# Results: 4 runs under `sweep`")
    rows = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| b")]
    assert rows == ["| b1/fused", "| b1/graphed", "| b2/fused", "| b2/graphed"]
    # b2's runs are b1's traces (links): added again, they replaced them
    assert query(tmp_path / "s.db", "SELECT label FROM runs ORDER BY label") == [
        ("b2/fused",), ("b2/graphed",)]


def test_the_twin_survives_the_database_and_does_not_hide_the_bench(tmp_path):
    runs = [RUNS / "static-kineto", RUNS / "graphed-sync-graphlevel", RUNS / "graphed"]
    db = tmp_path / "twins.db"
    assert run("db", "add", db, *runs).exit_code == 0
    # run.json's untraced is the bench's (9.43 ms/step, all 50 steps); the twin's is its own.
    assert query(db, "SELECT label, untraced_ms_per_step_median, twin_period_ns_median, "
                     "twin_steps FROM runs ORDER BY label") == [
        ("graphed", 1.30913244, None, None),
        ("graphed-sync-graphlevel", 1.1847914833333335, 1188657.5, 30),
        ("static-kineto", 9.43438764, 10136596.5, 30)]
    # compare from the database shows the twin's rows as compare of the traces does.
    assert run("compare", "--db", db).stdout == run("compare", *runs).stdout


@pytest.mark.parametrize("args, message", [
    (["--plot", "{tmp}/no/such/x.png"], "--plot {tmp}/no/such/x.png: no folder {tmp}/no/such to "
                                        "write it in"),
    (["--db", "{tmp}/notes.db"], "--db {tmp}/notes.db: not a SQLite file (a results database "
                                 "is one: name a new file, or one gapscope wrote)"),
    (["--db", "{tmp}/notes.txt"], "--db {tmp}/notes.txt: the extension names no format it "
                                  "writes; end the name in .db, .sqlite, .sqlite3"),
    # Another capture (an nsys export, not the one analysed): never written into.
    (["--db", "{tmp}/other.sqlite"], "--db {tmp}/other.sqlite: a SQLite file but no gapscope "
                                     "results database (no runs table; an nsys export?): name "
                                     "a new file"),
    (["--db", str(RUNS / "graphed" / "capture.sqlite.xz")],
     f"--db {RUNS / 'graphed' / 'capture.sqlite.xz'}: a run directory's own file; name another "
     "file"),
])
def test_a_bad_output_is_one_line_before_any_analysis(tmp_path, args, message):
    for name in ("notes.txt", "notes.db"):
        (tmp_path / name).write_text("mine\n")
    plain_copy(RUNS / "graphed" / "capture.sqlite.xz", tmp_path / "other.sqlite")
    before = (tmp_path / "other.sqlite").read_bytes()
    result = run("analyze", RUNS / "static", *(a.format(tmp=tmp_path) for a in args))
    assert result.exit_code == 2
    assert result.output == f"gapscope: error: {message.format(tmp=tmp_path)}\n"
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    assert (tmp_path / "other.sqlite").read_bytes() == before
