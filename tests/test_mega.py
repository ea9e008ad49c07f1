"""The megakernel's schedule (harness/mega_schedule.py) and the mega step it drives, on the CPU:
the phases, the counters' targets and the tile widths worked out by hand; every interleaving the
tests pick runs to the end (no deadlock), and one that breaks the rule (a task run before its
counter) gives other tokens; mega and while-mega played task by task give kv's tokens on the three
Llama-family presets (fp32 at "highest"). The kernel itself: tests/test_triton_interpreter.py
(the interpreter) and tests/test_gpu_mega.py (the GPU)."""

import random
from dataclasses import replace

import pytest
import torch

from harness import llama_mega as M
from harness import mega_schedule as S
from harness.config import ConfigError, RunConfig, validate
from harness.decode import new_state
from harness.instrument import no_window
from harness.llama_mega import check_mega, mega_eager, shape_of
from harness.model import build_model, special_tokens
from harness.run import make_decoder
from harness.stops import stop_steps
from harness.variants import mega, while_mega

BATCH, NEW, STOP = 4, 12, "uniform:4-9"
TINY = S.Shape(layers=2, batch=2, heads=4, kv_heads=2, head_dim=8, hidden=32, intermediate=80,
               vocab=100)


def test_phases_and_targets_of_a_two_layer_step():
    sched = S.build(TINY, programs=3, tiles={S.QKV: 16, S.O: 16, S.GLU: 32, S.DOWN: 16,
                                             S.HEAD: 32})
    # qkv: (4 + 2 * 2) * 8 = 64 columns in 4 tiles of 16; attention: 2 rows x 4 heads; o and down
    # 32 in 2; glu 80 in 3 of 32; head 100 in 4 of 32.
    per_layer = [(S.QKV, 4), (S.ATTN, 8), (S.O, 2), (S.GLU, 3), (S.DOWN, 2)]
    want = [(S.EMBED, 0, 2)] + [(k, layer, n) for layer in range(2) for k, n in per_layer]
    assert sched.phases == want + [(S.HEAD, 0, 4), (S.ADVANCE, 0, 1)]
    assert sched.counters == 14
    assert sched.targets() == [0, 2, 4, 8, 2, 3, 2, 4, 8, 2, 3, 2, 4]
    assert len(sched.tasks) == 2 + 2 * 19 + 5 == 45
    # Dealt round-robin over the phases: program 0 takes tasks 0, 3, 6, ...
    assert sched.lists[0][:4] == [0, 3, 6, 9] and sched.lists[2][-1] == 44
    assert [len(t) for t in sched.lists] == [15, 15, 15]
    assert S.busiest(sched) == {"embed": 1, "qkv": 2, "attn": 3, "o": 1, "glu": 1, "down": 1,
                                "head": 2, "advance": 1}


def test_tile_widths_cost_rounds_times_the_width_and_a_task():
    # 2048 columns on 132 programs: width 16 takes 1 round (128 tasks), cost 24; 32: 1 round, 40.
    assert S.tile_n(2048, 132) == 16
    # 8192 on 132: 16 -> 4 rounds x 24 = 96; 32 -> 2 x 40 = 80; 64 -> 1 x 72 = 72; 128 -> 1 x 136.
    assert S.tile_n(8192, 132) == 64
    # 128256 on 132: 16 -> 61 x 24 = 1464; 32 -> 31 x 40 = 1240; 64 -> 16 x 72 = 1152;
    # 128 -> 8 x 136 = 1088.
    assert S.tile_n(128256, 132) == 128
    assert S.tile_n(100, 1) == 128  # one program: the widest, fewest tasks
    with pytest.raises(ValueError):
        S.build(TINY, programs=0)


def test_the_kernels_tables_pad_each_programs_list():
    # On 4 programs tile_n picks the widths of the first test (qkv 64 -> 16: one round of 24
    # against 32's 40; glu 80 -> 32: one round of 40 against 16's two of 24; head 100 -> 32):
    # the same 45 tasks, dealt 0, 1, 2, 3, 0, ... so program 0 holds 12 and the others 11.
    sched = S.build(TINY, programs=4)
    assert sched.tiles == {S.QKV: 16, S.O: 16, S.GLU: 32, S.DOWN: 16, S.HEAD: 32}
    t = S.tensors(sched, "cpu")
    assert t["most"] == 12 and t["counts"].tolist() == [12, 11, 11, 11]
    assert t["lists"][1].tolist() == [1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, -1]
    assert t["lists"][0, -1] == 44 and t["lists"][3, -2:].tolist() == [43, -1]
    # (kind, layer, tile, phase): the embedding's 2 rows, layer 0's first qkv tile, layer 1's
    # third attention task, the bookkeeping last.
    assert t["tasks"][:3].tolist() == [[S.EMBED, 0, 0, 0], [S.EMBED, 0, 1, 0], [S.QKV, 0, 0, 1]]
    assert t["tasks"][2 + 19 + 4 + 2].tolist() == [S.ATTN, 1, 2, 7]
    assert t["tasks"][44].tolist() == [S.ADVANCE, 0, 0, 12]
    assert t["targets"].tolist() == [0, 2, 4, 8, 2, 3, 2, 4, 8, 2, 3, 2, 4]
    assert t["counters"].tolist() == [0] * 14


