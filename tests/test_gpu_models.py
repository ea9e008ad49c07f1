"""On the GPU: the ~100-150M size of each non-GPT-2 family (llama, qwen2, mistral, phi), fp32 at
"highest", batch 8, a uniform stop schedule; every generic variant against kv, and the static step
with no host sync. GPT-2 itself is tests/test_gpu_harness.py's. One family: `-k llama`
(the tests are grouped by family).
"""

import pytest
import torch

from harness.config import RunConfig, validate
from harness.instrument import no_window
from harness.model import build_model, special_tokens
from harness.run import make_decoder, tokens_sha256
from harness.stops import expected_stop_step, stop_steps
from harness.variants import set_expandable_segments

pytestmark = pytest.mark.gpu

BATCH, NEW, STOP = 8, 40, "uniform:10-30"
FAMILIES = ["llama", "qwen2", "mistral", "phi"]
GENERIC = ["naive", "kv-expandable", "static", "compiled", "pipelined", "pipelined-seed",
           "deferred", "check-every-k", "nocheck", "hf-generate"]

@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    """Module-scoped and parametrized: pytest runs the tests family by family, one model at a
    time on the GPU."""
    torch.set_float32_matmul_precision("highest")
    m = build_model(request.param, "fp32", "cuda", seed=0)
    yield request.param, m
    del m
    torch.cuda.empty_cache()


def decode(family, variant: str) -> dict:
    run = make_decoder(family[1], config(family[0], variant))
    run(no_window())
    return run(no_window())


def config(name: str, variant: str) -> RunConfig:
    return validate(RunConfig(variant=variant, model=name, batch=BATCH, new_tokens=NEW,
                              device="cuda", stop=STOP, matmul_precision="highest"))


@pytest.fixture(scope="module")
def reference(family):
    return decode(family, "kv")


def test_kv_stops_at_the_last_scheduled_step_with_the_family_eos(family, reference):
    bos, eos = special_tokens(family[1].config)
    stops = stop_steps(STOP, BATCH, NEW, seed=0)
    assert reference["stop_step"] == expected_stop_step(stops, NEW)
    assert (reference["tokens"][:, 0] == bos).all()
    for j, s in enumerate(stops.tolist()):
        assert (reference["tokens"][j, s:] == eos[0]).all()
    assert len(set(reference["tokens"][0, 1:10].tolist())) > 1  # not one repeated token


@pytest.mark.parametrize("variant", GENERIC)
def test_generic_variant_gives_kv_tokens_and_stop_step(family, reference, variant):
    try:
        result = decode(family, variant)
    finally:
        set_expandable_segments(False)  # kv-expandable turns it on for this process
    assert tokens_sha256(result["tokens"]) == tokens_sha256(reference["tokens"])
    assert result["stop_step"] == reference["stop_step"]


def test_static_step_makes_no_host_sync(family, reference):
    # RoPE from the position tensor and the 4D mask as given: nothing in the step reads the device.
    run = make_decoder(family[1], config(family[0], "static"))
    run(no_window())
    torch.cuda.set_sync_debug_mode("error")
    try:
        result = run(no_window())
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.equal(result["tokens"], reference["tokens"])
