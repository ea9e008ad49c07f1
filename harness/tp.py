"""Tensor parallelism (`--tp N`), Megatron-style, over torch.distributed (launched by torchrun).

Every rank builds the same full model from the same seed, then keeps its shard:
    column-parallel  GPT-2's attn.c_attn (Q, K and V each by heads) and mlp.c_fc; llama's q/k/v
                     (by heads and KV heads), gate and up: each rank computes its heads/columns
    row-parallel     GPT-2's attn.c_proj and mlp.c_proj, llama's o_proj and down_proj: each rank
                     multiplies its rows, the partial outputs are summed by one all-reduce, then
                     the bias (once) is added
The embeddings, norms and lm_head stay replicated, so every rank computes the same logits and
tokens. Two all-reduces a layer, plus the stop check's: the all-finished flag is all-reduced
(MIN) on the device each step before any variant reads it (`agree`), so the ranks stop at the
same step even if their flags could differ; it adds no host sync (NCCL runs it on the GPU).
Backend: NCCL on CUDA (one GPU a rank: LOCAL_RANK), gloo on the CPU. torchrun sets RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; init_process_group reads them.
"""

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .config import ConfigError


def init(tp: int, device: str) -> None:
    """Join the process group torchrun set up: its size must be --tp."""
    world = os.environ.get("WORLD_SIZE")
    if world is None:
        raise ConfigError(f"--tp {tp} runs under torchrun: torchrun --nproc-per-node {tp} "
                          "-m harness run ... (WORLD_SIZE is unset)")
    if int(world) != tp:
        raise ConfigError(f"--tp {tp} needs torchrun --nproc-per-node {tp}, got WORLD_SIZE={world}")
    if device == "cuda":
        local = int(os.environ["LOCAL_RANK"])
        if local >= torch.cuda.device_count():
            raise ConfigError(f"--tp {tp}: rank {local} has no GPU of its own "
                              f"({torch.cuda.device_count()} here; NCCL needs one a rank)")
        torch.cuda.set_device(local)  # "cuda" below means this rank's GPU
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device == "cuda" else "gloo")


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def shard(model, tp: int) -> None:
    """In place: keep this rank's shard of every attention and MLP block."""
    c = model.config
    kv_heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    if c.num_attention_heads % tp or kv_heads % tp:
        raise ConfigError(f"--tp {tp} must divide the heads ({c.num_attention_heads}) and KV heads "
                          f"({kv_heads}) of --model")
    r = rank()
    if c.model_type == "gpt2":
        for block in model.transformer.h:
            _shard_gpt2_block(block, r, tp)
    else:  # llama (config.TP_FAMILIES)
        if c.intermediate_size % tp:
            raise ConfigError(f"--tp {tp} must divide the MLP width ({c.intermediate_size})")
        for layer in model.model.layers:
            _shard_llama_layer(layer, r, tp)


def _part(n: int, r: int, tp: int) -> slice:
    return slice(r * n // tp, (r + 1) * n // tp)


def _param(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t.contiguous(), requires_grad=False)


def _shard_gpt2_block(block, r: int, tp: int) -> None:
    attn, mlp = block.attn, block.mlp
    e = attn.embed_dim
    # c_attn is a Conv1D: weight [E, 3E], output Q | K | V, each E wide in head order.
    cols = torch.cat([torch.arange(e)[_part(e, r, tp)] + j * e for j in range(3)])
    _conv_columns(attn.c_attn, cols)
    attn.num_heads //= tp
    attn.embed_dim = attn.split_size = e // tp
    attn.c_proj = RowParallel.from_conv1d(attn.c_proj, _part(e, r, tp))
    inner = mlp.c_fc.nf
    _conv_columns(mlp.c_fc, torch.arange(inner)[_part(inner, r, tp)])
    mlp.c_proj = RowParallel.from_conv1d(mlp.c_proj, _part(inner, r, tp))


def _conv_columns(conv, cols: torch.Tensor) -> None:
    conv.weight = _param(conv.weight[:, cols])
    conv.bias = _param(conv.bias[cols])
    conv.nf = len(cols)


def _shard_llama_layer(layer, r: int, tp: int) -> None:
    attn, mlp = layer.self_attn, layer.mlp
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj):
        # Rows of a Linear are its outputs; heads are contiguous runs of head_dim rows, and a
        # rank's query heads use exactly its KV heads (KV heads divisible by tp).
        _linear_rows(proj, _part(proj.out_features, r, tp))
    attn.o_proj = RowParallel.from_linear(attn.o_proj, _part(attn.o_proj.in_features, r, tp))
    mlp.down_proj = RowParallel.from_linear(mlp.down_proj,
                                            _part(mlp.down_proj.in_features, r, tp))


def _linear_rows(linear: nn.Linear, rows: slice) -> None:
    linear.weight = _param(linear.weight[rows])
    if linear.bias is not None:
        linear.bias = _param(linear.bias[rows])
    linear.out_features = linear.weight.shape[0]


class RowParallel(nn.Module):
    """y = all_reduce(x_shard @ W_shard^T) + b: the input is the rank's slice of features (the
    column-parallel output before it), the output full and identical on every rank."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.weight = _param(weight)  # [out, in / tp], nn.Linear's layout
        self.bias = None if bias is None else _param(bias)

    @classmethod
    def from_conv1d(cls, conv, rows: slice) -> "RowParallel":
        return cls(conv.weight[rows].t(), conv.bias)  # Conv1D's weight is [in, out]

    @classmethod
    def from_linear(cls, linear: nn.Linear, cols: slice) -> "RowParallel":
        return cls(linear.weight[:, cols], linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight)
        dist.all_reduce(y)  # torch.compile traces it as a functional collective
        return y if self.bias is None else y + self.bias


def agree(flag: torch.Tensor) -> torch.Tensor:
    """The all-finished flag [1] bool, the same on every rank: finished only where all say so."""
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return flag


def rank_shape(shape: dict, tp: int) -> dict:
    """harness.floor.model_shape of one rank's shard (its weight bytes are measured): heads, KV
    heads and MLP width divided; hidden, head_dim and vocab whole (replicated)."""
    return {**shape, "heads": shape["heads"] // tp, "kv_heads": shape["kv_heads"] // tp,
            "intermediate": shape["intermediate"] // tp}


def record(tp: int, tokens_sha256: str, model) -> dict:
    """run.json's `tp`: the rank writing it (0), the group, its shard's parameters (run.json's
    `model` is the whole model's) and every rank's tokens (equal when the ranks agreed)."""
    shas = [None] * tp
    dist.all_gather_object(shas, tokens_sha256)
    return {"rank": rank(), "world_size": dist.get_world_size(), "backend": dist.get_backend(),
            "parameters_per_rank": sum(p.numel() for p in model.parameters()),
            "stop_agreement": "all_reduce MIN of the all-finished flag, every step, on the device",
            "tokens_sha256_by_rank": shas, "ranks_agree": len(set(shas)) == 1}


def close() -> None:
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
