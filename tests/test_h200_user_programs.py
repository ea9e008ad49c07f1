"""Real H200 captures of un-annotated programs (docs/user-programs-20261202, docs/host-20261202:
`gapscope profile` with no flags, or the named step function; the README there says how): the
steps each gets, its host table, and the two ways of not counting a step twice that they taught
(the outermost of nested step ranges; the hook's loader never wrapped twice by nsys)."""

import sqlite3
from pathlib import Path

import pytest

import analysis
from analysis.readers import compressed

ROOT = Path(__file__).resolve().parent.parent
USER = ROOT / "docs/user-programs-20261202"
HOST = ROOT / "docs/host-20261202"
G = "transformers.generation."


def run(name: str) -> Path:
    (d,) = [p for p in USER.iterdir() if p.name.endswith(name)]
    return d


@pytest.fixture(scope="module")
def loaded():
    cache = {}

    def get(path: Path):
        if path not in cache:
            cache[path] = analysis.load(path)
        return cache[path]

    return get


def test_a_programs_own_window_gives_one_step_a_forward_though_nsys_wrapped_each_twice(loaded):
    d = run("window-wrapped-twice")
    con = sqlite3.connect(compressed.plain(d / "capture.sqlite.xz"))
    (ranges,) = con.execute("SELECT count(*) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId"
                            " WHERE s.value LIKE '%GPT2LMHeadModel.forward'").fetchone()
    a = loaded(d)
    # The capture of the program's own window: 32 forwards, each a range inside a range of its
    # name (the hook's import finder, wrapped by nsys then); the steps are the outer ranges.
    assert (ranges, len(a.steps), a.summary["steps_from"]) == (64, 32, "function")
    h = a.summary["host"]
    assert (h["named_share"], h["steps"]) == (1.0, 32)
    names = {r["name"] for r in h["rows"]}
    assert {G + "utils.GenerationMixin._sample", G + "utils.StopCheck.__call__",
            G + "stopping_criteria.EosTokenCriteria.__call__",
            "transformers.cache_utils.DynamicLayer.update"} <= names


def test_a_capture_with_no_nvtx_at_all_gets_its_steps_inferred(loaded):
    d = run("plain")
    con = sqlite3.connect(compressed.plain(d / "capture.sqlite.xz"))
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "NVTX_EVENTS" not in tables
    a = loaded(d / "capture.sqlite.xz")
    s = a.summary
    assert (len(a.steps), s["steps_from"], s["steps_inferred_by"]) == (
        31, "inferred", "repeating sequence of 283 launches (100% the same), phase after "
        "cudaStreamSynchronize")
    # No named code: the whole host period is `other`, and the table says why in one line.
    assert [r["name"] for r in s["host"]["rows"]] == ["other"] and s["host"]["why"]


def test_sampled_generate_on_a_llama_shape_names_all_but_a_hair_of_each_step(loaded):
    a = loaded(run("sample"))
    h = a.summary["host"]
    assert (len(a.steps), round(h["named_share"], 4), round(h["named_share_min"], 4)) == (
        96, 0.9999, 0.9965)
    share = {r["name"]: round(r["share"], 4) for r in h["rows"]}
    assert share["transformers.models.llama.modeling_llama.LlamaModel.forward"] == 0.8946
    warpers = [G + "logits_process." + c + ".__call__" for c in (
        "TopKLogitsWarper", "TopPLogitsWarper", "TemperatureLogitsWarper",
        "RepetitionPenaltyLogitsProcessor")]
    assert all(share[w] > 0 for w in warpers) and share["torch.multinomial"] > 0
    graph = h["bounds"][0]
    assert (graph["scenario"], graph["lower_ns"], graph["upper_ns"], graph["step_ns"]) == (
        "forward as one CUDA graph", 2576127, 3917417, 34309198)
    # Traced and untraced: the twin's two plain runs give the period, its last run the host
    # table's untraced rows and the bound from them.
    u = a.summary["untraced"]
    assert (u["runs"], u["steps"], u["period_ns_median"]) == (2, 192, 17867798)
    assert (h["untraced"]["runs"], round(h["untraced"]["period_ns_mean"])) == (1, 29136452)
    assert round(graph["untraced_lower_ns"]) == 2111265


def test_two_generate_calls_are_split_cold_from_warm(loaded):
    calls = loaded(run("sample")).summary["calls"]
    assert [(c["first_step"], c["last_step"], c["period_ns_median"],
             c["untraced_period_ns_median"]) for c in calls] == [
        (1, 48, 49445447, 58786560.5), (49, 96, 12584106, 11523132.25)]


def test_a_loop_without_a_kv_cache_gets_a_step_a_forward_and_its_twin(loaded):
    a = loaded(run("nokv"))
    s, h = a.summary, a.summary["host"]
    assert (len(a.steps), s["steps_from"]) == (64, "function")
    assert (s["untraced"]["runs"], s["untraced"]["steps"], s["untraced"]["run_period_ns_medians"]) \
        == (2, 128, [7082458, 10099090])
    assert (round(h["named_share"], 4), round(h["named_share_min"], 4)) == (0.9791, 0.9685)
    top = h["rows"][0]
    assert (top["name"], round(top["untraced_ns"])) == (
        "transformers.models.gpt2.modeling_gpt2.GPT2Model.forward", 6702880)


def test_the_programs_own_window_has_its_twin_in_the_same_window(loaded):
    a = loaded(run("window"))
    s = a.summary
    assert (a.run.info["capture"]["range"], len(a.steps)) == ("cudaProfilerApi", 32)
    assert (s["untraced"]["runs"], s["untraced"]["steps"], s["untraced"]["period_ns_median"]) == (
        2, 64, 7379821.5)
    assert round(s["host"]["named_share"], 4) == 1.0


