"""The `mega` step (issue 42): a Llama-family decode step in one persistent kernel launch.

harness/mega_schedule.py deals the step's tasks (the GEMV blocks of every layer, the attention
of each (row, head), the head's blocks, the greedy pick) over one program per SM; the kernel
(harness/mega_kernel.py) runs them with counters where `fused` has kernel boundaries. On CUDA
the step is that one launch; elsewhere (the CPU tests) `simulate` plays the same schedule with
torch's ops, task by task, in an interleaving of the programs the caller picks: the schedule's
dependencies are checked by the tokens coming out equal to `kv`'s.

The step's math is `fused`'s GEMV path with every projection on Triton (no cuBLAS, no split-K),
and in fp32 at "highest" its tokens are `kv`'s. In bf16 they are not always `fused`'s: one row's
GEMVs add each dot product in another order (per-column partial sums over a block of K, summed
at the end), so a near tie between two logits can go the other way.
"""

import random

import torch
import torch.nn.functional as F

from . import mega_schedule as S
from .config import ConfigError
from .decode import advance_tokens, allow_sync
from .llama_fused import check_fused
from .llama_ops import GEMV_MAX_BATCH, rms_ref
from .llama_step import new_llama_cache
from .triton_ops import missing_triton, triton, use_triton

# Launch settings, chosen by docs/mega-20261204/probe.py's sweeps on the H200 (their outputs were
# not kept: docs/mega-20261204/README.md).
MEGA_WARPS = 8  # more rows (tl.dot); one row: warps_for
MEGA_STAGES = 2
MEGA_BLOCK_K = {2: 256, 4: 128}  # tl.dot's blocks (more than one row), by the dtype's size
MEGA_PER_SM = 1  # programs an SM
FMA_BLOCK = 16384  # one row: weights a block holds (all its projections), a loop turn ahead
SPIN = 1 << 18  # reads of a counter before a wait gives up and marks `err` (~0.2 s)
CPU_PROGRAMS = 3  # the host's simulated programs: more than one, so interleavings happen
SM_ATTR = "multi_processor_count"


def check_mega(model, batch: int, new_tokens: int) -> None:
    check_fused(model, new_tokens, 1)
    if batch > GEMV_MAX_BATCH:
        raise ConfigError(f"mega holds at most {GEMV_MAX_BATCH} rows in its GEMV tiles, not "
                          f"--batch {batch}")
    for block in model.model.layers:
        projections = (block.self_attn.o_proj, block.mlp.gate_proj, block.mlp.up_proj,
                       block.mlp.down_proj)
        if any(p.bias is not None for p in projections):
            raise ConfigError("mega adds biases to q, k and v only: this model's o_proj or MLP "
                              "has one")


def mega_eager(model, cfg, st: dict, **kw):
    """(the mega step as one call that returns the all-finished flag [1], its cache); kw go to
    new_mega_llama (the sweeps' launch settings)."""
    if why := missing_triton(st["ids"].device.type):
        raise ConfigError(why)
    check_mega(model, cfg.batch, cfg.new_tokens)
    kv = new_mega_llama(model, cfg.batch, cfg.new_tokens, **kw)
    return (lambda: mega_llama_step(model, kv, st)), kv


def checked(run, kv: dict):
    """run, then the kernel's error mark read once (a wait that gave up)."""
    def run_checked(window):
        result = run(window)
        check_err(kv)
        return result

    return run_checked


def shape_of(model, batch: int) -> S.Shape:
    c = model.config
    heads = c.num_attention_heads
    return S.Shape(layers=c.num_hidden_layers, batch=batch, heads=heads,
                   kv_heads=getattr(c, "num_key_value_heads", None) or heads,
                   head_dim=getattr(c, "head_dim", None) or c.hidden_size // heads,
                   hidden=c.hidden_size, intermediate=c.intermediate_size, vocab=c.vocab_size)


def programs_for(device: torch.device, per_sm: int = 1) -> int:
    """per_sm programs an SM (the first launch checks that they fit: `resident`)."""
    if device.type != "cuda":
        return CPU_PROGRAMS
    return per_sm * getattr(torch.cuda.get_device_properties(device), SM_ATTR)


