"""Real H200 captures of the loops people write themselves (docs/user-programs-20261204, issue
39), each `gapscope profile -- python3 X.py` with no flags: gpt-fast's own generate() and
nanoGPT's GPT.generate imported from their checkouts through sys.path, a loop and its model
written in the script (`__main__`), and generate() with an assistant model. Each has its steps
from the program's own function (or the target's verifications), a twin, and its host time
named."""

import json
from pathlib import Path

import pytest

from analysis.capture import own_code

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "docs" / "user-programs-20261204"


def run(kind: str) -> Path:
    (found,) = RUNS.glob(f"*Z-{kind}")
    return found


@pytest.fixture(scope="module")
def loaded():
    import analysis

    cache = {}

    def load(kind: str):
        if kind not in cache:
            cache[kind] = analysis.load(run(kind))
        return cache[kind]

    return load


@pytest.mark.parametrize("kind, steps, function, twin_steps, untraced_period_ns", [
    ("gptfast-eager", 297, "generate.decode_one_token", 594, 19202881),
    ("gptfast-compiled", 297, "generate.decode_one_token", 594, 501953),
    ("nanogpt", 200, "model.GPT.forward", 400, 8135497.5),
    ("main-loop", 297, "__main__.decode_one_token", 594, 8595337),
    ("assisted", 40, "transformers.models.llama.modeling_llama.LlamaForCausalLM.forward", 80,
     43265137),
])
def test_each_loop_has_its_steps_a_twin_and_all_its_host_time_named(
        loaded, kind, steps, function, twin_steps, untraced_period_ns):
    a = loaded(kind)
    s = a.summary
    assert (s["steps"], s["steps_from"], s["step_functions"]) == (steps, "function", [function])
    assert (s["untraced"]["runs"], s["untraced"]["steps"], s["untraced"]["period_ns_median"]) == (
        2, twin_steps, untraced_period_ns)
    # Every ns of each step's host period in named code: the program's own, generate()'s.
    assert s["host"]["named_share"] == pytest.approx(1.0) and s["host"]["named_share"] >= 0.9


def test_a_cloned_repository_on_sys_path_is_named_function_by_function(loaded):
    """gpt-fast's modules, found as the program imported them from its checkout: its rotary
    embedding and attention take over half the host time of an eager step."""
    record = json.loads((run("gptfast-eager") / "run.json").read_text())
    # 4 modules: gpt-fast's model, generate and tokenizer, and the H200's carried tabulate (a
    # package installed beside its dist-info, no longer named since: 42 in the compiled run).
    assert record["hook"]["own_code"] == {
        "modules": 4, "functions": 119, "limit": 600, "left_out": 0, "capped_at": None,
        "main_functions": 2, "main_why": None}
    assert record["capture"]["range"] == "all"
    rows = loaded("gptfast-eager").summary["host"]["rows"]
    assert [(r["name"], round(r["share"], 4)) for r in rows[:3]] == [
        ("model.apply_rotary_emb", 0.2842), ("model.Attention.forward", 0.2508),
        ("model.RMSNorm._norm", 0.1227)]


def test_a_function_the_program_compiles_itself_is_named_around_its_graph_replay(loaded):
    """gpt-fast compiles decode_one_token (reduce-overhead, fullgraph): the hook's range is
    around the compiled callable (guards and the graph's replay), outside the compiled region;
    the capture was made once, the driver's folder and gpt-fast's read for a window first."""
    a = loaded("gptfast-compiled")
    rows = a.summary["host"]["rows"]
    assert [(r["name"], round(r["share"], 4)) for r in rows] == [
        ("generate.decode_one_token", 0.7566), ("generate.decode_n_tokens", 0.2434)]
    record = json.loads((run("gptfast-compiled") / "run.json").read_text())
    assert (record["capture"]["range"], "range_fallback" in record["capture"]) == ("all", False)
    assert record["hook"]["own_code"]["functions"] == 42


def test_nanogpt_steps_are_its_forwards_and_its_attention_the_top_row(loaded):
    rows = loaded("nanogpt").summary["host"]["rows"]
    assert [(r["name"], round(r["share"], 4)) for r in rows[:2]] == [
        ("model.CausalSelfAttention.forward", 0.8508), ("model.MLP.forward", 0.0605)]


def test_a_loop_in_the_script_is_named_through_sys_monitoring(loaded):
    """Functions of `__main__` are rows; its decode_one_token, the outermost function once a
    step, is the step (its forward inside it covers the prefills' launches too)."""
    rows = loaded("main-loop").summary["host"]["rows"]
    assert [(r["name"], round(r["share"], 4)) for r in rows[:3]] == [
        ("__main__.RMSNorm.forward", 0.2768), ("__main__.Attention.forward", 0.2667),
        ("__main__.rotate", 0.2051)]
    spec, why = own_code.own_step(run("main-loop") / "capture.sqlite.xz",
                                  own_code.read(run("main-loop")))
    assert (spec, why) == ("__main__:decode_one_token",
                           "297 calls for 297 inferred steps, 98% of their launches inside")


def test_speculative_decoding_steps_are_the_verifications_with_their_tokens(loaded):
    s = loaded("assisted").summary
    assert (s["tokens"], s["token_steps"], s["tokens_per_step_mean"]) == (192, 40, 4.8)
    assert round(s["period_ns_per_token"]) == 45291672
    assert (s["draft"]["forwards"], s["draft"]["found_by"]) == (154, "ranges")
