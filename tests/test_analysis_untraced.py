"""The untraced twin: untraced_steps.json read into per-step tables (medians worked out by hand),
set beside the traced capture by analyze, report and compare."""

import json
from pathlib import Path

import golden
import pytest
from click.testing import CliRunner
from conftest import PIPELINED_SEED as PIPELINED
from conftest import STATIC, plain_copy
from synth import causes_trace

from analysis.cli import main
from analysis.errors import TraceError
from analysis.measures.untraced import per_step, untraced_summary
from analysis.readers.untraced import FORMAT, read_untraced_steps

DATA = Path(__file__).parent / "data"


def write_twin(path: Path, runs: list, window=None, **extra) -> Path:
    path.write_text(json.dumps({"format": FORMAT, "source": "cuda-events", "variant": "v",
                                "window": window, "ms_per_step_median": 1.5, "runs": runs,
                                **extra}))
    return path


# Run 0: four steps, step 4 starting before step 3 ends; run 1 lacks step 3.
TWO_RUNS = [
    {"step": [1, 2, 3, 4], "start_ns": [0, 120, 250, 330], "end_ns": [100, 230, 340, 450]},
    {"step": [1, 2, 4], "start_ns": [0, 105, 300], "end_ns": [100, 200, 380]},
]


def test_each_run_gives_span_period_bubble_and_overlap(tmp_path):
    u = read_untraced_steps(write_twin(tmp_path / "u.json", TWO_RUNS))
    t = u.steps
    assert list(t["run"]) == [0, 0, 0, 0, 1, 1, 1]
    assert list(t["span_ns"]) == [100, 110, 90, 120, 100, 95, 80]
    assert t["period_ns"].isna().tolist() == [True, False, False, False, True, False, True]
    assert t["period_ns"].dropna().tolist() == [130, 110, 110, 100]
    # Bubble and overlap against the latest end of all earlier steps: step 4 of run 1 after 2.
    assert t["bubble_ns"][1:4].tolist() == [20, 20, 0] and t["bubble_ns"][5:].tolist() == [5, 100]
    assert t["overlap_ns"][1:4].tolist() == [0, 0, 10] and t["overlap_ns"][5:].tolist() == [0, 0]
    assert (u.window, u.ms_per_step_median, u.variant) == (None, 1.5, "v")


def test_the_summary_keeps_the_window_steps_and_pools_the_runs(tmp_path):
    u = read_untraced_steps(write_twin(tmp_path / "u.json", TWO_RUNS, window=[1, 4]))
    s = untraced_summary(u)
    # Steps 2..4: run 0's 2, 3, 4 and run 1's 2, 4. Periods 130 110 110 100 (run 1's step 4
    # has no step 3); bubbles 20 20 0 5 100; spans 110 90 120 95 80.
    assert (s["steps"], s["runs"], s["window"]) == (5, 2, [1, 4])
    assert s["period_ns_median"] == 110
    assert s["bubble_ns_median"] == 20 and s["bubble_ns_p90"] == 68  # 20 + 0.6 * 80
    assert s["span_ns_median"] == 95 and s["overlap_ns_median"] == 0
    steps = per_step(u)
    assert list(steps["step"]) == [2, 3, 4]
    assert list(steps["untraced_period_ns"]) == [115, 110, 110]
    assert list(steps["untraced_bubble_ns"]) == [12.5, 20, 50]
    assert list(steps["untraced_span_ns"]) == [102.5, 90, 100]


@pytest.mark.parametrize("content, message", [
    ("not json", "not readable JSON"),
    ({"format": "other/1", "runs": []}, "format is 'other/1'"),
    ({"format": FORMAT, "runs": []}, "no runs"),
    ({"format": FORMAT, "runs": [{"step": [1], "start_ns": [0.5], "end_ns": [1]}]},
     "runs[0].start_ns is not a list of integers"),
    ({"format": FORMAT, "runs": [{"step": [1, 2], "start_ns": [0], "end_ns": [1]}]},
     "differ in length"),
    ({"format": FORMAT, "runs": [{"step": [1, 1], "start_ns": [0, 2], "end_ns": [1, 3]}]},
     "a step appears twice"),
    ({"format": FORMAT, "runs": [{"step": [1], "start_ns": [5], "end_ns": [1]}]},
     "ends before it starts"),
    ({"format": FORMAT, "window": [5, 5], "runs": [{"step": [1], "start_ns": [0],
                                                    "end_ns": [1]}]}, "window [5, 5]"),
])
def test_a_bad_file_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "u.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(TraceError) as e:
        read_untraced_steps(path)
    assert message in str(e.value) and str(e.value).startswith(f"{path}: ")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def causes_run(tmp_path) -> Path:
    """causes_trace (steps 1 and 2: periods 40 and 90, bubble 35) with a twin of one run:
    steps 1 (0-30) and 2 (50-110): period 80, bubble 20, spans 30 and 60."""
    d = tmp_path / "run"
    d.mkdir()
    causes_trace().write(d / "capture.sqlite")
    write_twin(d / "untraced_steps.json",
               [{"step": [1, 2], "start_ns": [0, 50], "end_ns": [30, 110]}], window=[0, 2])
    return d


