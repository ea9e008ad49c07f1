"""The syncs table: each blocking call inside the steps, by the Python line its mark names
(analysis/measures/syncs.py), worked out by hand on tests/synth.py's syncs_trace and on small
joins."""

import json
import sqlite3

import golden
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import plain_copy
from synth import PID, TID, Synth, causes_trace, global_tid, syncs_trace

from analysis.cli import main
from analysis.measures.summary import Options, analyze
from analysis.measures.syncs import COLUMNS, join_marks, outermost, parse_marks
from analysis.readers import compressed, load_trace
from analysis.render.report import to_markdown, to_text

T = global_tid(PID, TID)


@pytest.fixture
def path(tmp_path):
    return syncs_trace().write(tmp_path / "syncs.sqlite")


@pytest.fixture
def syncs(path):
    (a,) = analyze(load_trace(path))
    return a


def test_marks_are_read_from_text_and_registered_strings(path):
    marks = load_trace(path).marks
    assert list(marks["start"]) == [46, 76, 136, 169]
    assert list(marks["name"]) == ["gapscope.sync /src/gen.py:41 decode",
                                   "gapscope.sync /src/gen.py:57 check",
                                   "gapscope.sync /src/gen.py:41 decode",
                                   "gapscope.sync /src/gen.py:99 elsewhere"]
    assert list(marks["tid"]) == [T, T, T, T + 1]


def test_each_site_has_its_calls_blocked_time_and_idle_after(syncs):
    t = syncs.syncs
    assert list(t["call"]) == ["cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy"]
    assert list(t["file"]) == ["/src/gen.py", "unknown", "/src/gen.py"]
    assert t["line"].tolist() == [41, pd.NA, 57]
    assert list(t["function"]) == ["decode", "unknown", "check"]
    assert list(t["tid"]) == [T, T, T]
    # The device sync at 250-260 is after the steps and the window: not counted.
    assert list(t["calls"]) == [2, 1, 1]
    assert list(t["calls_per_step"]) == [1.0, 0.5, 0.5]
    # 15-45 and 115-135; 150-168; 60-75.
    assert list(t["blocked_ns"]) == [30 + 20, 18, 15]
    assert list(t["blocked_ns_median"]) == [25.0, 18.0, 15.0]
    # The sync gaps 40-55 and 130-145; 160-175; 70-85 (the GPU idle until the next op), of
    # which the device waited 5, 5; 8; 5 while the thread was still in the call.
    assert list(t["gpu_idle_after_ns"]) == [30, 15, 15]
    assert list(t["gpu_idle_in_call_ns"]) == [10, 8, 5]


def test_the_idle_after_the_calls_is_the_sync_idle_and_the_wait(syncs):
    s, t = syncs.summary, syncs.syncs
    assert t["gpu_idle_after_ns"].sum() == s["idle_ns_by_cause"]["sync"] == 60
    assert t["gpu_idle_in_call_ns"].sum() == s["idle_ledger"]["blocked"] == 23


def test_a_mark_on_another_thread_names_that_thread_s_call_only(tmp_path):
    t = syncs_trace()
    # A second thread with a step of its own (its op inside k1, so the gaps stay), and a sync
    # 160-166 that its mark at 169 follows: the device sync 150-168 still has no line.
    t.range("Step 1", 0, 100, tid=TID + 1)
    t.launch(20, 22, 25, 35, tid=TID + 1, stream=8)
    t.call("cudaStreamSynchronize_v3020", 160, 166, tid=TID + 1)
    (a,) = analyze(load_trace(t.write(tmp_path / "t.sqlite")))
    rows = a.syncs[["tid", "call", "file", "line", "calls", "calls_per_step", "blocked_ns",
                    "gpu_idle_after_ns"]]
    assert rows.astype(object).values.tolist() == [
        [T, "cudaStreamSynchronize", "/src/gen.py", 41, 2, 1.0, 50, 30],
        [T, "cudaDeviceSynchronize", "unknown", pd.NA, 1, 0.5, 18, 15],
        [T, "cudaMemcpy", "/src/gen.py", 57, 1, 0.5, 15, 15],
        [T + 1, "cudaStreamSynchronize", "/src/gen.py", 99, 1, 1.0, 6, 0]]
    text = to_text("t", [a], "3.20.3")
    assert f"    /src/gen.py:41 in decode, thread {TID}" in text.splitlines()
    assert ["cudaStreamSynchronize", "/src/gen.py:99 in elsewhere"] in [
        r[:2] for r in golden.table_rows(to_markdown("t", [a]), str(TID + 1))]


