"""The megakernel's schedule (issue 42): which program does which piece of a decode step, and which
counter each piece waits on. Plain Python and torch: the CPU tests check it, the kernel
(harness/mega_kernel.py) reads it from device tensors.

A step is a chain of phases, each a set of tasks no two of which depend on each other:

    EMBED         x = embed[token], a task a row
    per layer:
      QKV         qkv[:, tile] = rms(x) W_qkv^T (+ bias)              a task per block of columns
      ATTN        rotary, K and V at pos, attention for one (row, query head)
      O           x[:, tile] += y W_o^T
      GLU         g[:, tile] = silu(rms(x) W_gate^T) * (rms(x) W_up^T)
      DOWN        x[:, tile] += g W_down^T
    HEAD          the greedy token's partials of a block of the vocabulary (no logits written)
    ADVANCE       the token, the stop bookkeeping, the counters zeroed for the next step

Each task of phase p waits until counter p holds the number of tasks of phase p - 1 (counter 0
stays 0: the first phase waits on nothing), then adds 1 to counter p + 1. Every task reads what
the whole phase before it wrote (a GEMV reads all of x, the attention all of its head's columns):
the counters are the kernel boundaries, without the launch, the ramp-up and the tail.

Tasks are dealt round-robin over the programs, phase after phase, continuing where the last phase
stopped, and each program runs its own in phase order. All programs run at once (one per SM), and
a task only waits for an earlier phase, so the lowest unfinished phase always has a task that can
run: no deadlock. `simulate` plays it through on the host with any interleaving the caller picks.

Tile widths (`tile_n`) are chosen per projection so that the busiest program reads the fewest
columns, with a fixed cost per task: a phase ends when its busiest program does.
"""

from dataclasses import dataclass

EMBED, QKV, ATTN, O, GLU, DOWN, HEAD, ADVANCE = range(8)  # noqa: E741 (O: the o_proj)
KIND_NAMES = ("embed", "qkv", "attn", "o", "glu", "down", "head", "advance")
LAYER_KINDS = (QKV, ATTN, O, GLU, DOWN)
TASK_FIELDS = 4  # kind, layer, tile, phase
TILE_WIDTHS = (16, 32, 64, 128)  # a tl.dot needs 16 at least
TASK_COST_COLUMNS = 8  # a task's fixed cost (the wait, the norm's read of x) in columns' worth


@dataclass(frozen=True)
class Shape:
    """What the schedule needs of the model and the run."""

    layers: int
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int
    vocab: int


@dataclass(frozen=True)
class Schedule:
    shape: Shape
    programs: int
    tiles: dict  # kind -> output columns a task (the GEMV kinds)
    phases: list  # [(kind, layer, tasks)] in order
    tasks: list  # [(kind, layer, tile, phase)]
    lists: list  # per program: its task ids, in phase order

    @property
    def counters(self) -> int:
        """Counter p + 1 counts phase p's finished tasks; counter 0 is always 0."""
        return len(self.phases) + 1

    def targets(self) -> list[int]:
        """What a task of phase p waits for counter p to reach: phase p - 1's task count."""
        return [0] + [n for _, _, n in self.phases[:-1]]

    def head_tiles(self) -> int:
        return _cdiv(self.shape.vocab, self.tiles[HEAD])


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tile_n(n: int, programs: int) -> int:
    """The block of output columns a task computes, for a projection of n columns on `programs`
    programs: the least rounds x (width + TASK_COST_COLUMNS), the widest on a tie."""
    def cost(w):
        return _cdiv(_cdiv(n, w), programs) * (w + TASK_COST_COLUMNS), -w

    return min(TILE_WIDTHS, key=cost)


