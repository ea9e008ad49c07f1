"""bench --processes without processes: the schedule, the A/A arms, the per-variant options and
the statistics, with a stand-in for the child bench."""

import io

import pytest

from harness.processes import child_command, median_ci, run_processes, schedule, table


def test_one_variant_runs_as_two_interleaved_arms():
    assert schedule(["static"], 2) == [(0, "static"), (0, "static (again)"), (1, "static"),
                                       (1, "static (again)")]
    assert schedule(["a", "b"], 2) == [(0, "a"), (0, "b"), (1, "a"), (1, "b")]


def test_k_and_branches_go_to_their_own_variant():
    options = ["--batch", "8", "--k", "4", "--branches", "2"]
    kv = child_command("kv", options, 3, "x.json")
    assert kv[kv.index("bench") + 1:] == ["--variants", "kv", "--repeats", "3", "--json",
                                          "x.json", "--batch", "8"]
    again = child_command("fused (again)", options, 3, "x.json")
    assert again[-4:] == ["--batch", "8", "--branches", "2"] and "fused" in again


def test_the_aa_noise_floor_pairs_process_i_of_each_arm():
    times = iter([10.0, 10.5, 12.0, 11.0, 9.0, 9.2])  # a a' a a' a a'

    def runner(command):
        return {"results": [{"ms_per_step_median": next(times),
                             "floor": {"floor_ms_per_step": 1.0}}]}

    log = io.StringIO()
    partial = []
    report = run_processes(["static"], 3, 5, [], runner=runner, log=log,
                           on_round=partial.append)
    assert report["aa"] and len(log.getvalue().splitlines()) == 6
    # After rounds 1 and 2 (not 3: that is the report): what ran so far, said to be cut short.
    assert [(r["processes"], r["complete"]) for r in partial] == [(1, False), (2, False)]
    assert partial[1]["results"][0]["ms_per_step"] == [10.0, 12.0]
    assert partial[1]["differences"][0]["median_diff_ms"] == pytest.approx(-0.25)
    assert "over 2 processes per variant (of 3 planned: cut short)" in table(partial[1])
    assert report["complete"] and report["processes"] == 3
    a, again = report["results"]
    assert a["ms_per_step"] == [10.0, 12.0, 9.0] and a["ms_per_step_median"] == 10.0
    assert again["ms_per_step"] == [10.5, 11.0, 9.2] and again["floor_pct"] == pytest.approx(
        100 / 10.5)
    [d] = report["differences"]
    assert d["median_diff_ms"] == pytest.approx(0.2)  # median of 0.5, -1.0, 0.2
    assert d["ci95"][0] <= 0 <= d["ci95"][1] and d["within_noise"]
    assert "A/A noise floor: +0.200 ms/step" in table(report)


def test_the_median_ci_lies_within_the_values():
    import numpy as np

    lo, hi = median_ci([1.0, 2.0, 3.0, 4.0, 100.0], np.random.default_rng(0))
    assert 1.0 <= lo <= 3.0 <= hi <= 100.0
    assert median_ci([5.0, 5.0], np.random.default_rng(0)) == [5.0, 5.0]