@pytest.mark.parametrize("programs", [1, 2, 3, 7, 64])
def test_every_interleaving_runs_each_task_once_after_its_phase_before(programs):
    sched = S.build(TINY, programs)
    for seed in range(20):
        order = S.simulate(sched, lambda task: None, random.Random(seed).choice)
        assert sorted(order) == sorted(sched.tasks)
        done = [0] * len(sched.phases)
        for _, _, _, p in order:
            assert p == 0 or done[p - 1] == sched.phases[p - 1][2]
            done[p] += 1


def test_programs_that_wait_on_each_other_are_reported():
    sched = S.build(TINY, programs=2)
    # Program 0 takes one of program 1's head tasks first, before its own early ones.
    lists = [[sched.lists[1][-1]] + sched.lists[0], sched.lists[1][:-1]]
    broken = replace(sched, lists=lists)
    with pytest.raises(S.Deadlock, match="wait on each other"):
        S.simulate(broken, lambda task: None)


def config(name: str, variant: str, **kw) -> RunConfig:
    return validate(RunConfig(**{**dict(variant=variant, model=name, batch=BATCH, new_tokens=NEW,
                                        device="cpu", stop=STOP, matmul_precision="highest"),
                                 **kw}))


def state(model, stop: str = STOP, batch: int = BATCH) -> dict:
    bos, eos = special_tokens(model.config)
    return new_state(batch, NEW, stop_steps(stop, batch, NEW, 0), "cpu", 0, bos, eos)


def decode(model, name: str, **kw) -> dict:
    run = make_decoder(model, config(name, "kv", **kw))
    run(no_window())
    return run(no_window())


@pytest.mark.parametrize("name", ["llama:tiny", "qwen2:tiny", "mistral:tiny"])
def test_mega_and_while_mega_played_task_by_task_give_kv_tokens(name):
    torch.set_float32_matmul_precision("highest")
    model = build_model(name, "fp32", "cpu", seed=0)
    ref = decode(model, name)
    assert ref["stop_step"] == 9 and len(set(ref["tokens"][2, 1:9].tolist())) >= 6
    for maker, overshoot in ((mega, 1), (while_mega, 0)):
        run = maker(model, replace(config(name, "kv"), variant="mega"), state(model), graph=False)
        run(no_window())
        got = run(no_window())  # the second run must not depend on the first
        assert torch.equal(got["tokens"], ref["tokens"]), maker.__name__
        assert got["stop_step"] == ref["stop_step"] == 9, maker.__name__
        assert got["overshoot_steps"] == overshoot, maker.__name__


def test_one_row_in_order_and_with_a_task_run_out_of_turn():
    """At one row, the step (random interleavings) and the tasks replayed by hand in the
    schedule's order give kv's tokens; the same replay with the head's tasks before the last down
    projection (its counter skipped: they read an unfinished x) does not."""
    torch.set_float32_matmul_precision("highest")
    model = build_model("llama:tiny", "fp32", "cpu", seed=0)
    ref = decode(model, "llama:tiny", batch=1, stop="none")["tokens"]
    cfg = replace(config("llama:tiny", "kv", batch=1, stop="none"), variant="mega")
    st = state(model, "none", 1)
    eager, _ = mega_eager(model, cfg, st)
    for _ in range(NEW):
        eager()
    assert torch.equal(st["ids"][:, : ref.shape[1]], ref)

    def replay(reorder) -> torch.Tensor:
        st = state(model, "none", 1)
        _, kv = mega_eager(model, cfg, st)
        order, box = reorder(kv["sched"].tasks), {}
        for _ in range(NEW):
            for task in order:
                M._run_task(model, kv, st, task, box)
        return st["ids"][:, : ref.shape[1]]

    def head_early(tasks):
        head = [t for t in tasks if t[0] == S.HEAD]
        rest = [t for t in tasks if t[0] != S.HEAD]
        return rest[:-2] + head + rest[-2:]  # rest ends with the last down tile, the bookkeeping

    assert torch.equal(replay(list), ref)
    assert not torch.equal(replay(head_early), ref)


def test_models_mega_does_not_serve_are_refused_in_one_line():
    model = build_model("llama:tiny", "fp32", "cpu", seed=0)
    with pytest.raises(ConfigError, match="at most 16 rows"):
        check_mega(model, 17, NEW)
    model.model.layers[1].mlp.down_proj.bias = torch.nn.Parameter(torch.zeros(64))
    with pytest.raises(ConfigError, match="biases to q, k and v only"):
        check_mega(model, 1, NEW)


def test_the_shape_comes_from_the_models_config():
    model = build_model("qwen2:tiny", "fp32", "cpu", seed=0)
    c = model.config
    s = shape_of(model, 3)
    assert (s.layers, s.batch, s.hidden, s.intermediate, s.vocab) == (
        c.num_hidden_layers, 3, c.hidden_size, c.intermediate_size, c.vocab_size)
    assert s.heads * s.head_dim == c.hidden_size and s.kv_heads == c.num_key_value_heads
