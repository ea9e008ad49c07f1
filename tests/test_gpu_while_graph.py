"""On the GPU: the WHILE-graph loops against the graph-replayed rungs they reuse, at fp32
"highest": while-graph gives graphed's tokens and stop step, while-fused fused's, on every stop
schedule (GPT-2) and on the small llama, qwen2 and mistral; the loop stops on an EOS the model
picks itself; one launch makes no host sync before its end; the timeline marks every step."""

import json

import pytest
import torch

from harness.cli import main
from harness.config import RunConfig, validate
from harness.decode import new_state
from harness.instrument import no_window, timeline_window
from harness.model import build_model, special_tokens
from harness.run import make_decoder, tokens_sha256
from harness.stops import stop_steps
from harness.variants import own_step, while_graph

pytestmark = pytest.mark.gpu

BATCH, NEW = 8, 40
SCHEDULES = ["none", "fixed:17", "uniform:10-30", "geometric:0.08"]
PAIRS = [("while-graph", "graphed"), ("while-fused", "fused")]


@pytest.fixture(scope="module", params=["gpt2", "llama", "qwen2", "mistral"])
def model(request):
    torch.set_float32_matmul_precision("highest")
    m = build_model(request.param, "fp32", "cuda", seed=0)
    yield request.param, m
    del m
    torch.cuda.empty_cache()


def config(name: str, variant: str, **kw) -> RunConfig:
    return validate(RunConfig(**{**dict(variant=variant, model=name, batch=BATCH, new_tokens=NEW,
                                        device="cuda", stop="uniform:10-30",
                                        matmul_precision="highest"), **kw}))


def decode(model, name: str, variant: str, **kw) -> dict:
    run = make_decoder(model, config(name, variant, **kw))
    run(no_window())  # the second run must not depend on what the first left behind
    return run(no_window())


def same(result: dict, ref: dict) -> bool:
    return (tokens_sha256(result["tokens"]) == tokens_sha256(ref["tokens"])
            and result["stop_step"] == ref["stop_step"])


@pytest.mark.parametrize("loop,ref", PAIRS)
@pytest.mark.parametrize("stop", SCHEDULES)
def test_the_loop_gives_its_rungs_tokens_and_stop_step(model, loop, ref, stop):
    name, m = model
    if name != "gpt2" and stop in ("none", "geometric:0.08"):
        pytest.skip("every schedule on GPT-2; two on the Llama family")
    want = decode(m, name, ref, stop=stop)
    got = decode(m, name, loop, stop=stop)
    assert len(set(want["tokens"][0, 1:10].tolist())) > 1  # not one repeated token
    assert same(got, want)
    # One step past the stop for the deferred check; none for the loop, which stops on it.
    assert got["steps_run"] == (want["stop_step"] or NEW) and got["overshoot_steps"] == 0


def test_the_loop_stops_on_an_eos_the_model_picks(model):
    """No schedule: each sequence's own step-5 token made an EOS id, so the model finishes them
    (at step 5 or before, where the token came earlier); graphed with the same ids agrees."""
    name, m = model
    plain = decode(m, name, "graphed", stop="none")
    bos, eos = special_tokens(m.config)
    ids = (eos[0], *sorted(set(plain["tokens"][:, 5].tolist())))
    results = []
    for maker in (own_step, while_graph):
        cfg = config(name, "graphed", stop="none")
        st = new_state(BATCH, NEW, stop_steps("none", BATCH, NEW, 0), "cuda", 0, bos, ids)
        run = maker(m, cfg, st, graph=True)
        run(no_window())
        results.append(run(no_window()))
    ref, got = results
    assert got["stop_step"] is not None and got["stop_step"] <= 5
    assert same(got, ref) and got["steps_run"] == got["stop_step"]


@pytest.mark.parametrize("variant", ["while-graph", "while-fused"])
def test_one_launch_makes_no_host_sync_before_its_end(model, variant):
    name, m = model
    run = make_decoder(m, config(name, variant))
    want = run(no_window())
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = run(no_window())  # only the end's reads, under allow_sync
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert same(got, want)


def test_the_timeline_stamps_every_step_in_order(model):
    name, m = model
    run = make_decoder(m, config(name, "while-graph"))
    run(no_window())
    window = timeline_window()
    result = run(window)
    marks = window.timeline.read()
    assert window.timeline.source == "gpu-globaltimer"
    assert marks["step"] == list(range(1, result["steps_run"] + 1))
    start, end = marks["start_ns"], marks["end_ns"]
    assert start[0] == 0
    assert all(s < e for s, e in zip(start, end, strict=True))
    assert all(e <= s for e, s in zip(end, start[1:], strict=False))  # steps do not overlap
    assert same(result, decode(m, name, "graphed"))


def test_run_json_counts_every_step_in_the_window(tmp_path, model):
    name, _ = model
    if name != "gpt2":
        pytest.skip("GPT-2 only")
    out = tmp_path / "run"
    assert main(["run", "--variant", "while-graph", "--out", str(out), "--batch", "4",
                 "--new-tokens", "30", "--stop", "fixed:20"]) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["config"]["window"] == "0:30"
    assert record["result"]["steps_run"] == 20 and record["result"]["overshoot_steps"] == 0
    assert record["timing"]["window_steps"] == 20
