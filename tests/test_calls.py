"""The calls the steps fall in (docs/METRICS.md, "Calls"), worked out by hand on tiny frames:
outermost call ranges on the step's thread, each call's medians, the twin's beside them."""

import numpy as np
import pandas as pd

from analysis.measures.calls import call_name, calls_summary, step_calls, with_untraced_calls
from analysis.render.text import calls_lines

G = "transformers.generation.utils.GenerationMixin.generate"


def ranges():
    # Thread 1: two generate() calls, the first wrapped twice (a range just inside its own
    # name); thread 2: a call of its own; an unrelated range.
    return pd.DataFrame({
        "start": [0, 1, 100, 0, 0], "end": [90, 89, 200, 300, 300], "tid": [1, 1, 1, 2, 1],
        "name": [G, G, G, "generate", "pkg.generate_batch"]})


def test_each_step_falls_in_the_outermost_call_range_of_its_thread():
    start = np.array([5, 40, 95, 120, 150, 10, 400])
    tid = np.array([1, 1, 1, 1, 1, 2, 1])
    # 95 lies between the calls, 400 after them; thread 2's call is its own (numbered after
    # thread 1's first call, whose range starts no earlier).
    assert step_calls(ranges(), start, tid).tolist() == [0, 0, -1, 2, 2, 1, -1]
    assert call_name(ranges()) == "GenerationMixin.generate"


def test_each_call_has_the_medians_of_its_steps_and_the_twins():
    table = pd.DataFrame({"step": [1, 2, 3, 4, 5], "period_ns": [50, 40, 60, 10, 12],
                          "busy_ns": [1, 1, 2, 1, 1]})
    calls = calls_summary(table, np.array([0, 0, 0, 1, 1]), "GenerationMixin.generate")
    assert calls == [
        {"call": 1, "name": "GenerationMixin.generate", "first_step": 1, "last_step": 3,
         "steps": 3, "period_ns_median": 50.0, "busy_ns_median": 1.0},
        {"call": 2, "name": "GenerationMixin.generate", "first_step": 4, "last_step": 5,
         "steps": 2, "period_ns_median": 11.0, "busy_ns_median": 1.0}]
    steps = table.assign(untraced_period_ns=pd.array([70, 30, None, 9, 11], dtype="Int64"))
    assert [c["untraced_period_ns_median"] for c in with_untraced_calls(calls, steps)] == [
        50.0, 10.0]
    # One call: nothing to split.
    assert calls_summary(table, np.zeros(5, dtype=np.int64)) == []


def test_the_report_lists_each_call_on_a_line():
    calls = [{"call": k, "name": "GenerationMixin.generate", "first_step": 10 * k,
              "last_step": 10 * k + 9, "steps": 10, "period_ns_median": 2e6 * k,
              "busy_ns_median": 1e6} for k in range(1, 7)]
    lines = calls_lines(calls)
    assert lines[0] == "  calls          6 of GenerationMixin.generate (the medians above mix them)"
    assert lines[1] == "    call 1       steps 10-19: 2.00 ms period median, GPU busy 1.00 ms"
    assert lines[-1] == "    and 2 more (--format json: summary.calls)"
    assert len(lines) == 6 and max(map(len, lines)) <= 100
