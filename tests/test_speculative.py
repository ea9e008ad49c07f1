"""Speculative decoding (analysis/measures/draft.py, METRICS.md "Speculative decoding"): the
steps are the target's verifications, each from the draft work that feeds it; the tokens each
added; the draft's share. Worked out by hand on tests/synth.py's speculative_trace (its
docstring draws it) and on forwards of planned GPU work."""

import io
import json

import pandas as pd
import pytest
from click.testing import CliRunner
from synth import LLAMA_FORWARD, Synth, host_trace, speculative_trace

from analysis.cli import main
from analysis.measures.draft import step_tokens
from analysis.measures.summary import Options, analyze
from analysis.readers import load_trace

DRAFT_ROW = f"draft: {LLAMA_FORWARD}"
CANDIDATES = "transformers.generation.candidate_generator.AssistedCandidateGenerator"
GENERATE = "transformers.generation.utils.GenerationMixin.generate"


def spec(tmp_path, **kw):
    (a,) = analyze(load_trace(speculative_trace(**kw).write(tmp_path / "spec.sqlite")))
    return a


@pytest.fixture(scope="module")
def assisted(tmp_path_factory):
    """The analysis of speculative_trace as drawn (each range, each mark)."""
    return spec(tmp_path_factory.mktemp("spec"))


def column(a, name):
    return a.steps[name].tolist()


def test_the_steps_are_the_target_forwards_each_from_the_get_candidates_that_feeds_it(assisted):
    a = assisted
    assert column(a, "step") == [1, 2, 3]
    assert column(a, "name") == [LLAMA_FORWARD] * 3
    # From get_candidates' start to the target forward's end.
    assert column(a, "cpu_start_ns") == [10, 220, 400]
    assert column(a, "cpu_end_ns") == [200, 380, 570]
    # The draft's kernels (one a draft forward: 3, 1, 2) are the step's, with the target's 3.
    assert column(a, "ops") == [6, 4, 5]
    assert column(a, "gpu_start_ns") == [24, 234, 414]
    assert column(a, "gpu_end_ns") == [185, 365, 555]
    assert column(a, "busy_ns") == [90, 70, 80]
    assert column(a, "period_ns") == [161, 180, 190]
    s = a.summary
    assert (s["steps"], s["steps_from"], s["unattributed_ops"]) == (3, "function", 0)


def test_each_step_has_the_tokens_its_verification_accepted(assisted):
    a = assisted
    assert column(a, "tokens") == [3, 1, 2]
    s = a.summary
    assert (s["tokens"], s["token_steps"]) == (6, 3)
    assert (s["tokens_per_step_mean"], s["tokens_per_step_median"]) == (2.0, 2.0)
    # The steps' GPU periods summed over their tokens: (161 + 180 + 190) / 6.
    assert s["period_ns_per_token"] == pytest.approx(531 / 6)


def test_tokens_are_the_marks_in_each_steps_period_on_its_thread():
    steps = pd.DataFrame({"tid": [1, 1, 1, 2], "start": [0, 100, 200, 50]})
    marks = pd.DataFrame({"start": [90, 95, 150, 250, 60, 70],
                          "tid": [1, 1, 2, 1, 1, 2],
                          "name": ["gapscope.accepted 3", "gapscope.accepted 1",
                                   "gapscope.accepted 9", "gapscope.accepted 2",
                                   "gapscope.sync a.py:1 f", "gapscope.accepted 4"]})
    # Step 1 [0, 100): 3 + 1; step 2 [100, 200): none of its thread; step 3 [200, ...): 2;
    # thread 2's step [50, ...): 9 + 4.
    assert step_tokens(steps, marks).tolist() == [4, pd.NA, 2, 13]
    assert step_tokens(steps, marks.iloc[4:5]) is None


def test_the_drafts_forwards_are_a_host_row_and_a_share_of_the_steps(assisted):
    a = assisted
    first = a.host[a.host["step_row"] == 0].set_index("name")
    # Step 1's host period [10, 220): get_candidates' own 10-12 and 98-100, the draft's
    # generate() 12-98 less its three forwards, then the outer generate() 100-110, 200-205,
    # 215-220 (76 in all), update_candidate_strategy 205-215.
    assert first["ns"].to_dict() == {f"{CANDIDATES}.get_candidates": 4, GENERATE: 76,
                                     DRAFT_ROW: 30, LLAMA_FORWARD: 90,
                                     f"{CANDIDATES}.update_candidate_strategy": 10}
    assert tuple(first.loc[DRAFT_ROW, ["python_ns", "cuda_ns", "calls"]]) == (24, 6, 3)
    assert list(a.host_steps["host_period_ns"]) == [210, 180, 170]
    d = a.summary["draft"]
    assert (d["name"], d["row"], d["found_by"]) == (LLAMA_FORWARD, DRAFT_ROW, "ranges")
    assert (d["forwards"], d["forwards_per_step_mean"]) == (6, 2.0)
    # The draft's kernels a step: 30, 10, 20 of busy 90, 70, 80.
    assert (d["busy_ns_median"], d["busy_share"]) == (20.0, 0.25)
    # The draft row's mean (30 + 10 + 20) / 3 of the mean host period 560 / 3.
    assert d["host_ns_mean"] == 20.0 and d["host_share"] == pytest.approx(60 / 560)


