"""The decode variants, by name. Each maker takes (model, cfg, state) and returns run(window).

    naive           no cache: the whole sequence every step (the article's baseline)
    kv              HF DynamicCache, .item() each step: the token-exact reference for all others
    kv-expandable   kv with expandable_segments: does the allocator's fragmentation change?
    static          HF StaticCache, eager, positions and mask as device tensors: no hidden syncs
    compiled        static + torch.compile: fewer, fused kernels, same per-step .item()
    pipelined       two streams, step i-1's flag read only after its copy's event: the sync hidden
    pipelined-seed  the article's ping-pong as written, no event wait: UNSAFE, may read a stale flag
    deferred        pipelined's deferred check on one stream: what the second stream buys
    check-every-k   .item() every K steps only: fewer syncs, overshoot < K
    graphed         own step in a CUDA graph, deferred check: gpt2, llama, qwen2, mistral (not phi)
    graphed-sync    graphed with .item() every step: the sync bubble once launches are cheap
    fused           graphed with Triton kernels, 8 ops a layer on GPT-2, 5 on the Llama family
    nocheck         no stop check at all, all N steps: the bound
    while-graph     graphed's step in a CUDA graph WHILE loop: one launch, the stop check on device
    while-fused     while-graph over fused's step (one branch): the fastest loop that stops on EOS
    mega            the Llama family's step in one persistent kernel: no kernel boundaries in it
    while-mega      while-graph over mega's step: the loop and the step, each one launch
    hf-generate     HF's generate(cache_implementation="static"): the reference (bench only)
"""

import inspect
import os

import torch
from transformers import (
    DynamicCache,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    StaticCache,
)

from .config import ConfigError, RunConfig, branch_count, check_every, compile_mode
from .decode import advance, deferred_loop, sync_loop
from .fused_step import fused_step, new_fused_cache, split
from .gpt2_step import capture, gpt2_logits, new_kv_cache
from .llama_fused import check_fused, fused_llama_step, new_fused_llama
from .llama_step import LLAMA_FAMILIES, check_llama, llama_logits, new_graphed_llama
from .triton_ops import missing_triton


def cache_kwarg(model) -> str:
    """transformers 5.17 names the cache `past_key_values`; later 5.x renamed it `cache`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def naive(model, cfg: RunConfig, st: dict):
    def step(i):
        logits = model(input_ids=st["ids"][:, :i], use_cache=False).logits[:, -1]  # [B, V]
        return advance(st, logits)

    return lambda window: sync_loop(st, step, window, every=1)


def kv(model, cfg: RunConfig, st: dict):
    kw = cache_kwarg(model)

    def step(i):
        logits = model(input_ids=st["token"], use_cache=True, **{kw: st["cache"]}).logits[:, -1]
        return advance(st, logits)

    def run(window):
        st["cache"] = DynamicCache(config=model.config)
        return sync_loop(st, step, window, every=1)

    return run


def kv_expandable(model, cfg: RunConfig, st: dict):
    set_expandable_segments(True)
    return kv(model, cfg, st)


def static(model, cfg: RunConfig, st: dict):
    cache, step = _static_step(model, cfg, st)
    every = check_every(cfg) or 1

    def run(window):
        cache.reset()
        return sync_loop(st, step, window, every=every)

    return run


def nocheck(model, cfg: RunConfig, st: dict):
    cache, step = _static_step(model, cfg, st)

    def run(window):
        cache.reset()
        return sync_loop(st, step, window, every=None)

    return run


def pipelined(model, cfg: RunConfig, st: dict):
    return _deferred(model, cfg, st, n_streams=2, wait_event=True)


def pipelined_seed(model, cfg: RunConfig, st: dict):
    return _deferred(model, cfg, st, n_streams=2, wait_event=False)


def deferred(model, cfg: RunConfig, st: dict):
    return _deferred(model, cfg, st, n_streams=1, wait_event=True)


def graphed(model, cfg: RunConfig, st: dict):
    return own_step(model, cfg, st, graph=True)


def graphed_sync(model, cfg: RunConfig, st: dict):
    return own_step(model, cfg, st, graph=True, deferred=False)


def fused(model, cfg: RunConfig, st: dict):
    return fused_own_step(model, cfg, st, graph=True)


def while_graph(model, cfg: RunConfig, st: dict, graph: bool = True):
    """graphed's step as the body of one WHILE graph (harness/while_graph.py); graph=False runs
    the same loop eagerly, step by step (on the CPU too)."""
    from .while_graph import while_loop

    return while_loop(st, cfg.new_tokens, own_eager(model, cfg, st), graph)


def while_fused(model, cfg: RunConfig, st: dict, graph: bool = True):
    """fused's step (one branch) as the body of one WHILE graph."""
    from .while_graph import while_loop

    return while_loop(st, cfg.new_tokens, fused_eager(model, cfg, st), graph)


