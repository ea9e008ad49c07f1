"""Every variant that runs without CUDA against kv, with the tiny model on the CPU."""

from dataclasses import replace

import pytest
import torch

from harness.config import RunConfig, validate
from harness.decode import advance, finish, new_state
from harness.fused_step import split
from harness.instrument import no_window
from harness.model import build_model
from harness.run import make_decoder
from harness.stops import expected_stop_step, stop_steps
from harness.variants import fused_own_step, own_step

BATCH, NEW = 4, 12
EOS = 50256  # GPT-2's <|endoftext|>: its BOS and EOS
# uniform:4-9 with stop seed 0 draws these steps (torch's seeded CPU generator):
UNIFORM_STOPS = [6, 7, 9, 4]
# torch.compile without inductor's C++ code (tests/conftest.py); the GPU suite runs inductor.
pytestmark = pytest.mark.usefixtures("compile_without_codegen")


@pytest.fixture(scope="module")
def tiny():
    torch.set_float32_matmul_precision("highest")
    return build_model("tiny", "fp32", "cpu", seed=0)


def config(variant: str, **kw) -> RunConfig:
    base = dict(variant=variant, model="tiny", batch=BATCH, new_tokens=NEW, device="cpu",
                stop="uniform:4-9", matmul_precision="highest")
    return validate(RunConfig(**{**base, **kw}))


def decode(model, variant: str, **kw) -> dict:
    run = make_decoder(model, config(variant, **kw))
    run(no_window())  # the second run must not depend on what the first left behind
    return run(no_window())


def counts(result: dict) -> tuple:
    return result["steps_run"], result["overshoot_steps"], result["stale_flag_reads"]


def own_step_eager(model, **kw) -> dict:
    cfg = replace(config("kv"), **kw)
    st = new_state(BATCH, NEW, stop_steps(cfg.stop, BATCH, NEW, 0), "cpu", 0, EOS, (EOS,))
    run = own_step(model, cfg, st, graph=False)
    run(no_window())
    return run(no_window())


def fused_eager(model, branches: int) -> dict:
    """The fused step as on the GPU but eager, with the Triton kernels' torch references."""
    cfg = replace(config("kv"), variant="fused", branches=branches)
    st = new_state(BATCH, NEW, stop_steps(cfg.stop, BATCH, NEW, 0), "cpu", 0, EOS, (EOS,))
    run = fused_own_step(model, cfg, st, graph=False)
    run(no_window())
    return run(no_window())


@pytest.fixture(scope="module")
def reference(tiny):
    return decode(tiny, "kv")


def test_uniform_schedule_is_seeded():
    assert stop_steps("uniform:4-9", BATCH, NEW, seed=0).tolist() == UNIFORM_STOPS
    assert stop_steps("uniform:4-9", BATCH, NEW, seed=1).tolist() != UNIFORM_STOPS


def test_kv_stops_at_the_last_scheduled_step_and_pads_with_eos(reference):
    tokens = reference["tokens"]
    assert tokens.shape == (BATCH, 9 + 1)
    assert reference["stop_step"] == 9
    assert reference["steps_run"] == 9
    assert reference["overshoot_steps"] == 0
    assert reference["stale_flag_reads"] is None
    for j, s in enumerate(UNIFORM_STOPS):
        assert tokens[j, 0] == EOS  # BOS
        assert (tokens[j, 1:s] != EOS).all(), "no EOS before the scheduled step"
        assert (tokens[j, s:] == EOS).all(), "EOS at the scheduled step and after it"


def test_kv_output_is_not_one_repeated_token(reference):
    # Otherwise the identity tests below could not tell variants apart.
    assert len(set(reference["tokens"][2, 1:9].tolist())) == 8


@pytest.mark.parametrize("variant", ["naive", "kv-expandable", "static", "compiled", "pipelined",
                                     "pipelined-seed", "deferred", "check-every-k", "nocheck",
                                     "hf-generate"])
