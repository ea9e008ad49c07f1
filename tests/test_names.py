"""One name for one quantity (docs/METRICS.md, "Glossary"; CHANGELOG.md): the library's tables
share one convention for times, threads and names; renamed columns stay readable for a release
with a warning; a stored Analysis is as whole as a fresh one but for its ops; step numbers follow
one rule; Comparison.host holds numbers."""

import json
import re
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import analysis

ROOT = Path(__file__).parent.parent
RUNS = ROOT / "tests" / "data" / "runs"
METRICS = (ROOT / "docs" / "METRICS.md").read_text()


@pytest.fixture(scope="module")
def a():
    return analysis.load(RUNS / "graphed-sync-graphlevel")


def test_every_column_of_every_table_is_defined_in_metrics_md(a):
    for name in ("steps", "gaps", "streams", "syncs", "pairs", "checks", "ops", "host",
                 "host_steps"):
        for column in getattr(a, name).columns:
            assert f"`{column}`" in METRICS or column.startswith("untraced_"), (name, column)


def test_times_end_in_start_ns_or_end_ns_and_every_ns_column_is_an_integer_count(a):
    for name in ("steps", "gaps", "ops", "checks", "host_steps"):
        frame = getattr(a, name)
        times = [c for c in frame.columns if c.endswith(("start_ns", "end_ns"))]
        assert times, name
        assert not [c for c in frame.columns if c in ("start", "end", "cpu_start", "gpu_end",
                                                      "call_start", "host_start")], name
    # A gap's start and end are times on the same clock as the steps' GPU span.
    assert a.gaps["start_ns"].min() >= a.steps["gpu_start_ns"].min()
    assert a.gaps["end_ns"].max() <= a.steps["gpu_end_ns"].max()


def test_threads_are_labels_everywhere_with_the_raw_id_beside(a):
    labels = set(a.steps["thread"])
    assert labels == {"python3"}
    for name in ("gaps", "ops", "syncs", "host_steps"):
        frame = getattr(a, name)
        assert "tid" in frame.columns and "thread" in frame.columns, name
    step_ops = a.ops[a.ops["step"] >= 0]
    assert set(step_ops["thread"]) == labels and step_ops["tid"].dtype.kind == "i"
    assert set(a.gaps["thread"]) <= labels | {"unknown"}


def test_ops_carry_their_names_and_kinds_as_words(a):
    assert set(a.ops["kind"].astype(str)) == {"graph", "memcpy"}
    graphs = a.ops[a.ops["kind"] == "graph"]
    assert set(graphs["name"]) == {"[graph]"} and (graphs["name_id"] >= 0).all()
    assert a.named_ops() is a.ops


def test_the_ledger_and_the_causes_are_named_apart_and_each_adds_up_to_the_idle(a):
    s = a.summary
    assert set(s["idle_ledger"]) == {"blocked", "pre_launch", "in_launch"}
    assert set(s["idle_ns_by_cause"]) == {"sync", "host", "queued", "unknown"}
    assert sum(s["idle_ledger"].values()) == sum(s["idle_ns_by_cause"].values()) == s["idle_ns"]
    ledger = ["idle_blocked_ns", "idle_pre_launch_ns", "idle_in_launch_ns"]
    causes = [f"idle_cause_{c}_ns" for c in ("sync", "host", "queued", "unknown")]
    assert a.steps[ledger].to_numpy().sum() == a.steps[causes].to_numpy().sum() == s["idle_ns"]
    assert not {"idle_host_ns", "host_ns", "wait_ns"} & (set(a.steps.columns)
                                                         | set(a.gaps.columns))


def test_a_share_names_its_denominator_in_the_summary_and_the_text(a):
    s = a.summary
    assert s["busy_share_of_window"] == pytest.approx(s["busy_ns"] / s["window_ns"])
    assert s["sync_idle_share_of_window"] == pytest.approx(
        s["idle_ns_by_cause"]["sync"] / s["window_ns"])
    text = a.to_text()
    sync = s["idle_ns_by_cause"]["sync"]
    assert f"sync {sync / s['idle_ns']:.1%}" in text and "(of the idle)" in text
    assert f"{s['sync_idle_share_of_window']:.1%} of the window" in text