def phase_list(s: Shape, tiles: dict) -> list:
    qkv_cols = (s.heads + 2 * s.kv_heads) * s.head_dim
    width = {QKV: qkv_cols, O: s.hidden, GLU: s.intermediate, DOWN: s.hidden}
    phases = [(EMBED, 0, s.batch)]
    for layer in range(s.layers):
        for kind in LAYER_KINDS:
            n = s.batch * s.heads if kind == ATTN else _cdiv(width[kind], tiles[kind])
            phases.append((kind, layer, n))
    phases.append((HEAD, 0, _cdiv(s.vocab, tiles[HEAD])))
    phases.append((ADVANCE, 0, 1))
    return phases


def build(s: Shape, programs: int, tiles: dict | None = None) -> Schedule:
    """The schedule of one step on `programs` programs; `tiles` (kind -> width) overrides
    tile_n's choice."""
    if programs < 1:
        raise ValueError("the megakernel needs a program at least")
    qkv_cols = (s.heads + 2 * s.kv_heads) * s.head_dim
    chosen = {QKV: tile_n(qkv_cols, programs), O: tile_n(s.hidden, programs),
              GLU: tile_n(s.intermediate, programs), DOWN: tile_n(s.hidden, programs),
              HEAD: tile_n(s.vocab, programs)}
    chosen.update(tiles or {})
    phases = phase_list(s, chosen)
    tasks, lists, nxt = [], [[] for _ in range(programs)], 0
    for p, (kind, layer, n) in enumerate(phases):
        for tile in range(n):
            lists[nxt].append(len(tasks))
            tasks.append((kind, layer, tile, p))
            nxt = (nxt + 1) % programs
    return Schedule(s, programs, chosen, phases, tasks, lists)


def tensors(sched: Schedule, device) -> dict:
    """The schedule as the kernel reads it: tasks [T, TASK_FIELDS], each program's list [P, most]
    (padded with -1), counts [P], targets [phases] (int32), the counters (zeros)."""
    import torch

    most = max(len(t) for t in sched.lists)
    lists = [t + [-1] * (most - len(t)) for t in sched.lists]
    i32 = dict(dtype=torch.int32, device=device)
    return {"tasks": torch.tensor(sched.tasks, **i32).view(-1, TASK_FIELDS),
            "lists": torch.tensor(lists, **i32).view(sched.programs, most),
            "counts": torch.tensor([len(t) for t in sched.lists], **i32),
            "targets": torch.tensor(sched.targets(), **i32),
            "counters": torch.zeros(sched.counters, **i32),
            "most": most}


class Deadlock(RuntimeError):
    """No program can run its next task, and some have tasks left."""


def simulate(sched: Schedule, run_task, pick=None) -> list:
    """Plays the step through on the host as the kernel would: each program runs its tasks in
    order, a task only once its counter is reached. pick(runnable programs) -> the one that goes
    next (default: the lowest); run_task(task) does the work. Returns the tasks in the order run;
    raises Deadlock where the programs wait on each other."""
    pick = pick or min
    counters = [0] * sched.counters
    targets = sched.targets()
    at = [0] * sched.programs
    order = []
    while True:
        ready = [p for p in range(sched.programs) if at[p] < len(sched.lists[p])
                 and counters[sched.tasks[sched.lists[p][at[p]]][3]]
                 >= targets[sched.tasks[sched.lists[p][at[p]]][3]]]
        if not ready:
            if any(at[p] < len(sched.lists[p]) for p in range(sched.programs)):
                raise Deadlock(f"programs wait on each other at {at}")
            return order
        p = pick(ready)
        task = sched.tasks[sched.lists[p][at[p]]]
        run_task(task)
        order.append(task)
        counters[task[3] + 1] += 1
        at[p] += 1


def busiest(sched: Schedule) -> dict:
    """Per phase kind: the most tasks one program runs in a phase of that kind (its rounds)."""
    out = {}
    for kind, _, n in sched.phases:
        out[KIND_NAMES[kind]] = max(out.get(KIND_NAMES[kind], 0), _cdiv(n, sched.programs))
    return out
