"""The calls the steps fall in (docs/METRICS.md, "Calls"), worked out by hand on tiny frames:
outermost call ranges on the step's thread, each call's medians, the twin's beside them."""

import numpy as np
import pandas as pd

from analysis.measures.calls import (
    call_name,
    call_ranges,
    calls_summary,
    step_calls,
    with_untraced_calls,
)
from analysis.render.text import calls_lines

G = "transformers.generation.utils.GenerationMixin.generate"


def ranges():
    # Thread 1: two generate() calls, the first wrapped twice (a range just inside its own
    # name); thread 2: a call of its own; an unrelated range.
    return pd.DataFrame({
        "start": [0, 1, 100, 0, 0], "end": [90, 89, 200, 300, 300], "tid": [1, 1, 1, 2, 1],
        "name": [G, G, G, "generate", "pkg.generate_batch"]})


def test_each_step_falls_in_the_outermost_call_range_of_its_thread():
    calls = call_ranges(ranges())
    assert calls[["start", "end", "tid"]].values.tolist() == [[0, 90, 1], [0, 300, 2],
                                                              [100, 200, 1]]
    start = np.array([5, 40, 95, 120, 150, 10, 400])
    tid = np.array([1, 1, 1, 1, 1, 2, 1])
    # 95 lies between the calls, 400 after them; thread 2's call is its own.
    assert step_calls(calls, start, tid).tolist() == [0, 0, -1, 2, 2, 1, -1]
    assert call_name(calls) == "GenerationMixin.generate"


def table(steps, threads, starts):
    return pd.DataFrame({"step": steps, "thread": threads, "cpu_start_ns": starts,
                         "period_ns": [50, 40, 60, 10, 12, 11], "busy_ns": [1, 1, 2, 1, 1, 1]})


def test_each_call_has_the_medians_of_its_own_steps_and_the_twins():
    # Step numbers restart in each call (1, 2, 3 twice): the calls are told apart by their
    # ranges, not their numbers; a step in no call (the last) is in neither.
    calls_frame = pd.DataFrame({"start": [0, 100], "end": [90, 200], "tid": [1, 1],
                                "name": [G, G]})
    t = table([1, 2, 3, 1, 2, 3], ["main"] * 6, [5, 40, 60, 120, 150, 300])
    call = step_calls(calls_frame, t["cpu_start_ns"].to_numpy(), np.ones(6, dtype=np.int64))
    calls = calls_summary(t, calls_frame, call, "GenerationMixin.generate")
    assert calls == [
        {"call": 1, "name": "GenerationMixin.generate", "thread": "main", "start_ns": 0,
         "end_ns": 90, "first_step": 1, "last_step": 3, "steps": 3, "period_ns_median": 50.0,
         "busy_ns_median": 1.0},
        {"call": 2, "name": "GenerationMixin.generate", "thread": "main", "start_ns": 100,
         "end_ns": 200, "first_step": 1, "last_step": 2, "steps": 2, "period_ns_median": 11.0,
         "busy_ns_median": 1.0}]
    steps = t.assign(untraced_period_ns=pd.array([70, 30, None, 9, 11, 500], dtype="Int64"))
    assert [c["untraced_period_ns_median"] for c in with_untraced_calls(calls, steps)] == [
        50.0, 10.0]
    # One call: nothing to split.
    assert calls_summary(t, calls_frame, np.zeros(6, dtype=np.int64)) == []


def test_the_report_lists_each_call_on_a_line_and_its_thread_where_there_are_several():
    calls = [{"call": k, "name": "GenerationMixin.generate", "thread": "main",
              "first_step": 10 * k, "last_step": 10 * k + 9, "steps": 10,
              "period_ns_median": 2e6 * k, "busy_ns_median": 1e6} for k in range(1, 7)]
    lines = calls_lines(calls)
    assert lines[0] == "  calls          6 of GenerationMixin.generate (the medians above mix them)"
    assert lines[1] == "    call 1       steps 10-19: 2.00 ms period median, GPU busy 1.00 ms"
    assert lines[-1] == "    and 2 more (--format json: summary.calls)"
    assert len(lines) == 6
    two = [calls[0], calls[1] | {"thread": "decoder-2", "untraced_period_ns_median": 3.5e6,
                                 "first_step": 10000, "last_step": 19999,
                                 "period_ns_median": 1234.5e6}]
    lines = calls_lines(two)
    assert lines[2] == ("    call 2       steps 10000-19999 of decoder-2: 1234.50 ms period "
                        "median, untraced 3.50 ms, GPU")
    assert lines[3] == "                 busy 1.00 ms"
    assert max(map(len, lines)) <= 100