def test_an_old_name_reads_for_one_release_with_a_warning_that_names_the_new(a):
    with pytest.warns(FutureWarning, match="'gpu_start' is now 'gpu_start_ns'"):
        assert a.steps["gpu_start"].equals(a.steps["gpu_start_ns"])
    with pytest.warns(FutureWarning, match="'wait_ns' is now 'idle_blocked_ns'"):
        assert a.gaps["wait_ns"].equals(a.gaps["idle_blocked_ns"])
    with pytest.warns(FutureWarning, match="'start' is now 'start_ns'"):
        assert a.ops.start.equals(a.ops["start_ns"])
    with pytest.warns(FutureWarning, match="'host_start' is now 'host_start_ns'"):
        a.host_steps[["step", "host_start"]]
    with pytest.warns(FutureWarning, match="'gpu_util' is now 'busy_share_of_window'"):
        assert a.summary["gpu_util"] == a.summary["busy_share_of_window"]
    with pytest.warns(FutureWarning, match="'wait_ns' is now 'blocked'"):
        assert a.summary["idle_ledger"]["wait_ns"] == a.summary["idle_ledger"]["blocked"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a.steps[["step", "gpu_start_ns"]]  # the new names: no warning
    with pytest.raises(KeyError):
        a.summary["no_such_key"]


def test_a_database_written_before_the_rename_reads_back_under_the_new_names(tmp_path, a):
    db = tmp_path / "old.db"
    with analysis.Database(db) as d:
        d.add([a])
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE steps RENAME COLUMN gpu_start_ns TO gpu_start")
    conn.execute("ALTER TABLE gaps RENAME COLUMN idle_blocked_ns TO wait_ns")
    old = json.loads(conn.execute("SELECT summary_json FROM runs").fetchone()[0])
    old["gpu_util"] = old.pop("busy_share_of_window")
    old["idle_ledger"] = {"wait_ns": 1, "host_ns": 2, "launch_ns": 3}
    conn.execute("UPDATE runs SET summary_json = ?", (json.dumps(old),))
    conn.commit()
    conn.close()
    with analysis.Database(db, read_only=True) as d:
        (stored,) = d.analyses()
    assert "gpu_start_ns" in stored.steps.columns and "idle_blocked_ns" in stored.gaps.columns
    assert stored.summary["busy_share_of_window"] == a.summary["busy_share_of_window"]
    assert stored.summary["idle_ledger"] == {"blocked": 1, "pre_launch": 2, "in_launch": 3}


def test_a_stored_analysis_is_as_whole_as_a_fresh_one_but_for_its_ops(tmp_path, a):
    with analysis.Database(tmp_path / "r.db") as d:
        d.add([a])
    with analysis.Database(tmp_path / "r.db", read_only=True) as d:
        (stored,) = d.analyses()
    for name in ("gaps", "streams", "syncs", "host", "host_steps", "pairs", "checks"):
        fresh, back = getattr(a, name), getattr(stored, name)
        assert back is not None, name
        assert list(back.columns) == list(fresh.columns), name
        pd.testing.assert_frame_equal(back.reset_index(drop=True), fresh.reset_index(drop=True),
                                      check_dtype=False, check_categorical=False), name
    assert stored.ops is None and stored.kind == "stored"
    assert repr(stored.step(31)).startswith("Step 31 (thread python3): GPU period")
    assert len(stored.step(31).gaps) == len(a.step(31).gaps)


@pytest.mark.parametrize("pattern, numbers, how", [
    (r"^Step (\d+)$", [31, 40], "numbered 31–40 by their names"),
    ("^Step", [1, 10], "numbered 1–10 in order within their thread"),
    (r"^(Step) \d+$", [1, 10], "numbered 1–10 in order within their thread"),
])
def test_step_numbers_follow_one_rule_said_in_the_steps_from_line(pattern, numbers, how):
    a = analysis.load(RUNS / "graphed-sync-graphlevel", steps=pattern)
    assert [a.steps["step"].min(), a.steps["step"].max()] == numbers
    assert a.summary["step_numbers"] == ("name" if "by their names" in how else "order")
    line = next(x for x in a.to_text().splitlines() if x.startswith("  steps from"))
    assert line.endswith(how)


def test_a_step_by_its_number_or_its_text_and_a_missing_one_says_which_there_are(a):
    assert a.step("35").row["step"] == a.step(35).row["step"] == 35
    assert a.step(np.int64(35)).row["step"] == 35
    with pytest.raises(analysis.TraceError, match=r"^step 99: the steps are 31 to 40 \(10 of"):
        a.step(99)
    with pytest.raises(analysis.TraceError, match=r"^step 'last': a step is named by its num"):
        a.step("last")


def test_comparison_host_holds_numbers():
    c = analysis.compare([RUNS / "graphed-sync-graphlevel", RUNS / "fused"])
    host = c.host
    assert list(host.columns[:2]) == ["line", "unit"]
    assert all(str(host[label].dtype) == "Float64" for label in c.labels)
    period = host.set_index("line").loc["host period (mean)"]
    first = c.analyses[0].summary["host"]["period_ns_mean"]
    assert period["unit"] == "ns" and period[c.labels[0]] == pytest.approx(first)
    assert re.search(r"forward as one graph +\d+\.\d\d-\d+\.\d\d", c.to_text())
