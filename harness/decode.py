"""Pieces every variant shares: decode state, one token's bookkeeping, the two loops, the result.

Step i (from 1) feeds the token at position i - 1 and writes token i. All bookkeeping stays on the
device (positions, the stop schedule, the finished mask, the all-finished history), so the only host
syncs are the ones a variant chooses: the reads in `read_flag` and the final copy in `finish`.
"""

from contextlib import contextmanager, nullcontext

import torch

from .instrument import (
    ProfilerWindow,
    check_range,
    close_window,
    forward_range,
    step_range,
    window_step,
)


def new_state(batch: int, new_tokens: int, stops: torch.Tensor, device: str,
              sleep_cycles: int, bos: int, eos: tuple[int, ...]) -> dict:
    """bos, eos: the model's ids (harness.model.special_tokens); eos[0] is the one forced."""
    st = {
        "ids": torch.empty(batch, new_tokens + 1, dtype=torch.long, device=device),  # [B, N+1]
        "token": torch.empty(batch, 1, dtype=torch.long, device=device),  # [B, 1]: next input
        "pos": torch.empty(1, dtype=torch.long, device=device),  # [1]: position of token = step - 1
        "finished": torch.empty(batch, dtype=torch.bool, device=device),  # [B]
        "done": torch.empty(new_tokens + 1, dtype=torch.bool, device=device),  # [N+1]: all finished
        "stops": stops.to(device),  # [B]: step at which sequence j is forced to emit EOS
        "eos_ids": torch.tensor(eos, dtype=torch.long, device=device),  # [E]: any one finishes
        "bos": bos,
        "eos": eos[0],
        "new_tokens": new_tokens,
        "sleep_cycles": sleep_cycles,
    }
    reset_state(st)
    return st


def reset_state(st: dict) -> None:
    """In place, so buffers captured in a CUDA graph or guarded by torch.compile stay the same."""
    st["ids"].fill_(st["bos"])  # column 0 is BOS (in GPT-2 it is EOS); the rest is written
    st["token"].fill_(st["bos"])
    st["pos"].zero_()
    st["finished"].zero_()  # the BOS input never counts as finished: only emitted tokens do
    st["done"].zero_()


def state_tensors(st: dict) -> list[torch.Tensor]:
    return [v for v in st.values() if isinstance(v, torch.Tensor)]


def advance(st: dict, logits: torch.Tensor) -> torch.Tensor:
    """Greedy token for this step, stop schedule applied; returns the all-finished flag [1] bool."""
    return advance_tokens(st, logits.argmax(-1))


def advance_tokens(st: dict, nxt: torch.Tensor) -> torch.Tensor:
    """advance() from the greedy tokens nxt [B] (long) already chosen."""
    if st["sleep_cycles"]:
        torch.cuda._sleep(st["sleep_cycles"])  # test-only: a slow GPU lets the host run ahead
    step = st["pos"] + 1  # [1]
    fin = st["finished"]
    # Due or finished: the forced EOS (as generate pads); an EOS id the model picks stays as is.
    nxt = torch.where(fin | (step >= st["stops"]), st["eos"], nxt)
    fin |= (nxt[:, None] == st["eos_ids"]).any(-1)
    st["ids"].index_copy_(1, step, nxt[:, None])
    st["token"].copy_(nxt[:, None])
    flag = fin.all().view(1)
    st["done"].index_copy_(0, step, flag)
    st["pos"].add_(1)
    return flag


SYNC_DEBUG_ERROR = 2  # torch.cuda.get_sync_debug_mode(): 0 default, 1 warn, 2 error


@contextmanager
def allow_sync(device: torch.device):
    """Around the syncs a variant means to make: all else may run under sync debug mode 'error'.
    Only "error" is lifted: under "warn" (gapscope profile's hook turns it on to mark each sync's
    line, GAPSCOPE_SYNC_MARKS) the sync a variant means to make is still one, and named."""
    if device.type != "cuda" or torch.cuda.get_sync_debug_mode() != SYNC_DEBUG_ERROR:
        yield
        return
    mode = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(0)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(mode)


def read_flag(flag: torch.Tensor) -> bool:
    with allow_sync(flag.device):
        return bool(flag.item())


