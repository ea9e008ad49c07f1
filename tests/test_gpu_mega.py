"""On the GPU: mega and while-mega (the step in one persistent kernel) at one row, where the
GEMVs take the FMA path (fp32 at "highest" against kv; bf16: the two loops' tokens equal, so the
result does not depend on which program got where first); the residency check refuses a
schedule with more programs than the SMs hold, before any launch. Batch 8 against kv on three
families: tests/test_gpu_llama.py."""

from dataclasses import replace

import pytest
import torch

from harness.config import ConfigError, RunConfig, validate
from harness.decode import new_state
from harness.instrument import no_window
from harness.llama_mega import mega_eager
from harness.model import build_model, special_tokens
from harness.run import make_decoder
from harness.stops import stop_steps

pytestmark = pytest.mark.gpu

# Past position 64: the attention's second block of slots (BLOCK_T) and its online softmax.
NEW, STOP = 80, "uniform:66-78"


def config(variant: str, **kw) -> RunConfig:
    return validate(RunConfig(**{**dict(variant=variant, model="llama", batch=1, new_tokens=NEW,
                                        device="cuda", stop=STOP, matmul_precision="highest"),
                                 **kw}))


def decode(net, variant: str, **kw) -> dict:
    run = make_decoder(net, config(variant, **kw))
    run(no_window())
    return run(no_window())


@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_one_row_gives_kv_tokens(name):
    torch.set_float32_matmul_precision("highest")
    model = build_model(name, "fp32", "cuda", seed=0)
    ref = decode(model, "kv", model=name)
    assert len(set(ref["tokens"][0, 1:10].tolist())) > 1
    for variant in ("mega", "while-mega"):
        got = decode(model, variant, model=name)
        assert torch.equal(got["tokens"][:, :ref["tokens"].shape[1]], ref["tokens"]), variant
        # stop_steps("uniform:66-78", 1, 80, 0) draws step 69 for the one row
        assert got["stop_step"] == ref["stop_step"] == 69


def test_bf16_tokens_do_not_depend_on_the_loop_or_the_run():
    torch.set_float32_matmul_precision("high")
    model = build_model("llama", "bf16", "cuda", seed=0)
    runs = [decode(model, v, dtype="bf16", matmul_precision="high", stop="none")
            for v in ("mega", "while-mega", "mega")]
    assert runs[0]["steps_run"] == NEW
    assert all(torch.equal(r["tokens"], runs[0]["tokens"]) for r in runs[1:])


def test_more_programs_than_the_sms_hold_is_refused_before_a_launch():
    model = build_model("llama", "bf16", "cuda", seed=0)
    cfg = config("mega", dtype="bf16")
    bos, eos = special_tokens(model.config)
    st = new_state(1, NEW, stop_steps(STOP, 1, NEW, 0), "cuda", 0, bos, eos)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    eager, kv = mega_eager(model, replace(cfg), st, per_sm=64)
    with pytest.raises(ConfigError, match=f"{64 * sms} programs"):
        eager()
    assert int(st["pos"][0]) == 0  # nothing ran