def mega(model, cfg: RunConfig, st: dict, graph: bool = True):
    """The step in one persistent kernel (harness/llama_mega.py), `fused`'s loop: one graph launch
    a step, the flag read a step late. graph=False plays its schedule on the host (the CPU)."""
    from .llama_mega import checked, mega_eager

    eager, kv = mega_eager(model, cfg, st)
    return checked(_graphed_loop(st, cfg, eager, graph, True), kv)


def while_mega(model, cfg: RunConfig, st: dict, graph: bool = True):
    """mega's step as the body of one WHILE graph."""
    from .llama_mega import checked, mega_eager
    from .while_graph import while_loop

    eager, kv = mega_eager(model, cfg, st)
    return checked(while_loop(st, cfg.new_tokens, eager, graph), kv)


def hf_generate(model, cfg: RunConfig, st: dict):
    """One call of HF's generate; the stop schedule is forced through a logits processor.

    It has no per-step NVTX ranges (the loop is HF's), so it is a reference for `bench` only.
    """
    bos = torch.full_like(st["token"], st["bos"])  # [B, 1]
    eos = st["eos_ids"].tolist()
    force = LogitsProcessorList([ForceEos(st["stops"], st["eos"])])
    gen = GenerationConfig(max_new_tokens=cfg.new_tokens, do_sample=False,
                           cache_implementation="static", bos_token_id=st["bos"],
                           eos_token_id=eos, pad_token_id=eos[0])

    def run(window):
        # generate fills what `gen` leaves unset from model.generation_config: in its place for
        # the call, so that a model directory's generation_config.json (penalties, suppressed
        # tokens) cannot change what greedy decoding picks.
        own, model.generation_config = model.generation_config, gen
        try:
            out = model.generate(input_ids=bos, attention_mask=torch.ones_like(bos),
                                 generation_config=gen, logits_processor=force)  # [B, 1 + steps]
        finally:
            model.generation_config = own
        return generate_result(out, st["eos_ids"].cpu())

    return run


class ForceEos(LogitsProcessor):
    """Sequence j emits only EOS from step stops[j] on: the schedule, on the device, no sync."""

    def __init__(self, stops: torch.Tensor, eos: int):
        self.stops = stops  # [B]
        self.eos = eos

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        step = input_ids.shape[1]  # the token being chosen; BOS is position 0
        eos_only = torch.full_like(scores, float("-inf"))
        eos_only[:, self.eos] = 0
        return torch.where((self.stops <= step)[:, None], eos_only, scores)


def generate_result(out: torch.Tensor, eos_ids: torch.Tensor) -> dict:
    """generate's output in the shape of decode.finish's: trimmed where all sequences ended.
    eos_ids: [E] on the CPU; generate pads a finished sequence with the first."""
    ids = out.cpu()
    steps_run = ids.shape[1] - 1
    is_eos = (ids[:, 1:, None] == eos_ids).any(-1)  # [B, steps]
    ended = is_eos.cummax(dim=1).values.all(dim=0)  # [steps]: all finished by then
    done_at = torch.nonzero(ended).flatten()
    stop_step = int(done_at[0]) + 1 if len(done_at) else None
    returned = stop_step if stop_step is not None else steps_run
    return {"tokens": ids[:, : returned + 1], "steps_run": steps_run, "stop_step": stop_step,
            "overshoot_steps": steps_run - returned, "stale_flag_reads": None}