def test_variant_gives_kv_tokens_and_stop_step(tiny, reference, variant):
    result = decode(tiny, variant)
    assert torch.equal(result["tokens"], reference["tokens"])
    assert result["stop_step"] == 9


def test_own_gpt2_step_gives_kv_tokens(tiny, reference):
    result = own_step_eager(tiny)
    assert torch.equal(result["tokens"], reference["tokens"])
    assert counts(result) == (10, 1, 0)


def test_own_gpt2_step_compiled_gives_kv_tokens(tiny, reference):
    # What `graphed --compile default` captures: the same step, compiled (on the GPU, inductor's
    # fused kernels).
    result = own_step_eager(tiny, compile="default")
    assert torch.equal(result["tokens"], reference["tokens"])


def test_own_gpt2_step_matches_kv_for_all_new_tokens(tiny):
    assert torch.equal(own_step_eager(tiny, stop="none")["tokens"],
                       decode(tiny, "kv", stop="none")["tokens"])


@pytest.mark.parametrize("branches", [1, 2, 3, 4])
def test_fused_step_gives_kv_tokens_in_any_number_of_micro_batches(tiny, reference, branches):
    # Folded biases (a GEMM's bias added by the next layernorm), the in-place residual GEMMs, the
    # [L, B, H, T, D] cache cut along B: the algebra the Triton kernels run on the GPU.
    result = fused_eager(tiny, branches)
    assert torch.equal(result["tokens"], reference["tokens"])
    assert counts(result) == (10, 1, 0)


def test_fused_on_cuda_without_triton_is_refused_not_run_on_the_references(monkeypatch):
    from harness import triton_ops

    monkeypatch.setattr(triton_ops, "triton", None)
    assert triton_ops.missing_triton("cuda").startswith("fused needs Triton on CUDA")
    assert triton_ops.missing_triton("cpu") is None


def test_micro_batches_cover_the_batch_in_order():
    assert split(32, 1) == [(0, 32)]
    assert split(32, 2) == [(0, 16), (16, 32)]
    assert split(4, 3) == [(0, 1), (1, 2), (2, 4)]
    assert split(5, 5) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]


@pytest.mark.parametrize("variant", ["pipelined", "pipelined-seed", "deferred"])
def test_deferred_check_computes_one_step_past_the_stop(tiny, variant):
    # On the CPU these run without streams, in the same order: the read is never stale.
    result = decode(tiny, variant)
    assert counts(result) == (10, 1, 0)


def test_check_every_k_syncs_at_the_next_multiple_of_k(tiny):
    result = decode(tiny, "check-every-k", k=4)  # stop at 9, first check after it: step 12
    assert (result["steps_run"], result["stop_step"], result["overshoot_steps"]) == (12, 9, 3)
    result = decode(tiny, "check-every-k", k=5)  # checks at 5 and 10
    assert (result["steps_run"], result["stop_step"], result["overshoot_steps"]) == (10, 9, 1)


def test_nocheck_runs_every_step(tiny):
    result = decode(tiny, "nocheck")
    assert (result["steps_run"], result["stop_step"], result["overshoot_steps"]) == (12, 9, 3)


def test_fixed_schedule_stops_every_sequence_at_the_same_step(tiny):
    result = decode(tiny, "static", stop="fixed:5")
    assert result["stop_step"] == 5
    assert result["tokens"].shape == (BATCH, 6)
    assert (result["tokens"][:, 5] == EOS).all() and (result["tokens"][:, 1:5] != EOS).all()


def test_geometric_schedule_stops_at_its_largest_step(tiny):
    steps = stop_steps("geometric:0.4", BATCH, NEW, seed=3)
    expected = expected_stop_step(steps, NEW)
    assert expected is not None
    result = decode(tiny, "kv", stop="geometric:0.4", stop_seed=3)
    assert result["stop_step"] == expected


def test_geometric_with_p_one_stops_at_step_one():
    assert stop_steps("geometric:1", BATCH, NEW, seed=0).tolist() == [1, 1, 1, 1]


