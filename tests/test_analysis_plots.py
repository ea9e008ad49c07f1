"""What the figures draw is binned: a bar a run of steps, a histogram by counts, never a patch
a step or a gap."""

import numpy as np
import pandas as pd

from analysis.measures.summary import CAUSES
from analysis.render.plots import MAX_BARS, binned_parts, gap_histogram, step_bins


def test_steps_fall_in_runs_of_nearly_equal_size():
    assert step_bins(5, most=2).tolist() == [0, 0, 0, 1, 1]
    assert step_bins(4).tolist() == [0, 1, 2, 3]  # fewer steps than bars: one bar each
    sizes = np.bincount(step_bins(3000))
    assert len(sizes) == MAX_BARS and set(sizes) == {25}


def test_a_bar_is_the_mean_of_its_steps_and_its_parts_fill_the_period():
    steps = pd.DataFrame({"period_ns": pd.array([10, 20, 30], dtype="Int64"),
                          "idle_cause_sync_ns": [1, 2, 3], "idle_cause_host_ns": [2, 4, 6],
                          "idle_cause_queued_ns": [0, 0, 3], "idle_cause_unknown_ns": [0, 0, 0]})
    bins, parts = binned_parts(steps)
    assert bins.tolist() == [0, 1, 2]
    assert parts["busy"].tolist() == [7.0, 14.0, 18.0]
    assert parts["sync"].tolist() == [1.0, 2.0, 3.0]
    bins, parts = binned_parts(pd.concat([steps] * 100, ignore_index=True))
    assert len(parts["busy"]) == MAX_BARS and parts["busy"].max() <= 18.0


def test_the_gap_histogram_counts_each_gap_once_and_weighs_it_by_its_time():
    cause = pd.Categorical(["host", "host", "sync", "queued", "host"], categories=CAUSES)
    gaps = pd.DataFrame({"gap_ns": [1_000, 10_000, 100_000, 1_000, 1_000_000], "cause": cause})
    edges, counts, times = gap_histogram(gaps)
    assert set(counts) == set(times) == {"host", "sync", "queued"}
    assert edges[0] == 1.0 and edges[-1] > 1000.0 and np.isclose(edges[-1], 1000.0)
    assert {c: int(n.sum()) for c, n in counts.items()} == {"host": 3, "sync": 1, "queued": 1}
    assert counts["host"][0] == 1 and counts["host"][-1] == 1  # the shortest and the longest
    # Weighed by time: the one long host gap holds 1000 times the time of the shortest.
    assert {c: int(t.sum()) for c, t in times.items()} == {"host": 1_011_000, "sync": 100_000,
                                                         "queued": 1_000}
    assert (times["host"][0], times["host"][-1]) == (1_000, 1_000_000)


def _causes(tmp_path):
    from synth import causes_trace

    from analysis.api import load_and_analyse

    (_, _, (a,)) = load_and_analyse(causes_trace().write(tmp_path / "t.sqlite"))
    return a


def test_the_overview_bins_each_columns_time_into_busy_and_idle_by_cause(tmp_path):
    from analysis.render.plots_timeline import binned_timeline, timeline_steps

    a = _causes(tmp_path)
    chosen, lo, hi = timeline_steps(a.steps)
    assert (len(chosen), lo, hi) == (2, 0, 200)  # both steps; Step 2's range ends at 200
    edges, parts = binned_timeline(a.ops, a.gaps, lo, hi, columns=4)
    assert edges.tolist() == [0, 50, 100, 150, 200]
    # ops k1 [20,30] k2 [50,60] k3 [95,105] k4 [110,120] k5 [125,128] k6 [140,150]; gaps host
    # [30,50) and [128,140), sync [60,95), queued [105,110), unknown [120,125).
    assert {k: v.tolist() for k, v in parts.items()} == {
        "busy": [10, 15, 28, 0], "sync": [0, 35, 0, 0], "host": [20, 0, 12, 0],
        "queued": [0, 0, 5, 0], "unknown": [0, 0, 5, 0]}
    # A column is never narrower than a ns.
    assert len(binned_timeline(a.ops, a.gaps, lo, hi)[0]) == 201


def test_the_zoom_frames_the_bubble_between_the_middle_steps(tmp_path):
    from analysis.render.plots_timeline import zoom_window

    a = _causes(tmp_path)
    # The bubble is [60, 95); a period's median is 65, so the zoom reaches 9 ns either side:
    # from k2's start (50) cut to 51, to k3's end (105) cut to 104.
    lo, hi, before, after = zoom_window(a, ops_each_side=1)
    assert (lo, hi, before["name"], after["name"]) == (51, 104, "Step 1", "Step 2")


def test_each_quantity_has_one_colour_and_one_word():
    from analysis.render import palette

    colours = [palette.BUSY_COLOUR, *palette.CAUSE_COLOURS.values(), palette.TRACED_COLOUR,
               palette.TRACED_GRAPH_COLOUR, palette.UNTRACED_COLOUR, palette.NVTX_COLOUR,
               *palette.METRIC_COLOURS.values(), palette.FLOOR_COLOUR]
    assert len(set(colours)) == len(colours)
    words = [*palette.CAUSE_COLOURS, *palette.LEDGER_WORDS.values(), palette.BUSY]
    assert len(set(words)) == len(words) and "host" not in palette.LEDGER_WORDS.values()


def test_a_figure_draws_the_twin_beside_the_traced_steps(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from analysis.render import plots

    a = _causes(tmp_path)
    seen = {}

    def keep(fig, *args, **kwargs):
        seen.update({ax.get_title(): [t.get_text() for t in ax.get_legend().get_texts()]
                     for ax in fig.axes if ax.get_legend()})

    monkeypatch.setattr(plt.Figure, "savefig", keep)
    plots.plot_analysis(a, "t", tmp_path / "t.png", untraced_ms_per_step=0.00005)
    assert seen["per step: the GPU period, traced and untraced"] == [
        "traced", "untraced ms/step (run.json: the bench's whole runs)"]
    causes = ["idle, cause: sync", "idle, cause: host", "idle, cause: queued",
              "idle, cause: unknown"]
    # One colour set: the per-step bars split the idle time by cause, as the timeline does.
    assert seen["per step: the GPU period, busy and idle by cause"] == ["busy", *causes]
    # Gaps host [30,50) and [128,140), sync [60,95), queued [105,110), unknown [120,125): 77 ns.
    assert seen["where the idle time is: gaps by length, by the time they hold; % of the idle"] \
        == ["sync: 1 gap, 45.5%", "host: 2 gaps, 41.6%", "queued: 1 gap, 6.5%",
            "unknown: 1 gap, 6.5%"]
    overview = next(t for t in seen if t.startswith("Step 1 to Step 2, binned"))
    assert seen[overview] == ["busy", *causes]


def test_the_timeline_draws_typical_steps_not_a_pause_between_two_calls():
    from analysis.render.plots_timeline import typical_first

    # Ten steps of 100 ns, bubble 10; step 5 (row 4) follows a 20x pause (generate() again).
    period = [100] * 10
    bubble = [None] + [10] * 9
    period[4], bubble[4] = 2000, 1910
    steps = pd.DataFrame({"period_ns": pd.array(period, dtype="Int64"),
                          "bubble_ns": pd.array(bubble, dtype="Int64")})
    # Rows 1-3, 5-7 and 6-8 hold no pause; 5-7 is nearest the middle (row 4) of those.
    assert typical_first(steps) == 5
    assert typical_first(steps.iloc[:3]) == 0  # no more steps than the timeline draws
