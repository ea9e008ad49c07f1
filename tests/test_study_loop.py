"""Study part `loop` (study/loop.py) on bench files written by hand: medians over
processes, the twin's period and bubble, the sync's cost with the loop on the GPU."""

import json

from study.loop import bubble_table, by_variant, runs, twin_medians


def bench(path, batch: int, process: int, ms: dict) -> None:
    results = [{"variant": v, "ms_per_step_median": m, "ms_per_step_p10": m - 0.01,
                "ms_per_step_p90": m + 0.01, "tokens_per_s": batch * 1e3 / m, "steps": 100,
                "tokens_sha256": "same"} for v, m in ms.items()]
    (path / f"bench-b{batch}-p{process}.json").write_text(json.dumps({"results": results}))


def test_the_twins_period_runs_end_to_end_and_its_bubble_end_to_start():
    doc = {"runs": [{"start_ns": [0, 1000, 2100], "end_ns": [900, 1950, 3000]},
                    {"start_ns": [0, 1010], "end_ns": [950, 1900]}]}
    # periods 1050, 1050, 950; bubbles 100, 150, 60
    assert twin_medians(doc) == (1050.0, 100.0)


def test_each_rung_is_the_median_of_its_processes_and_the_loop_is_set_against_the_sync(tmp_path):
    bench(tmp_path, 8, 1, {"graphed-sync": 1.22, "graphed": 1.20, "while-graph": 1.13})
    bench(tmp_path, 8, 2, {"graphed-sync": 1.20, "graphed": 1.19, "while-graph": 1.12})
    (tmp_path / "steps-b8-p1-while-graph.json").write_text(json.dumps(
        {"runs": [{"start_ns": [0, 1130], "end_ns": [1123, 2253]}]}))
    v = by_variant(runs(tmp_path)).set_index("variant")
    assert v.loc["graphed-sync", "ms"] == 1.21 and v.loc["while-graph", "processes"] == 2
    assert (v.loc["while-graph", "lo"], v.loc["while-graph", "hi"]) == (1.12, 1.13)
    assert v.loc["while-graph", "bubble_ns"] == 7.0 and v["bubble_ns"].isna().sum() == 2
    row = bubble_table(v.reset_index()).iloc[0]
    assert row["graphed-sync − while-graph µs/step"] == "+85.0"
    assert row["graphed − while-graph µs/step"] == "+70.0"
    assert row["while-graph bubble µs"] == "0.0" and row["graphed bubble µs"] == "–"