def test_without_marks_every_call_is_listed_with_an_unknown_line(tmp_path):
    t = syncs_trace()
    t.nvtx = [e for e in t.nvtx if e[2] != 34]
    (a,) = analyze(load_trace(t.write(tmp_path / "t.sqlite")))
    assert list(a.syncs["call"]) == ["cudaStreamSynchronize", "cudaDeviceSynchronize",
                                     "cudaMemcpy"]
    assert set(a.syncs["file"]) == {"unknown"} and a.syncs["line"].isna().all()
    text = to_text("t", [a], "3.20.3")
    assert "    capture with `gapscope profile` to name the lines: it marks each sync" in \
        text.splitlines()
    assert "No line is known: capture with `gapscope profile`" in to_markdown("t", [a])


def test_a_capture_without_blocking_calls_has_an_empty_table(tmp_path):
    (a,) = analyze(load_trace(causes_trace().write(tmp_path / "t.sqlite")))
    assert len(a.syncs) == 1  # causes_trace's one sync
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(10, 12, 20, 40)
    (a,) = analyze(load_trace(t.write(tmp_path / "none.sqlite")))
    assert a.syncs.empty and list(a.syncs.columns) == list(COLUMNS)
    assert "  syncs          no blocking call inside the steps" in to_text("t", [a], "x")


def frames(calls: list, marks: list, step_starts=(0,)) -> tuple:
    """calls [(start, end)], marks [(start, where)] on one thread, in the form join_marks reads."""
    c = pd.DataFrame(calls, columns=["start", "end"]).assign(tid=T, name="cudaStreamSynchronize")
    m = parse_marks(pd.DataFrame({"start": [s for s, _ in marks], "tid": T,
                                  "name": [f"gapscope.sync /a.py:{w} f" for _, w in marks]}))
    steps = pd.DataFrame({"start": list(step_starts), "end": 10**6, "tid": T})
    return outermost(c), m, steps


def joined_lines(calls: list, marks: list, **kw) -> list:
    c, m, steps = frames(calls, marks, **kw)
    j = join_marks(c, m, steps)
    return [int(m["line"][k]) if k >= 0 else None for k in j]


def test_a_mark_after_its_call_names_it_and_an_unmarked_call_stays_unknown():
    # An unmarked device sync, then two marked calls, each mark right after its call.
    assert joined_lines([(0, 5), (10, 20), (30, 40)], [(21, 1), (41, 2)]) == [None, 1, 2]


def test_marks_before_their_calls_name_them_too():
    # The same thread marking before each call: more marks join so, so that order is taken.
    assert joined_lines([(10, 20), (30, 40)], [(5, 1), (25, 2)]) == [1, 2]


def test_a_mark_no_call_came_before_names_the_next_unmarked_call():
    # 25 follows 10-20, which 21 already names: it takes 30-40, which no mark follows.
    assert joined_lines([(10, 20), (30, 40), (50, 60)], [(21, 1), (25, 2), (61, 3)]) == [1, 2, 3]


def test_two_marks_after_an_op_that_synced_twice_name_its_calls_in_order():
    assert joined_lines([(10, 20), (22, 30)], [(31, 1), (32, 2)]) == [1, 2]


def test_a_mark_never_joins_a_call_of_another_step():
    # Step 2 starts at 25: the mark at 26 follows no call of its step, and the call after it
    # (30-40) is its own.
    assert joined_lines([(10, 20), (30, 40)], [(26, 7)], step_starts=(0, 25)) == [None, 7]


def test_a_call_inside_another_counts_once():
    c = pd.DataFrame({"start": [10, 12, 50], "end": [40, 38, 60], "tid": T,
                      "name": ["cudaMemcpy", "cuMemcpyDtoH", "cudaMemcpy"]})
    assert list(outermost(c)["start"]) == [10, 50]


def test_marks_that_do_not_parse_are_left_out():
    m = pd.DataFrame({"start": [1, 2, 3, 4], "tid": T, "name": [
        "gapscope.sync /a b/c:d.py:12 <module>", "gapscope.sync nowhere", "other mark",
        "gapscope.sync /x.py:y f"]})
    p = parse_marks(m)
    assert list(p["file"]) == ["/a b/c:d.py"] and list(p["line"]) == [12]
    assert list(p["function"]) == ["<module>"]