VARIANTS = {
    "naive": naive,
    "kv": kv,
    "kv-expandable": kv_expandable,
    "static": static,
    "compiled": static,  # the same loop: compile_mode(cfg) is "default" for it
    "pipelined": pipelined,
    "pipelined-seed": pipelined_seed,
    "deferred": deferred,
    "check-every-k": static,  # check_every(cfg) is K for it, None (every step) otherwise
    "graphed": graphed,
    "graphed-sync": graphed_sync,
    "fused": fused,
    "nocheck": nocheck,
    "while-graph": while_graph,
    "while-fused": while_fused,
    "mega": mega,
    "while-mega": while_mega,
    "hf-generate": hf_generate,
}


def variant_lines() -> list[str]:
    """One line per variant, from this module's docstring."""
    return [line.strip() for line in __doc__.splitlines() if line.strip().split(" ")[0] in VARIANTS]


def static_logits(model, cache, token, pos, slots, kw):
    """token: [B, 1], pos: [1], slots: [T] -> logits [B, V].

    Positions and the mask are given, as device tensors: left to itself, HF would infer positions
    from the cache and build a mask each step; a 4D mask it uses as given.
    """
    mask = (slots <= pos).view(1, 1, 1, -1)  # [1, 1, 1, T]
    out = model(input_ids=token, position_ids=pos.view(1, 1), attention_mask=mask, use_cache=True,
                **{kw: cache})
    return out.logits[:, -1]


def _static_step(model, cfg: RunConfig, st: dict):
    n = cfg.new_tokens
    cache = StaticCache(config=model.config, max_cache_len=n)
    slots = torch.arange(n, device=st["ids"].device)
    kw = cache_kwarg(model)
    # The cache allocates itself on its first update: do that now, outside any compile or stream.
    static_logits(model, cache, st["token"], st["pos"], slots, kw)
    cache.reset()
    mode = compile_mode(cfg)
    forward = static_logits
    if mode != "none":
        torch._dynamo.reset()  # a fresh compile per variant: no guards left from another one
        forward = torch.compile(static_logits, mode=mode)

    agree = _tp_agree(cfg)

    def step(i):
        return agree(advance(st, forward(model, cache, st["token"], st["pos"], slots, kw)))

    return cache, step


def _tp_agree(cfg: RunConfig):
    """--tp: the flag all-reduced across ranks (harness/tp.py), except where no one reads it."""
    if cfg.tp == 1 or cfg.variant == "nocheck":
        return lambda flag: flag
    from .tp import agree

    return agree


def _cache_tensors(cache) -> list[torch.Tensor]:
    return [t for lay in cache.layers for t in (lay.keys, lay.values, lay.cumulative_length)]


def _streams(st: dict, n_streams: int) -> list:
    if st["ids"].device.type != "cuda":
        return [None, None]
    if n_streams == 1:
        return [torch.cuda.current_stream()] * 2
    return [torch.cuda.Stream(), torch.cuda.Stream()]


def _deferred(model, cfg: RunConfig, st: dict, n_streams: int, wait_event: bool):
    cache, step = _static_step(model, cfg, st)
    streams = _streams(st, n_streams)

    def run(window):
        cache.reset()
        return deferred_loop(st, step, window, streams, wait_event, lambda: _cache_tensors(cache))

    return run


def own_step(model, cfg: RunConfig, st: dict, graph: bool, deferred: bool = True):
    """Our own step (GPT-2's, or the Llama family's), with the deferred check or
    (deferred=False) .item() every step; graph=False runs it eagerly (on the CPU too)."""
    return _graphed_loop(st, cfg, own_eager(model, cfg, st), graph, deferred)