def sync_loop(st: dict, step, window: ProfilerWindow, every: int | None) -> dict:
    """Read the all-finished flag with .item() after every `every`-th step (None: never)."""
    n = st["new_tokens"]
    reset_state(st)
    steps = 0
    for i in range(1, n + 1):
        with window_step(window, i), step_range(i):
            # The stop check's copy to the host falls outside the timed span, into the bubble.
            with forward_range(), window.timeline.span(i):
                flag = step(i)
            steps = i
            stop = False
            if every is not None and i % every == 0:
                with check_range():
                    stop = read_flag(flag)
        if stop:
            break
    close_window(window, steps)
    return finish(st, steps, None)


def deferred_loop(st: dict, step, window: ProfilerWindow, streams: list, wait_event: bool,
                  shared=lambda: []) -> dict:
    """Launch step i, then read step i-1's flag from pinned memory: the GPU is never left empty.

    Step i runs on streams[i % 2]; its flag is copied non_blocking into pinned slot i % 2 and an
    event is recorded behind the copy. With wait_event the host reads the slot only once that event
    has completed; without it (pipelined-seed) it may read the value of step i - 3 still there.
    On the CPU (streams [None, None]) the same order runs synchronously: no stream, no event.
    `shared()` lists tensors, beyond the state, that several streams use (a cache allocated lazily).
    """
    n = st["new_tokens"]
    reset_state(st)
    cuda = streams[0] is not None
    if "slots" not in st:  # made once: a pinned allocation is no part of a step
        st["slots"] = [torch.zeros(1, dtype=torch.bool, pin_memory=cuda) for _ in range(2)]
        st["events"] = [torch.cuda.Event() if cuda else None for _ in range(2)]
    slots, events = st["slots"], st["events"]
    for slot in slots:
        slot.zero_()  # the last run's True must not be read as this run's (pipelined-seed would)
    main = torch.cuda.current_stream() if cuda else None
    for s in _distinct(streams):
        s.wait_stream(main)  # reset_state's writes come first
    reads = []  # (step whose flag the host meant to read, value it acted on)
    steps = 0
    for i in range(1, n + 1):
        s, prev = streams[i % 2], streams[(i - 1) % 2]
        with window_step(window, i), step_range(i):
            if s is not prev:
                s.wait_stream(prev)  # step i reads step i-1's token, position and cache
            with _on(s), forward_range(), window.timeline.span(i):
                flag = step(i)
                slots[i % 2].copy_(flag, non_blocking=cuda)
                if cuda:
                    events[i % 2].record(s)
            steps = i
            stop = False
            if i > 1:
                with check_range():
                    if wait_event and cuda:
                        with allow_sync(flag.device):
                            events[(i - 1) % 2].synchronize()
                    stop = bool(slots[(i - 1) % 2][0])
                    reads.append((i - 1, stop))
        if stop:
            break
    close_window(window, steps)
    for s in _distinct(streams):
        main.wait_stream(s)
        # Tensors allocated on one stream and used on another: freeing them must wait for both.
        for t in state_tensors(st) + shared():
            t.record_stream(s)
    return finish(st, steps, reads)


def _distinct(streams: list) -> list:
    return [s for j, s in enumerate(streams) if s is not None and s not in streams[:j]]


def _on(stream):
    return torch.cuda.stream(stream) if stream is not None else nullcontext()


def finish(st: dict, steps_run: int, reads: list | None) -> dict:
    """Trim to the step where all sequences finished (or steps_run); later steps are overshoot."""
    with allow_sync(st["ids"].device):
        done = st["done"].cpu()
        ids = st["ids"].cpu()
    finished_at = torch.nonzero(done[1 : steps_run + 1]).flatten()
    stop_step = int(finished_at[0]) + 1 if len(finished_at) else None
    returned = stop_step if stop_step is not None else steps_run
    stale = None if reads is None else sum(v != bool(done[j]) for j, v in reads)
    return {
        "tokens": ids[:, : returned + 1],  # [B, returned + 1]: column 0 is BOS
        "steps_run": steps_run,
        "stop_step": stop_step,
        "overshoot_steps": steps_run - returned,
        "stale_flag_reads": stale,
    }
