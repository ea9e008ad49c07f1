"""Seeded stop schedules: random weights never emit EOS, so sequence j is forced to at step s_j."""

import math

import torch

from .config import parse_stop


def stop_steps(spec: str, batch: int, new_tokens: int, seed: int) -> torch.Tensor:
    """[B] int64 on the CPU: the step at which sequence j emits EOS; new_tokens + 1 means never."""
    stop = parse_stop(spec)
    never = new_tokens + 1
    gen = torch.Generator().manual_seed(seed)
    if stop[0] == "none":
        return torch.full((batch,), never, dtype=torch.long)
    if stop[0] == "fixed":
        return torch.full((batch,), stop[1], dtype=torch.long)
    if stop[0] == "uniform":
        return torch.randint(stop[1], stop[2] + 1, (batch,), generator=gen, dtype=torch.long)
    return _geometric(stop[1], batch, gen).clamp(max=never)


def _geometric(p: float, batch: int, gen: torch.Generator) -> torch.Tensor:
    # Inverse CDF of the number of trials to the first success: P(s = n) = (1 - p)^(n - 1) p.
    if p == 1.0:
        return torch.ones(batch, dtype=torch.long)
    u = torch.rand(batch, generator=gen, dtype=torch.float64)
    trials = torch.ceil(torch.log1p(-u) / math.log1p(-p))
    return trials.clamp(min=1, max=2**40).long()


def expected_stop_step(steps: torch.Tensor, new_tokens: int) -> int | None:
    """The step at which every sequence has finished; None when one never does in new_tokens."""
    last = int(steps.max())
    return last if last <= new_tokens else None