def new_mega_llama(model, batch: int, max_len: int, programs: int | None = None,
                   tiles: dict | None = None, warps: int | None = None,
                   stages: int | None = None, fma_block: int | None = None,
                   per_sm: int | None = None) -> dict:
    """The step's cache, buffers, address table and schedule; the launch settings (warps, stages,
    fma_block: MEGA_WARPS, MEGA_STAGES, FMA_BLOCK where None) for the sweeps that chose those."""
    kv = new_llama_cache(model, batch, max_len)
    p = next(model.parameters())
    s = shape_of(model, batch)
    sched = S.build(s, programs or programs_for(p.device, per_sm or MEGA_PER_SM), tiles)
    m = model.model
    hd = s.heads * s.head_dim
    kv.update(sched=sched, sched_t=S.tensors(sched, p.device),
              x=p.new_empty(batch, s.hidden), qkv_out=p.new_empty(batch, kv["qkv"][0][0].shape[0]),
              y=p.new_empty(batch, hd), g=p.new_empty(batch, s.intermediate),
              pmax=p.new_empty(batch, sched.head_tiles(), dtype=torch.float32),
              pidx=p.new_empty(batch, sched.head_tiles(), dtype=torch.long),
              err=torch.zeros(1, dtype=torch.int32, device=p.device),
              scale=m.layers[0].self_attn.scaling, warps=warps, stages=stages, fma_block=fma_block,
              flag=torch.zeros(1, dtype=torch.bool, device=p.device))
    rows = []
    for layer, block in enumerate(m.layers):
        w_qkv, b_qkv = kv["qkv"][layer]
        rows.append([w_qkv.data_ptr(), b_qkv.data_ptr() if b_qkv is not None else 0,
                     block.self_attn.o_proj.weight.data_ptr(), kv["gate_up"][layer][0].data_ptr(),
                     block.mlp.down_proj.weight.data_ptr(),
                     block.input_layernorm.weight.data_ptr(),
                     block.post_attention_layernorm.weight.data_ptr()])
    kv["layer_table"] = torch.tensor(rows, dtype=torch.int64, device=p.device)
    return kv


def mega_llama_step(model, kv: dict, st: dict, pick=None) -> torch.Tensor:
    """One decode step; returns the all-finished flag [1] bool. On CPU tensors, the schedule
    played by `simulate` (pick: its choice of the next program, default a seeded random one)."""
    if use_triton(kv["x"]):
        return _launch(model, kv, st)
    rng = random.Random(int(st["pos"][0]))
    box = {}
    S.simulate(kv["sched"], lambda task: _run_task(model, kv, st, task, box),
               pick or (lambda ready: rng.choice(ready)))
    return box["flag"]


def _cols(tile: int, width: int, n: int) -> slice:
    return slice(tile * width, min(n, (tile + 1) * width))


def _run_task(model, kv: dict, st: dict, task: tuple, box: dict) -> None:
    """One task with torch's ops, on its block: what the kernel's task computes."""
    kind, layer, tile, _ = task
    m = model.model
    x, tiles = kv["x"], kv["sched"].tiles
    if kind == S.EMBED:
        x[tile] = m.embed_tokens.weight[st["token"][tile, 0]]
    elif kind == S.ADVANCE:
        pmax, pidx = kv["pmax"], kv["pidx"]
        box["flag"] = advance_tokens(st, pidx.gather(1, pmax.argmax(1, keepdim=True))[:, 0])
    elif kind == S.ATTN:
        _attention_one(kv, int(st["pos"][0]), layer, tile)
    elif kind == S.HEAD:
        cols = _cols(tile, tiles[S.HEAD], m.embed_tokens.weight.shape[0])
        head = model.lm_head
        bias = head.bias[cols] if head.bias is not None else None
        logits = F.linear(rms_ref(x, _norm(m.norm)), head.weight[cols], bias)
        best, where = logits.max(-1)
        kv["pmax"][:, tile], kv["pidx"][:, tile] = best.float(), where + cols.start
    else:
        block = m.layers[layer]
        if kind == S.QKV:
            w, b = kv["qkv"][layer]
            cols = _cols(tile, tiles[S.QKV], w.shape[0])
            kv["qkv_out"][:, cols] = F.linear(rms_ref(x, _norm(block.input_layernorm)), w[cols],
                                              b[cols] if b is not None else None)
        elif kind == S.GLU:
            w = kv["gate_up"][layer][0]
            n = w.shape[0] // 2
            cols = _cols(tile, tiles[S.GLU], n)
            h = rms_ref(x, _norm(block.post_attention_layernorm))
            up = slice(cols.start + n, cols.stop + n)
            kv["g"][:, cols] = F.silu(F.linear(h, w[cols])) * F.linear(h, w[up])
        else:
            w = (block.self_attn.o_proj if kind == S.O else block.mlp.down_proj).weight
            cols = _cols(tile, tiles[kind], w.shape[0])
            x[:, cols] += F.linear(kv["y"] if kind == S.O else kv["g"], w[cols])