def own_eager(model, cfg: RunConfig, st: dict):
    """Our own step as one call that returns the all-finished flag [1] (what a graph captures)."""
    if llama_family(model):
        check_llama(model, cfg.new_tokens)
        kv_cache, logits = new_graphed_llama(model, cfg.batch, cfg.new_tokens), llama_logits
    else:
        kv_cache, logits = new_kv_cache(model, cfg.batch, cfg.new_tokens), gpt2_logits
    if compile_mode(cfg) != "none":
        # Compiled for its fused kernels (fewer, so a shorter graph); captured below like eager.
        torch._dynamo.reset()
        logits = torch.compile(logits, mode=compile_mode(cfg), fullgraph=True)
    step = logits

    def eager():
        return advance(st, step(model, kv_cache, st["token"], st["pos"]))

    return eager


def llama_family(model) -> bool:
    return model.config.model_type in LLAMA_FAMILIES


def fused_own_step(model, cfg: RunConfig, st: dict, graph: bool, gemv: bool | None = None):
    """The fused step (harness/fused_step.py for GPT-2, over branch_count(cfg) micro-batches, each
    on a stream of its own on CUDA; harness/llama_fused.py for the Llama family, its GEMV path
    up to 16 rows unless `gemv` says otherwise); graph=False runs it eagerly (on the CPU:
    Triton's references)."""
    return _graphed_loop(st, cfg, fused_eager(model, cfg, st, gemv), graph, True)


def fused_eager(model, cfg: RunConfig, st: dict, gemv: bool | None = None):
    """The fused step as one call that returns the all-finished flag [1]."""
    device = st["ids"].device.type
    if why := missing_triton(device):
        raise ConfigError(why)
    if llama_family(model):
        check_fused(model, cfg.new_tokens, branch_count(cfg) or 1)
        kv = new_fused_llama(model, cfg.batch, cfg.new_tokens, gemv)
        return lambda: fused_llama_step(model, kv, st)
    kv_cache = new_fused_cache(model, cfg.batch, cfg.new_tokens)
    parts = split(cfg.batch, branch_count(cfg) or 1)
    streams = [torch.cuda.Stream() if device == "cuda" and len(parts) > 1 else None
               for _ in parts]
    nxt = torch.empty(cfg.batch, dtype=torch.long, device=st["ids"].device)  # [B]

    def eager():
        return fused_step(model, kv_cache, st, parts, streams, nxt)

    return eager


def _graphed_loop(st: dict, cfg: RunConfig, eager, graph: bool, deferred: bool):
    """run(window) for a step: captured in a CUDA graph and replayed (graph), or run eagerly;
    its flag read one step late (deferred) or with .item() every step."""
    streams = _streams(st, 1)
    if not graph:
        return lambda window: deferred_loop(st, lambda i: eager(), window, streams, True)
    g, flag = capture(eager, warmups=min(3, cfg.new_tokens))

    def replay(i):
        g.replay()
        return flag

    if not deferred:
        return lambda window: sync_loop(st, replay, window, every=1)
    return lambda window: deferred_loop(st, replay, window, streams, True)


def set_expandable_segments(on: bool) -> None:
    """Before CUDA initialises, via the environment (both names torch reads); after, directly."""
    value = f"expandable_segments:{on}"
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.memory._set_allocator_settings(value)
    else:
        os.environ["PYTORCH_ALLOC_CONF"] = value
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = value


def expandable_share() -> float | None:
    """Share of reserved CUDA bytes in expandable segments: what took effect (None off CUDA).

    1.0 when the setting was in place before CUDA started; below 1 when it was switched on later
    (the weights' segments predate it); 0.0 when off.
    """
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    segments = torch.cuda.memory_snapshot()
    total = sum(seg["total_size"] for seg in segments)
    expandable = sum(seg["total_size"] for seg in segments if seg.get("is_expandable", False))
    return expandable / total if total else None