def test_a_compiled_graph_loop_gets_a_step_a_replay_and_a_twin_of_the_replays(loaded):
    a = loaded(run("compiled"))
    s = a.summary
    assert (len(a.steps), s["steps_inferred_by"]) == (93, "graph launch (138 nodes)")
    assert a.run.info["hook"]["twin"]["runs"] == 3
    assert (s["untraced"]["runs"], s["untraced"]["steps"], s["untraced"]["period_ns_median"]) == (
        2, 182, 736306.5)


def test_programs_unseen_by_the_tests_get_their_steps_and_twins(loaded):
    """Written for one device call and never run through the harness (unseen/*.py): a loop of
    its own CUDA graph replays with a stop check every fourth token, and a cuDNN GRU sampler
    with a .item() a character, called twice."""
    graph = loaded(USER / "unseen" / "20261202T055457Z-manual_graph")
    s = graph.summary
    assert (len(graph.steps), s["steps_inferred_by"]) == (96, "graph launch (67 nodes)")
    assert (s["untraced"]["steps"], s["untraced"]["period_ns_median"]) == (72, 287453)
    (sync,) = graph.syncs.itertuples(index=False)
    assert (sync.file.endswith("/manual_graph.py"), sync.line, sync.calls_per_step) == (
        True, 48, 0.25)
    # Its host runs ahead of the GPU: no host row's removal buys anything.
    (bound,) = s["host"]["bounds"]
    assert (bound["step_ns"], bound["speedup_min"], bound["speedup_max"]) == (261409, 1.0, 1.0)
    gru = loaded(USER / "unseen" / "20261202T055523Z-gru_chars")
    s = gru.summary
    assert (len(gru.steps), s["steps_inferred_by"]) == (160, (
        "repeating sequence of 25 launches (100% the same), phase after cudaStreamSynchronize, "
        "in 2 stretches"))
    assert (s["untraced"]["steps"], s["untraced"]["period_ns_median"]) == (157, 531231.5)


def test_an_eager_loop_named_by_its_step_function_has_a_host_table_and_its_twin(loaded):
    a = loaded(run("loop-eager-fn"))
    h = a.summary["host"]
    assert (len(a.steps), round(h["named_share"], 4)) == (94, 0.9841)
    top = [r["name"] for r in h["rows"][:3]]
    assert top == ["toy_lm.rotate", "toy_lm.Attention.forward", "toy_lm.Block.forward"]
    # This twin timed the host table's code in both its runs (before the last run alone did):
    # its steps carry the wrapper's cost, the untraced period is the longer.
    u = a.summary["untraced"]
    assert (u["runs"], u["steps"]) == (2, 188)
    assert h["untraced"]["runs"] == 2


def test_the_harness_eager_rungs_bound_their_graphed_and_compiled_steps(loaded):
    bounds = {}
    for rung in ("static", "kv"):
        h = loaded(HOST / rung).summary["host"]
        assert h["named_share"] > 0.99
        bounds[rung] = {b["scenario"]: (b["lower_ns"], b["upper_ns"]) for b in h["bounds"]}
    assert bounds["static"]["forward as one CUDA graph"] == (1102942.5, 1358861)
    assert bounds["kv"]["forward's Python gone, its launches kept"] == (2902102.5, 3948278.5)


def test_beam_search_and_an_encoder_decoder_unseen_by_the_tests(loaded):
    """unseen/beam.py: generate() with four beams, a step a forward, and the beam bookkeeping a
    row of its own; unseen/t5_gen.py: T5 in the program's own window, captured before its
    forward was traced (analysis/capture/step_functions.py names it now): steps inferred."""
    beam = loaded(USER / "unseen" / "20261202T063716Z-beam")
    s, h = beam.summary, beam.summary["host"]
    assert (len(beam.steps), s["steps_from"], s["untraced"]["period_ns_median"]) == (
        24, "function", 4850128)
    assert [(r["name"], round(r["share"], 4)) for r in h["rows"][:2]] == [
        ("transformers.models.gpt2.modeling_gpt2.GPT2Model.forward", 0.5007),
        (G + "utils.GenerationMixin._beam_search", 0.2762)]
    t5 = loaded(USER / "unseen" / "20261202T063633Z-t5_gen")
    s = t5.summary
    assert (len(t5.steps), s["steps_inferred_by"]) == (31, (
        "repeating sequence of 268 launches (100% the same), phase after cudaStreamSynchronize"))
    assert (t5.run.info["capture"]["range"], s["untraced"]["steps"]) == ("cudaProfilerApi", 30)


def test_an_encoder_decoder_s_forwards_are_its_steps_once_traced(loaded):
    """unseen/t5_gen.py again, from main at e2d852f (step_functions.ENCODER_DECODERS): each of
    its 32 decoder forwards is a step, the decoder stack the top host row, the twin of them
    all; the encoder's one run and the logits processors between forwards lie outside."""
    t5 = loaded(USER / "unseen" / "20261202T160227Z-t5_gen")
    s = t5.summary
    assert (len(t5.steps), s["steps_from"], s["untraced"]["steps"]) == (32, "function", 32)
    assert s["untraced"]["period_ns_median"] == 7651367
    assert [(r["name"], round(r["share"], 4)) for r in s["host"]["rows"][:2]] == [
        ("transformers.models.t5.modeling_t5.T5Stack.forward", 0.7917),
        (G + "utils.GenerationMixin._sample", 0.0333)]
    assert s["unattributed_ops"] == 1424