def _attention_one(kv: dict, pos: int, layer: int, tile: int) -> None:
    """One (row, query head): rotary on q and its KV head's k, K and V written at pos by the
    group's first head, softmax(q K / sqrt d) V over slots 0..pos (the new slot's k and v from
    this task's own, as the kernel takes them from registers)."""
    h_all, g_all, d = kv["heads"], kv["kv_heads"], kv["head_dim"]
    b, h = divmod(tile, h_all)
    g = h // (h_all // g_all)
    row = kv["qkv_out"][b]
    c, s = kv["cos"][pos], kv["sin"][pos]
    q = row[h * d:(h + 1) * d]
    k = row[(h_all + g) * d:(h_all + g + 1) * d]
    v = row[(h_all + g_all + g) * d:(h_all + g_all + g + 1) * d]
    q, k = q * c + q.roll(d // 2) * s, k * c + k.roll(d // 2) * s
    kc, vc = kv["k"][layer, b, g], kv["v"][layer, b, g]  # [T, D]
    if h % (h_all // g_all) == 0:
        kc[pos], vc[pos] = k, v
    keys = torch.cat([kc[:pos], k[None]])
    vals = torch.cat([vc[:pos], v[None]])
    scale = kv["scale"]
    kv["y"][b, h * d:(h + 1) * d] = ((keys @ q) * scale).softmax(-1) @ vals


def _norm(norm) -> tuple:
    return norm.weight, norm.variance_epsilon


def _launch(model, kv: dict, st: dict) -> torch.Tensor:
    from .mega_kernel import _mega_kernel

    if st["sleep_cycles"]:
        torch.cuda._sleep(st["sleep_cycles"])  # test-only: a slow GPU lets the host run ahead
    m, sched, t = model.model, kv["sched"], kv["sched_t"]
    s = sched.shape
    x, head = kv["x"], model.lm_head
    cache = kv["k"]
    e = st["eos_ids"].numel()
    half = s.head_dim // 2
    args = (
        t["lists"], t["counts"], t["tasks"], t["targets"], t["counters"], kv["err"], t["most"],
        sched.counters, kv["layer_table"], m.embed_tokens.weight, m.norm.weight, head.weight,
        head.bias if head.bias is not None else head.weight,
        x, kv["qkv_out"], kv["y"], kv["g"], kv["pmax"], kv["pidx"], sched.head_tiles(),
        cache, kv["v"], cache.stride(0), cache.stride(1), cache.stride(2), cache.stride(3),
        kv["cos"], kv["sin"], st["token"], st["pos"], st["ids"], st["ids"].stride(0),
        st["finished"].view(torch.uint8), st["done"].view(torch.uint8), st["stops"],
        st["eos_ids"], kv["flag"].view(torch.uint8), s.batch, e, st["eos"],
        m.layers[0].input_layernorm.variance_epsilon, m.norm.variance_epsilon, kv["scale"])
    consts = dict(
        C=s.hidden, I=s.intermediate, NQKV=kv["qkv_out"].shape[1], V=s.vocab, H=s.heads,
        KVH=s.kv_heads, HALF=half, HALF_P=triton.next_power_of_2(half),
        QKV_BIAS=kv["qkv"][0][1] is not None, HEAD_BIAS=head.bias is not None,
        IEEE=x.dtype == torch.float32 and torch.get_float32_matmul_precision() == "highest",
        BN_QKV=sched.tiles[S.QKV], BN_O=sched.tiles[S.O], BN_GLU=sched.tiles[S.GLU],
        BN_DOWN=sched.tiles[S.DOWN], BN_HEAD=sched.tiles[S.HEAD],
        **block_ks(sched, x.element_size(), kv.get("fma_block") or FMA_BLOCK),
        FMA=s.batch == 1, C_P=triton.next_power_of_2(s.hidden),
        I_P=triton.next_power_of_2(s.intermediate), HD_P=triton.next_power_of_2(half * 2 * s.heads),
        BLOCK_M=GEMV_MAX_BATCH,
        BLOCK_T=64, BLOCK_C=min(1024, triton.next_power_of_2(s.hidden)),
        BLOCK_B=max(2, triton.next_power_of_2(s.batch)), CHUNK=256,
        BLOCK_E=max(2, triton.next_power_of_2(e)),
        BLOCK_CTR=triton.next_power_of_2(sched.counters), SPIN=SPIN,
        num_warps=kv.get("warps") or warps_for(s), num_stages=kv.get("stages") or MEGA_STAGES)
    if "resident" not in kv and x.is_cuda:  # once: all programs resident, or waits never end
        kv["resident"] = resident(_mega_kernel.warmup(*args, grid=(1,), **consts), kv, x.device)
    _mega_kernel[(sched.programs,)](*args, **consts)
    return kv["flag"]


def resident(compiled, kv: dict, device) -> dict:
    """The compiled kernel's registers and shared memory, and how many of its programs an SM
    holds at once; ConfigError where the schedule has more programs than all SMs hold."""
    compiled._init_handles()
    props = torch.cuda.get_device_properties(device)
    warps = compiled.metadata.num_warps
    regs_per_warp = -(-compiled.n_regs * 32 // 256) * 256  # allocated 256 at a time
    per_sm = min(getattr(props, "regs_per_multiprocessor", 65536) // (regs_per_warp * warps),
                 getattr(props, "max_threads_per_multi_processor", 2048) // (32 * warps),
                 getattr(props, "shared_memory_per_multiprocessor", 233472)
                 // max(1, compiled.metadata.shared))
    programs, sms = kv["sched"].programs, getattr(props, SM_ATTR)
    if programs > per_sm * sms:
        raise ConfigError(f"mega: {programs} programs, but {sms} SMs hold {per_sm * sms} of its "
                          f"({compiled.n_regs} registers a thread, {warps} warps): some would "
                          "wait for ones that never start")
    return {"registers": compiled.n_regs, "spills": compiled.n_spills,
            "shared_bytes": compiled.metadata.shared, "per_sm": per_sm}


def warps_for(s: S.Shape) -> int:
    """One row: 16 warps from 2048 wide (Llama-3.2-1B and up), 8 below; more rows MEGA_WARPS."""
    if s.batch > 1:
        return MEGA_WARPS
    return 16 if s.hidden >= 2048 else 8


def block_ks(sched: S.Schedule, itemsize: int, fma_block: int) -> dict:
    """Each GEMV kind's K block: one row (FMA), fma_block weights a block over its columns (and
    both of the gated MLP's weights), 32..1024; more rows, MEGA_BLOCK_K's tl.dot blocks."""
    out = {}
    for kind in (S.QKV, S.O, S.GLU, S.DOWN, S.HEAD):
        if sched.shape.batch > 1:
            bk = MEGA_BLOCK_K[itemsize]
        else:
            per = fma_block // (sched.tiles[kind] * (2 if kind == S.GLU else 1))
            bk = max(32, min(1024, 1 << max(0, per.bit_length() - 1)))
        out["BK_" + S.KIND_NAMES[kind].upper()] = bk
    return out


def check_err(kv: dict) -> None:
    """After a run: a wait that gave up (the kernel marked err) is an error, not a result. One
    read a run, after its last step (not a step's sync)."""
    with allow_sync(kv["err"].device):
        failed = int(kv["err"][0])
    if failed:
        raise RuntimeError("mega: a task waited past its limit for its counter (programs not all "
                           "resident, or a wrong schedule): the tokens are not to be trusted")
