"""compare's `order flip:` line (METRICS.md, "order flip"): printed only where the traced order
and the untraced one are each outside their noise, else a `within noise:` line."""

import json

import pandas as pd
from click.testing import CliRunner
from conftest import plain_copy
from test_analysis_untraced import PIPELINED, STATIC, steady, write_twin

from analysis.cli import main
from analysis.render.compare import order_flips


def table(rows: list) -> pd.DataFrame:
    """compare()'s columns that order_flips reads, from (label, traced ms, traced CI ms,
    untraced ms (events), untraced spread ms) rows."""
    return pd.DataFrame([{
        "label": label, "period_ns_median": traced * 1e6,
        "period_ns_median_ci": (ci[0] * 1e6, ci[1] * 1e6),
        "untraced_period_ns_median": untraced * 1e6, "untraced_ms_per_step": None,
        "untraced_period_spread_ms": spread, "untraced_bench_spread_ms": None,
    } for label, traced, ci, untraced, spread in rows])


def test_a_flip_outside_both_noises_is_an_order_flip():
    # Traced a 8.0 [7.9, 8.1] < b 9.0 [8.9, 9.1]; untraced a 6.0 (runs 5.9-6.1) > b 5.0
    # (4.9-5.1): both pairs of intervals are apart.
    t = table([("a", 8.0, (7.9, 8.1), 6.0, (5.9, 6.1)), ("b", 9.0, (8.9, 9.1), 5.0, (4.9, 5.1))])
    assert order_flips(t) == [
        "order flip: a < b traced (8.000 vs 9.000 ms), untraced 6.000 vs 5.000 (events)"]


def test_untraced_spreads_that_overlap_are_within_noise():
    # As above, but b's untraced runs reach 6.2 ms, over a's lowest (5.9).
    t = table([("a", 8.0, (7.9, 8.1), 6.0, (5.9, 6.1)), ("b", 9.0, (8.9, 9.1), 5.0, (4.9, 6.2))])
    assert order_flips(t) == [
        "flip within noise: a < b traced (8.000 vs 9.000 ms), untraced 6.000 vs 5.000\n"
        "  (events) untraced spreads overlap (5.900–6.100 and 4.900–6.200 ms)"]


def test_traced_cis_that_overlap_are_within_noise():
    t = table([("a", 8.0, (7.5, 8.6), 6.0, (5.9, 6.1)), ("b", 8.5, (8.1, 9.0), 5.0, (4.9, 5.1))])
    assert order_flips(t) == [
        "flip within noise: a < b traced (8.000 vs 8.500 ms), untraced 6.000 vs 5.000\n"
        "  (events) traced 95% CIs overlap"]


def test_same_order_traced_and_untraced_prints_nothing():
    t = table([("a", 8.0, (7.9, 8.1), 5.0, (4.9, 5.1)), ("b", 9.0, (8.9, 9.1), 6.0, (5.9, 6.1))])
    assert order_flips(t) == []


def test_the_bench_figure_is_judged_by_its_processes(tmp_path):
    # No twins: ranked by run.json's bench; static's two processes (4.0, 5.5 ms) and
    # pipelined-seed's (4.5, 6.0) overlap, so the flip (static traced 8.577 ms, slower than
    # 7.832; untraced 4.75 < 5.25, the other way) is within noise.
    dirs = []
    for name, src, procs in (("static", STATIC, [4.0, 5.5]), ("seed", PIPELINED, [4.5, 6.0])):
        d = tmp_path / name
        d.mkdir()
        plain_copy(src, d / "capture.sqlite")
        (d / "run.json").write_text(json.dumps({"config": {"variant": name}, "untraced": {
            "ms_per_step_median": sum(procs) / 2, "processes_ms_per_step": procs}}))
        dirs.append(d)
    out = CliRunner().invoke(main, ["compare", *map(str, dirs)]).output
    lines = out.splitlines()
    at = lines.index("flip within noise: seed < static traced (7.832 vs 8.577 ms), untraced 5.250 "
                     "vs 4.750")
    assert lines[at + 1] == "  (bench) untraced spreads overlap (4.500–6.000 and 4.000–5.500 ms)"
    assert "order flip" not in out
    md = CliRunner().invoke(main, ["compare", *map(str, dirs), "--format", "md"]).output
    assert "\nflip within noise: seed < static" in md and "**flip within noise" not in md


def test_twins_whose_runs_overlap_are_within_noise(tmp_path):
    # The same two captures with twins of two runs each: static 5.0 and 6.5 ms a step,
    # pipelined-seed 6.0 and 6.2: medians 5.75 < 6.1, but the runs overlap.
    dirs = []
    for name, src, periods in (("static", STATIC, (5_000_000, 6_500_000)),
                               ("pipelined", PIPELINED, (6_000_000, 6_200_000))):
        d = tmp_path / name
        d.mkdir()
        plain_copy(src, d / "capture.sqlite")
        (d / "run.json").write_text(json.dumps({"config": {"variant": name}}))
        write_twin(d / "untraced_steps.json", [steady(p, 10_000) for p in periods],
                   window=[30, 50])
        dirs.append(d)
    out = CliRunner().invoke(main, ["compare", *map(str, dirs)]).output
    lines = out.splitlines()
    at = lines.index("flip within noise: pipelined < static traced (7.832 vs 8.577 ms), untraced "
                     "6.100 vs 5.750")
    assert lines[at + 1] == "  (events) untraced spreads overlap (6.000–6.200 and 5.000–6.500 ms)"