def test_without_get_candidates_the_drafts_own_generate_holds_its_forwards(tmp_path):
    a = spec(tmp_path, candidates=False)
    # Each step from the first draft forward after the previous target forward.
    assert column(a, "cpu_start_ns") == [20, 230, 410]
    assert column(a, "ops") == [6, 4, 5]
    assert a.summary["draft"]["found_by"] == "ranges"


def test_without_host_functions_the_draft_is_the_smaller_work_that_feeds_the_target(tmp_path):
    a = spec(tmp_path, candidates=False, generate=False, marks=False)
    assert column(a, "cpu_start_ns") == [20, 230, 410]
    assert column(a, "cpu_end_ns") == [200, 380, 570]
    assert column(a, "ops") == [6, 4, 5]
    d = a.summary["draft"]
    assert (d["found_by"], d["forwards"], d["busy_share"]) == ("kernels", 6, 0.25)
    # No mark: no tokens.
    assert "tokens" not in a.steps.columns and "tokens" not in a.summary


def forwards_trace(plan: list) -> Synth:
    """One forward every 100 ns, [100 i, 100 i + 50), launching plan[i] kernels of 1 ns."""
    t = Synth()
    for i, kernels in enumerate(plan):
        t.range(LLAMA_FORWARD, 100 * i, 100 * i + 50)
        for k in range(kernels):
            t.launch(100 * i + 2 * k + 1, 100 * i + 2 * k + 2, 100 * i + 2 * k + 3,
                     100 * i + 2 * k + 4)
    return t


@pytest.mark.parametrize("plan, steps", [
    ([1, 1, 3] * 3, 3),  # draft, draft, target: the draft's found
    ([3, 1] + [1, 1, 3] * 3, 4),  # the target's prefill before the draft's (gpt-fast's order)
    ([9, 1, 1, 1] * 3, 12),  # a compiled generate(): an eager prefill, then graph replays
    ([1, 1, 3] * 2, 6),  # two of the larger work only
    ([2, 3] * 4, 8),  # less than twice apart
    ([1, 1, 1, 3, 3, 3], 6),  # not interleaved
    ([3, 3, 1, 1, 3, 1, 1, 3], 8),  # two of the larger work before the first of the smaller
])
def test_forwards_split_by_work_only_where_the_smaller_feeds_the_larger(tmp_path, plan, steps):
    (a,) = analyze(load_trace(forwards_trace(plan).write(tmp_path / "f.sqlite")))
    assert a.summary["steps"] == steps
    assert ("draft" in a.summary) == (steps < len(plan) / 2)


def test_a_capture_without_a_draft_or_marks_is_unchanged(tmp_path):
    path = host_trace().write(tmp_path / "h.sqlite")
    (a,) = analyze(load_trace(path), Options(r"^pkg\.model\.LM\.forward$"))
    assert "draft" not in a.summary and "tokens" not in a.summary
    assert "tokens" not in a.steps.columns
    assert column(a, "cpu_start_ns") == [10, 110, 400]


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_reports_give_tokens_a_step_and_ms_a_token_beside_ms_a_step(tmp_path):
    path = speculative_trace(scale=10_000).write(tmp_path / "spec.sqlite")
    text = " ".join(run("analyze", path).split())
    assert ("steps from target forwards of speculative decoding, numbered in order within "
            "their thread: 3 verifications, each from the draft work that feeds it (draft: 6 "
            "forwards of LlamaForCausalLM.forward, inside get_candidates or the draft's own "
            "generate())") in text
    assert ("tokens 6 in 3 steps: 2.00 a step (median 2), 0.89 ms a token, 1.77 ms a step "
            "(GPU period, mean)") in text
    assert ("draft 0.20 ms GPU busy a step (median), 25.0% of the steps' GPU busy, 2.00 "
            "forwards a step; host row draft: LlamaForCausalLM.forward 0.20 ms a step (10.7% "
            "of the host time)") in text
    assert "draft: LlamaForCausalLM.forward 0.20 0.16 0.04 0.00 10.7%" in text
    out = json.loads(run("analyze", path, "--format", "json"))
    assert out["steps"]["tokens"] == [3, 1, 2]
    assert out["summary"]["period_ns_per_token"] == 885_000
    assert out["summary"]["draft"]["busy_ns_median"] == 200_000
    csv = pd.read_csv(io.StringIO(run("analyze", path, "--format", "csv")))
    assert csv["tokens"].tolist() == [3, 1, 2]
    md = run("analyze", path, "--format", "md")
    assert "| tokens | 6 in 3 steps: 2.00 a step (median 2), 0.89 ms a token" in md
    assert "| step | ops | tokens | host | period |" in md