def test_text_names_the_top_lines_in_100_columns(tmp_path):
    (a,) = analyze(load_trace(syncs_trace(scale=1000).write(tmp_path / "us.sqlite")))
    lines = to_text("t", [a], "3.20.3").splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("  syncs"))
    assert lines[i:i + 7] == [
        # 83 µs blocked in all (50 + 18 + 15), 60 µs of sync gaps (30 + 15 + 15); 2 steps.
        "  syncs          2.00 blocking calls a step (4): 0.08 ms host blocked, 0.06 ms GPU "
        "idle after",
        "    /src/gen.py:41 in decode",
        "      cudaStreamSynchronize 1.00/step: 25.0 µs host blocked (median), 15.0 µs/step GPU "
        "idle after",
        "    unknown (no mark)",
        "      cudaDeviceSynchronize 0.50/step: 18.0 µs host blocked (median), 7.5 µs/step GPU "
        "idle after",
        "    /src/gen.py:57 in check",
        "      cudaMemcpy 0.50/step: 15.0 µs host blocked (median), 7.5 µs/step GPU idle after",
    ]
    assert not any("gapscope profile" in line for line in lines)
    assert max(len(line) for line in lines) <= 100


def test_a_long_path_is_cut_from_its_start():
    from analysis.render.report import _fit

    line = _fit("    ", "/" + "d" * 200 + "/utils.py:2451 in _has_unfinished_sequences")
    assert len(line) == 100 and line.startswith("    …ddd")
    assert line.endswith("/utils.py:2451 in _has_unfinished_sequences")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_json_csv_and_markdown_carry_the_table(path):
    out = json.loads(run("analyze", path, "--format", "json").output)
    assert out["syncs"][0] == {
        "tid": T, "thread": "1001", "call": "cudaStreamSynchronize", "file": "/src/gen.py",
        "line": 41, "function": "decode", "calls": 2, "calls_per_step": 1, "blocked_ns": 50,
        "blocked_ns_median": 25, "gpu_idle_after_ns": 30, "gpu_idle_in_call_ns": 10}
    assert out["syncs"][1]["line"] is None
    csv = run("analyze", path, "--format", "csv", "--table", "syncs").output.splitlines()
    assert csv[0] == ("tid,thread,call,file,line,function,calls,calls_per_step,blocked_ns,"
                      "blocked_ns_median,gpu_idle_after_ns,gpu_idle_in_call_ns,device")
    assert csv[1:] == [
        f"{T},1001,cudaStreamSynchronize,/src/gen.py,41,decode,2,1.0,50,25.0,30,10,0",
        f"{T},1001,cudaDeviceSynchronize,unknown,,unknown,1,0.5,18,18.0,15,8,0",
        f"{T},1001,cudaMemcpy,/src/gen.py,57,check,1,0.5,15,15.0,15,5,0"]
    md = run("analyze", path, "--format", "md").output
    (row,) = golden.table_rows(md, "cudaStreamSynchronize")
    assert row[0] == "/src/gen.py:41 in decode"
    assert golden.values(row[1:]) == [2, 1.0, 0.1, 0.0, 0.0, 0.0]
    assert "No line is known" not in md


def test_the_database_has_a_syncs_table_keyed_by_run_and_device(path, tmp_path):
    db = tmp_path / "runs.db"
    assert run("db", "add", db, path).exit_code == 0
    con = sqlite3.connect(db)
    rows = con.execute("SELECT device, row, call, file, line, calls, blocked_ns, "
                       "gpu_idle_after_ns FROM syncs ORDER BY row").fetchall()
    run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]
    assert con.execute("SELECT DISTINCT run_id FROM syncs").fetchall() == [(run_id,)]
    assert rows == [(0, 0, "cudaStreamSynchronize", "/src/gen.py", 41, 2, 50, 30),
                    (0, 1, "cudaDeviceSynchronize", "unknown", None, 1, 18, 15),
                    (0, 2, "cudaMemcpy", "/src/gen.py", 57, 1, 15, 15)]
    # Added again: replaced, not doubled.
    assert run("db", "add", db, path).exit_code == 0
    assert con.execute("SELECT count(*) FROM syncs").fetchone() == (3,)


def test_blocked_time_is_exact_on_a_real_capture(data_dir):
    from analysis.api import load_and_analyse

    _, trace, (a,) = load_and_analyse(data_dir / "h200-eager-static-bs16.sqlite.xz")
    (row,) = a.syncs.itertuples(index=False)
    assert (row.call, row.file, row.calls, row.calls_per_step) == (
        "cudaStreamSynchronize", "unknown", 20, 1.0)
    assert row.gpu_idle_after_ns == a.summary["idle_ns_by_cause"]["sync"] == 3578243
    assert row.gpu_idle_in_call_ns == a.summary["idle_ledger"]["blocked"]
    assert (row.blocked_ns, row.blocked_ns_median) == (220839, 10234.5)