def test_geometric_beyond_new_tokens_means_never():
    steps = stop_steps("geometric:0.0001", BATCH, NEW, seed=0)
    assert steps.tolist() == [NEW + 1] * BATCH
    assert expected_stop_step(steps, NEW) is None


def test_bos_is_not_finished_without_a_schedule(tiny):
    # BOS is EOS (50256) in GPT-2: were it counted, every run would stop at step 1.
    result = decode(tiny, "kv", stop="none")
    assert (result["steps_run"], result["stop_step"], result["overshoot_steps"]) == (NEW, None, 0)
    assert result["tokens"].shape == (BATCH, NEW + 1)
    assert (result["tokens"][:, 1:] != EOS).all()


def one_step_state(stops: list[int], bos: int = EOS, eos: tuple = (EOS,)) -> dict:
    return new_state(len(stops), 3, torch.tensor(stops), "cpu", 0, bos, eos)


def logits_for(tokens: list[int]) -> torch.Tensor:
    logits = torch.zeros(len(tokens), EOS + 1)
    logits[torch.arange(len(tokens)), torch.tensor(tokens)] = 1.0
    return logits


def test_advance_forces_eos_at_the_scheduled_step_and_keeps_it():
    st = one_step_state([1, 2, 4])
    flag = advance(st, logits_for([7, 8, 9]))  # step 1: sequence 0 is due
    assert st["ids"][:, 1].tolist() == [EOS, 8, 9] and not flag.item()
    flag = advance(st, logits_for([7, 8, 9]))  # step 2: sequence 1 is due, 0 stays finished
    assert st["ids"][:, 2].tolist() == [EOS, EOS, 9] and not flag.item()
    assert st["token"].flatten().tolist() == [EOS, EOS, 9]
    assert st["pos"].item() == 2
    assert st["done"].tolist() == [False, False, False, False]


def test_advance_finishes_a_sequence_that_emits_eos_itself():
    st = one_step_state([4, 4])
    flag = advance(st, logits_for([EOS, 5]))
    assert st["finished"].tolist() == [True, False] and not flag.item()
    flag = advance(st, logits_for([6, EOS]))
    assert st["ids"][:, 2].tolist() == [EOS, EOS] and flag.item()
    assert st["done"].tolist() == [False, False, True, False]


def test_finish_counts_reads_that_differ_from_the_truth():
    st = one_step_state([2, 2])
    for _ in range(3):
        advance(st, logits_for([5, 6]))
    # done = [_, F, T, T]: the host acted on False for step 2 (stale) and True for step 3.
    result = finish(st, 3, reads=[(1, False), (2, False), (3, True)])
    assert result["stale_flag_reads"] == 1
    assert (result["stop_step"], result["steps_run"], result["overshoot_steps"]) == (2, 3, 1)
    assert result["tokens"].tolist() == [[EOS, 5, EOS], [EOS, 6, EOS]]


def test_hf_generate_runs_exactly_to_the_stop_step(tiny):
    # generate ends itself once every sequence has emitted EOS: no overshoot, nothing stale.
    assert counts(decode(tiny, "hf-generate")) == (9, 0, None)


def test_advance_keeps_the_eos_id_a_model_picks_and_forces_the_first():
    st = one_step_state([1, 3, 3], bos=1, eos=(2, 3))  # BOS 1; EOS ids 2 (forced) and 3
    assert st["ids"][:, 0].tolist() == [1, 1, 1] and st["token"].flatten().tolist() == [1, 1, 1]
    flag = advance(st, logits_for([7, 3, 1]))  # step 1: sequence 0 is due, 1 picks EOS id 3
    assert st["ids"][:, 1].tolist() == [2, 3, 1] and st["finished"].tolist() == [True, True, False]
    flag = advance(st, logits_for([3, 3, 5]))  # step 2: finished sequences get the first EOS
    assert st["ids"][:, 2].tolist() == [2, 2, 5] and not flag.item()
    flag = advance(st, logits_for([5, 5, 5]))  # step 3: sequence 2 is due
    assert st["ids"][:, 3].tolist() == [2, 2, 2] and flag.item()
