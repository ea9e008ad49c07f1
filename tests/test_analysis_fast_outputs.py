"""The fast writers (CSV, JSON, --db) give what the plain ones give; report's plot errors."""

import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.api import load_and_analyse
from analysis.cli import main
from analysis.measures.syncs import empty_syncs
from analysis.readers.runs import Run
from analysis.render import records, report
from analysis.store import db as db_mod
from analysis.store import scratch as scratch_mod

DATA = Path(__file__).parent / "data"
STATIC = DATA / "h200-eager-static-bs16.sqlite.xz"
RUNS = DATA / "runs"


def Table(device, summary=None, steps=None, **frames):
    """An Analysis of these frames alone."""
    from analysis.measures.analysis import Analysis

    return Analysis(device, summary or {}, pd.DataFrame() if steps is None else steps, **frames)


def test_csv_quotes_and_blanks_strings_as_pandas_does():
    gaps = pd.DataFrame({
        "gap_ns": np.array([1, -2, 3**30, 0], dtype=np.int64),
        "next_op": pd.Series(['gemm<128, 2>', 'say "hi"', None, "plain"], dtype=object),
        "cause": pd.Categorical(["host", None, "sync", "host"]),
        "name": pd.array(["a", None, "b\nc", "d"], dtype="str"),
    })
    text = report.to_csv([Table(3, gaps=gaps)], "gaps")
    assert text == ('gap_ns,next_op,cause,name,device\n1,"gemm<128, 2>",host,a,3\n'
                    '-2,"say ""hi""",,,3\n205891132094649,,sync,"b\nc",3\n0,plain,host,d,3\n')
    assert text == gaps.assign(device=3).to_csv(index=False)


def test_a_table_with_nullable_or_float_columns_goes_through_pandas():
    steps = pd.DataFrame({"step": [1, 2], "bubble_ns": pd.array([5, None], dtype="Int64"),
                          "share": [0.5, 1e-05]})
    assert report.to_csv([Table(0, steps=steps)]) == (
        "step,bubble_ns,share,device\n1,5,0.5,0\n2,,1e-05,0\n")


