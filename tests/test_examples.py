"""The un-annotated example programs (examples/) decode correctly on the CPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

import decode_loop  # noqa: E402
import toy_lm  # noqa: E402


def tiny_model(batch: int, max_len: int):
    torch.manual_seed(0)
    return toy_lm.ToyLM(vocab=1024, dim=64, layers=2, heads=4, ffn=128, batch=batch,
                        max_len=max_len).eval()


def test_toy_lm_cached_decode_gives_the_tokens_of_full_recomputation():
    model = tiny_model(batch=2, max_len=24)
    prompt = torch.randint(0, 1024, (2, 8), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        cached = decode_loop.generate(model, prompt, 10, toy_lm.decode_one_token, None, eos=-1)
        ids = prompt
        for _ in range(10):
            logits = model(ids, torch.arange(ids.shape[1]))[:, -1]
            ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
    assert cached.shape == (2, 10)
    assert torch.equal(cached, ids[:, 8:])


def test_decode_loop_stops_when_every_sequence_emits_eos():
    model = tiny_model(batch=1, max_len=24)
    prompt = torch.randint(0, 1024, (1, 8), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        full = decode_loop.generate(model, prompt, 10, toy_lm.decode_one_token, None, eos=-1)
        eos = int(full[0, 3])
        first = int((full[0] == eos).nonzero()[0])
        cut = decode_loop.generate(model, prompt, 10, toy_lm.decode_one_token, None, eos=eos)
    assert cut.shape[1] == first + 1
    assert torch.equal(cut, full[:, :first + 1])