def test_analyze_shows_traced_and_untraced_side_by_side(tmp_path):
    d = causes_run(tmp_path)
    out = json.loads(run("analyze", d, "--format", "json").output)
    u = out["summary"]["untraced"]
    assert (u["steps"], u["period_ns_median"], u["bubble_ns_median"], u["span_ns_median"]) == \
        (2, 80, 20, 45)
    assert u["profiler_bubble_share"] == (35 - 20) / 35
    assert u["profiler_period_share"] == (65 - 80) / 65  # traced periods 40 and 90
    assert out["steps"]["untraced_period_ns"] == [None, 80]  # columnar
    assert out["steps"]["untraced_bubble_ns"] == [None, 20]
    text = run("analyze", d).output
    assert "  untraced       0.00 ms period, 0.0 µs bubble median; the profiler's share of the " \
        "bubble: 42.9%" in text
    md = run("analyze", d, "--format", "md").output
    assert golden.row(md, "profiler's share of the bubble") == [42.9]
    assert "| step | period | untraced period | bubble | untraced bubble |" in md
    # Step 1 has no untraced period or bubble (no step 0 in the twin); step 2's traced period
    # is 90 ns, its twin's 80, the bubbles 35 and 20 (µs, one decimal).
    assert [0.0, None, None, None] in golden.rows(md, "1")
    assert [0.1, 0.1, 0.0, 0.0] in golden.rows(md, "2")
    assert [2, 0.1, 0.0, 0.0, None, None, 0.0, 0.0, 0.0] in golden.rows(md, "1")


def test_a_bad_twin_stops_analyze_with_one_line(tmp_path):
    d = causes_run(tmp_path)
    (d / "untraced_steps.json").write_text("{}")
    result = run("analyze", d)
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"gapscope: error: {d / 'untraced_steps.json'}: format is None, not '{FORMAT}'; it is "
        "written by the harness (untraced twin), so write it again or remove it")


def steady(period_ns: int, bubble_ns: int) -> dict:
    """Steps 30..50 each `period_ns` apart with a bubble of `bubble_ns` before each."""
    steps = list(range(30, 51))
    starts = [bubble_ns + i * period_ns for i in range(len(steps))]
    return {"step": steps, "start_ns": starts,
            "end_ns": [s + period_ns - bubble_ns for s in starts]}


def test_compare_ranks_by_untraced_and_flags_an_order_the_profiler_flipped(tmp_path):
    # Traced, pipelined-seed (7.832 ms) beats static (8.577 ms); untraced static runs 5 ms a
    # step against 6 ms.
    dirs = []
    for name, src, period in (("static", STATIC, 5_000_000), ("pipelined", PIPELINED, 6_000_000)):
        d = tmp_path / name
        d.mkdir()
        plain_copy(src, d / "capture.sqlite")
        (d / "run.json").write_text(json.dumps({"config": {"variant": name}}))
        write_twin(d / "untraced_steps.json", [steady(period, 10_000)], window=[30, 50])
        dirs.append(d)
    result = run("compare", *dirs)
    assert result.exit_code == 0, result.output
    rows = {line[:29].strip(): line[29:].split() for line in result.output.splitlines()}
    assert rows["untraced period ms (events)"] == ["5.000", "6.000"]
    assert rows["untraced bubble µs (events)"] == ["10.0", "10.0"]
    assert rows["rank traced / untraced"] == ["2", "/", "1", "1", "/", "2"]
    # (189086 - 10000) / 189086 and (282878 - 10000) / 282878
    assert rows["profiler's share of bubble"] == ["94.7%", "96.5%"]
    assert ("order flip: pipelined < static traced (7.832 vs 8.577 ms), untraced 6.000 vs "
            "5.000 (events)") in result.output.splitlines()
    data = json.loads(run("compare", *dirs, "--format", "json").output)
    assert [(r["traced_rank"], r["untraced_rank"]) for r in data] == [(2, 1), (1, 2)]
    assert "**order flip: pipelined < static" in run("compare", *dirs, "--format", "md").output
    assert run("report", *dirs, "-o", tmp_path / "out").exit_code == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["static"]["0"]["untraced"]["period_ns_median"] == 5_000_000
    report = (tmp_path / "out" / "report.md").read_text()
    # One key-value table a run: static's twin 5 ms, pipelined's 6 ms.
    assert golden.rows(report, "untraced GPU period (median)") == [[5.0], [6.0]]
    assert "what hiding the sync buys: the untraced bubble" in report


def test_compare_without_twins_everywhere_ranks_by_the_bench_or_not_at_all(tmp_path):
    dirs = []
    for name, src, bench in (("a", STATIC, 5.0), ("b", PIPELINED, 4.0)):
        d = tmp_path / name
        d.mkdir()
        plain_copy(src, d / "capture.sqlite")
        (d / "run.json").write_text(json.dumps({"config": {"variant": name},
                                                "untraced": {"ms_per_step_median": bench}}))
        dirs.append(d)
    result = run("compare", *dirs)
    rows = {line[:29].strip(): line[29:].split() for line in result.output.splitlines()}
    assert rows["rank traced / untraced"] == ["2", "/", "2", "1", "/", "1"]
    assert "order flip" not in result.output
    result = run("compare", dirs[0], STATIC)
    assert "rank traced" not in result.output