@pytest.mark.parametrize("table", report.TABLES)
def test_csv_of_a_real_capture_is_pandas_to_csv_in_chunks_or_not(monkeypatch, table):
    _, _, analyses = load_and_analyse(STATIC)
    expected = pd.concat([getattr(a, table).assign(device=a.device) for a in analyses],
                         ignore_index=True).to_csv(index=False)
    assert report.to_csv(analyses, table) == expected
    # In chunks of a seventh of the rows, the last one short: joined back in order (7839 gaps
    # in 8 chunks, 20 steps in 10).
    rows = sum(len(getattr(a, table)) for a in analyses)
    monkeypatch.setattr(records, "CSV_CHUNK_ROWS", max(1, rows // 7))
    assert report.to_csv(analyses, table) == expected


def dump(path) -> dict:
    """Every child table's rows, each value with its SQLite type."""
    con = sqlite3.connect(path)
    try:
        out = {}
        for t in ("steps", "gaps", "streams"):
            names = [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
            typed = ", ".join(f"typeof([{c}]), [{c}]" for c in names)
            out[t] = con.execute(f"SELECT {typed} FROM {t} ORDER BY run_id, device, row").fetchall()
        return out
    finally:
        con.close()


def spy_scratch(monkeypatch) -> list:
    """The column names of each scratch file db.add_run writes, as it writes them."""
    written, write = [], scratch_mod.write_table
    monkeypatch.setattr(scratch_mod, "write_table",
                        lambda path, name, columns: written.append(list(columns))
                        or write(path, name, columns))
    return written


def test_the_database_written_from_scratch_files_holds_the_same_rows(monkeypatch, tmp_path):
    args = ["db", "add"]
    runs = [RUNS / "static", RUNS / "graphed"]
    monkeypatch.setattr(scratch_mod, "IMAGE_ROWS", 10**9)  # every table bound a value at a time
    plain = tmp_path / "plain.db"
    assert CliRunner().invoke(main, [*args, str(plain), *map(str, runs)]).exit_code == 0
    monkeypatch.setattr(scratch_mod, "IMAGE_ROWS", 0)  # gaps and streams through scratch files
    written = spy_scratch(monkeypatch)
    scratch = tmp_path / "scratch.db"
    for _ in range(2):  # the second time replaces the rows, through the scratch files again
        assert CliRunner().invoke(main, [*args, str(scratch), *map(str, runs)]).exit_code == 0
    # (gaps, streams, host) x 2 runs x 2
    assert [c[0] for c in written] == ["step", "stream", "step_row"] * 4
    monkeypatch.setattr(db_mod, "SCRATCH_FILES", 1)  # then the streams are bound row by row
    written.clear()
    one = tmp_path / "one.db"
    assert CliRunner().invoke(main, [*args, str(one), *map(str, runs)]).exit_code == 0
    assert [c[0] for c in written] == ["step", "step"]
    assert dump(one) == dump(plain)
    assert dump(scratch) == dump(plain)
    assert len(dump(plain)["gaps"]) > 1000
    con = sqlite3.connect(scratch)
    assert con.execute("PRAGMA page_size").fetchone() == (db_mod.NEW_PAGE_SIZE,)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()


def test_scratch_files_carry_text_with_gaps_and_leave_nothing_behind(monkeypatch, tmp_path):
    trace = tmp_path / "trace.sqlite"
    trace.write_bytes(b"not read, only hashed")
    gaps = pd.DataFrame({
        "gap_ns": np.array([5, -(2**63), 2**63 - 1, 0], dtype=np.int64),
        "graphed": [True, False, True, True],
        "cause": pd.Categorical(["sync", None, "host", "sync"], categories=["sync", "host"]),
        "next_op": ["a", None, "b", "é"],
    })
    steps = pd.DataFrame({"step": [1, 2], "busy_ns": [1.5, np.nan]})  # floats: bound
    streams = pd.DataFrame({"stream": pd.array([7, None], dtype="Int64")})  # missing: bound
    analysis = Table(0, summary={"device": 0, "gaps": 4}, steps=steps, gaps=gaps,
                     streams=streams, syncs=empty_syncs())
    run = Run(trace, "synthetic")
    written = spy_scratch(monkeypatch)
    # Scratch files go to a temporary directory of this test's own: another test process
    # writing its own into the shared one cannot look like one left behind.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    made, mkstemp = [], tempfile.mkstemp
    monkeypatch.setattr(tempfile, "mkstemp",
                        lambda *a, **kw: made.append(out := mkstemp(*a, **kw)) or out)
    dumps = []
    for rows in (10**9, 0):
        monkeypatch.setattr(scratch_mod, "IMAGE_ROWS", rows)
        db = db_mod.open_db(tmp_path / f"{rows}.db")
        db_mod.add_run(db, run, "synthetic", [analysis])
        assert list(scratch.iterdir()) == []
        assert db.conn.execute("PRAGMA database_list").fetchall()[0][1] == "main"
        assert len(db.conn.execute("PRAGMA database_list").fetchall()) <= 2  # main, temp
        assert db.conn.execute("SELECT name FROM temp.sqlite_master").fetchall() == []
        db.conn.close()
        dumps.append(dump(tmp_path / f"{rows}.db"))
    assert dumps[1] == dumps[0]
    assert written == [list(gaps.columns)]  # the steps' floats and the streams' NA are bound
    assert [Path(path).parent for _, path in made] == [scratch]  # the one scratch file, gone
    assert [r[8:] for r in dumps[1]["gaps"]] == [
        ("integer", 1, "text", "sync", "text", "a"), ("integer", 0, "null", None, "null", None),
        ("integer", 1, "text", "host", "text", "b"), ("integer", 1, "text", "sync", "text", "é")]
    assert [r[7] for r in dumps[1]["gaps"]] == [5, -(2**63), 2**63 - 1, 0]


def test_report_plot_errors_are_one_line(tmp_path):
    out = tmp_path / "out"
    (out / "h200-eager-static-bs16-device0.png").mkdir(parents=True)  # a PNG cannot go there
    result = CliRunner().invoke(main, ["report", str(STATIC), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "h200-eager-static-bs16-device0.png" in result.output


def test_the_benchmark_tiles_the_export_in_time_keeping_or_renumbering_steps(tmp_path):
    from study.benchmark import DEFAULT_SOURCE, build

    one = build(DEFAULT_SOURCE, 1, tmp_path / "one.sqlite")
    for repeat, steps in ((True, 20), (False, 60)):
        path = tmp_path / f"tiled-{repeat}.sqlite"
        assert build(DEFAULT_SOURCE, 3, path, repeat_names=repeat) == 3 * one
        _, _, (a,) = load_and_analyse(path)
        assert len(a.steps) == 60 and a.steps["name"].nunique() == steps
