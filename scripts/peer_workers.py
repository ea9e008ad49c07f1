"""scripts/peer_gptfast.py's workers, one side and one batch a process: gpt-fast's decode_n_tokens
compiled as its generate.py --compile does, or one of our rungs; each warms up, times `--repeats`
decodes between two CUDA events and prints one JSON line."""

import statistics
import sys
import types
from contextlib import contextmanager
from dataclasses import replace

from .peer_models import gpt_fast_name, llama_config


@contextmanager
def cuda_span():
    """Elapsed ms between two CUDA events around the body (read after a synchronize)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    box = {}
    start.record()
    yield box
    end.record()
    end.synchronize()
    box["ms"] = start.elapsed_time(end)


def floor_ms(name: str, dtype_bytes: int, weight_bytes: int, variant: str, batch: int,
             tokens: int) -> tuple[float, float]:
    """harness/floor.py's floor of one step of this shape at the copy rate measured here, and
    that rate (bytes moved a second)."""
    from harness.bench import copy_bytes_per_s
    from harness.floor import floor, model_shape

    shape = model_shape(llama_config(name), dtype_bytes, weight_bytes)
    rate = copy_bytes_per_s("cuda")
    step = floor(shape, variant, batch, tokens, range(tokens), rate, None)
    return step["floor_ms_per_step"], rate


def gpt_fast_worker(args) -> dict:
    """gpt-fast's decode_n_tokens, compiled as its generate.py --compile does."""
    import torch

    sys.path.insert(0, str(args.gpt_fast.resolve()))
    stand_in_tokenizer_imports()
    import generate as gf  # gpt-fast's; it sets its inductor options on import

    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = gf.Transformer.from_name(gpt_fast_name(args.model))
    model = model.to(dtype=dtype).eval().requires_grad_(False)
    gf.decode_one_token = torch.compile(gf.decode_one_token, mode="reduce-overhead",
                                        fullgraph=True)
    b, n = args.batch, args.new_tokens
    sampling = dict(temperature=args.temperature, top_k=args.top_k)
    prompt = torch.full((b, 1), 1, dtype=torch.int, device="cuda")  # BOS, as ours
    with torch.device("cuda"):
        model.setup_caches(max_batch_size=b, max_seq_length=1 + n)

    def once() -> float:
        with torch.no_grad():
            token = gf.prefill(model, prompt, torch.arange(0, 1, device="cuda"), **sampling)
            pos = torch.tensor([1], device="cuda", dtype=torch.int)
            with cuda_span() as span:
                gf.decode_n_tokens(model, token.view(b, -1), pos, n - 1, **sampling)
        return span["ms"] / (n - 1)

    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return measure(once, args, f"top-k {args.top_k}, temperature {args.temperature} (its "
                   "sample(): softmax, an exponential draw, argmax)",
                   f"its decode_n_tokens() for {n - 1} tokens", weights, "graphed", dtype)


def stand_in_tokenizer_imports() -> None:
    """generate.py imports its tokenizer, which imports sentencepiece and tiktoken; the decode
    uses neither: where they are missing, empty modules stand in."""
    for name in ("sentencepiece", "tiktoken", "tiktoken.load"):
        try:
            __import__(name)
        except ImportError:
            module = types.ModuleType(name)
            module.load_tiktoken_bpe = None
            sys.modules[name] = module


def ours_worker(args) -> dict:

    from harness.config import RunConfig, validate
    from harness.instrument import loop_span_window, no_window
    from harness.model import weight_bytes
    from harness.run import load_model, make_decoder

    n = args.new_tokens
    cfg = validate(RunConfig(variant=args.worker, model=args.our_model, batch=args.batch,
                             new_tokens=n, dtype=args.dtype, device="cuda"))
    model = load_model(cfg)
    decode = make_decoder(model, cfg)

    def once() -> float:
        window = loop_span_window(n)
        result = decode(window)
        assert result["steps_run"] == n, result["steps_run"]
        return window.timeline.ms_per_step()

    dtype = next(model.parameters()).dtype
    report = measure(once, args, "greedy (argmax), then the stop schedule's bookkeeping",
                     f"steps 1-{n} of the decoder", weight_bytes(model), args.worker, dtype)
    tokens = decode(no_window())["tokens"]
    ref = make_decoder(model, replace(cfg, variant="kv"))(no_window())["tokens"]
    return report | {"tokens_equal_kv": float((tokens == ref)[:, 1:].float().mean())}


def measure(once, args, sampling: str, span: str, weights: int, floor_variant: str, dtype) -> dict:
    import torch

    from harness.run import versions

    for _ in range(2):  # compile, capture, warm
        once()
    ms = [once() for _ in range(args.repeats)]
    floor, rate = floor_ms(args.model, torch.tensor([], dtype=dtype).element_size(), weights,
                           floor_variant, args.batch, args.new_tokens)
    return {"side": args.worker, "batch": args.batch, "ms_per_token": ms,
            "ms_per_token_median": statistics.median(ms), "sampling": sampling, "span": span,
            "floor_ms_per_token": floor, "copy_bytes_per_s": rate, "versions": versions()}
