"""The un-annotated programs of issue 27 (examples/nokv_loop.py, sample_generate.py,
window_generate.py) decode on the CPU at a tiny size, in this process (torch and transformers
imported once). On the GPU scripts/user-programs.sh profiles each with `gapscope profile`."""

import runpy
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example(name: str) -> dict:
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=name)


def run_main(monkeypatch, capsys, name: str, *args: str) -> str:
    monkeypatch.setattr(sys, "argv", [name, "--device", "cpu", "--size", "tiny", *args])
    assert example(name)["main"]() == 0
    return capsys.readouterr().out


def test_the_no_cache_loop_runs_the_whole_growing_sequence_every_step():
    nokv = example("nokv_loop")
    model = nokv["load"]("gpt2", "tiny", torch.float32, "cpu")
    seen = []
    forward = model.forward

    def recording(*args, **kwargs):
        seen.append((kwargs["input_ids"].shape[1], kwargs["attention_mask"].shape[1],
                     kwargs["use_cache"]))
        return forward(*args, **kwargs)

    model.forward = recording
    prompt = torch.randint(0, 1024, (2, 4), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    with torch.inference_mode():
        out = nokv["generate"](model, prompt, 3, temperature=0.8)
    assert out.shape == (2, 3)
    assert seen == [(4, 4, False), (5, 5, False), (6, 6, False)]


def test_the_sampled_generate_runs_a_llama_on_the_cpu(monkeypatch, capsys):
    out = run_main(monkeypatch, capsys, "sample_generate", "--batch", "2", "--new-tokens", "3",
                   "--runs", "1")
    assert out.startswith("sample_generate: run 1: llama, batch 2: 3 tokens, ")


def test_the_windowed_generate_runs_on_the_cpu_without_a_window(monkeypatch, capsys):
    out = run_main(monkeypatch, capsys, "window_generate", "--batch", "2", "--new-tokens", "3")
    assert out.startswith("window_generate: gpt2 dynamic cache, batch 2: 3 tokens, ")