# A real capture (tests/data/README.md, "user/"): transformers' generate() with a static cache,
# called twice, its forwards function-traced, with the prototype hook's marks
# `gapscope.sync A | warn-at FILE:LINE`: FILE:LINE is the issuing frame, A a wrong one.
HOOK = "user/gen-static-hook.sqlite.xz"
FORWARD = r"GPT2LMHeadModel\.forward$"
STOP_CHECK = "/opt/torch/.venv/lib/python3.12/site-packages/transformers/generation/utils.py"
# Independently of the join: the stream syncs whose next mark on their thread names the stop
# check, counted and summed in SQL on the capture as recorded.
NEXT_MARK_SQL = """
SELECT count(*), sum(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
JOIN StringIds AS n ON n.id = r.nameId
WHERE n.value LIKE 'cudaStreamSynchronize%' AND (
  SELECT s.value FROM NVTX_EVENTS AS e JOIN StringIds AS s ON s.id = e.textId
  WHERE e.eventType = 34 AND e.globalTid = r.globalTid AND e.start >= r.end
  ORDER BY e.start LIMIT 1) LIKE '%| warn-at %/transformers/generation/utils.py:383'
"""


def final_format(src, dst) -> None:
    """A copy of the capture whose marks say `gapscope.sync FILE:LINE f` (the final format;
    the prototype's warn-at part names no function, so `f`)."""
    con = sqlite3.connect(plain_copy(src, dst))
    rows = con.execute("SELECT e.rowid, s.value FROM NVTX_EVENTS AS e JOIN StringIds AS s "
                       "ON s.id = e.textId WHERE e.eventType = 34").fetchall()
    con.executemany("UPDATE NVTX_EVENTS SET textId = NULL, text = ? WHERE rowid = ?",
                    [(f"gapscope.sync {v.split(' | warn-at ')[1]} f", r) for r, v in rows])
    con.commit()
    con.close()


def test_a_real_capture_marks_each_stream_sync_just_after_it(data_dir):
    trace = load_trace(data_dir / HOOK)
    marks, calls = trace.marks, outermost(trace.blocking)
    assert len(marks) == 389 and marks["name"].str.startswith("gapscope.sync ").all()
    at = marks.assign(name="gapscope.sync " + marks["name"].str.split(" [|] warn-at ").str[1]
                      + " f")
    steps = pd.DataFrame({"start": [0], "end": [2**62], "tid": calls["tid"].iloc[:1]})
    joined = join_marks(calls, parse_marks(at), steps)
    # Every mark names a stream sync that returned before it; no device sync has one.
    assert (joined >= 0).sum() == 389
    assert set(calls.loc[joined >= 0, "name"]) == {"cudaStreamSynchronize"}
    assert (calls["name"] == "cudaStreamSynchronize").sum() == 389
    assert (at["start"].to_numpy()[joined[joined >= 0]]
            >= calls.loc[joined >= 0, "end"].to_numpy()).all()


def test_a_real_generate_names_its_stop_check(data_dir, tmp_path):
    path = tmp_path / "hook.sqlite"
    final_format(data_dir / HOOK, path)
    (a,) = analyze(load_trace(path), Options(step_pattern=FORWARD))
    top = a.syncs.iloc[0]
    assert (top["call"], top["file"], top["line"]) == ("cudaStreamSynchronize", STOP_CHECK, 383)
    # 100 tokens in each of the two generate() calls, one check a token: 200 forwards.
    export = compressed.plain(data_dir / HOOK)
    con = sqlite3.connect(f"{export.resolve().as_uri()}?mode=ro", uri=True)
    assert (top["calls"], top["blocked_ns"]) == con.execute(NEXT_MARK_SQL).fetchone() \
        == (200, 42237862)
    assert top["calls_per_step"] == 1.0
    # torch.cuda.synchronize() is not flagged by torch: its calls have no line.
    unknown = a.syncs[a.syncs["file"] == "unknown"]
    assert list(unknown["call"]) == ["cudaDeviceSynchronize"] and list(unknown["calls"]) == [14]
    assert a.syncs["gpu_idle_after_ns"].sum() == a.summary["idle_ns_by_cause"]["sync"]
    assert a.syncs["gpu_idle_in_call_ns"].sum() == a.summary["idle_ledger"]["blocked"]
    text = to_text("gen", [a], "3.20.3").splitlines()
    assert "    transformers/generation/utils.py:383 in f" in text and max(map(len, text)) <= 100
