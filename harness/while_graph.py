"""while-graph and while-fused: the whole decode loop in one CUDA graph launch (issue 32).

`graphed`'s step (or `fused`'s) is captured once, as they capture it, and kept as a cudaGraph_t
(`torch.cuda.CUDAGraph(keep_graph=True)`); harness/cuda_loop.py clones it into the body of a
WHILE node, behind which a one-thread kernel sets the loop's condition. One cuGraphLaunch then
runs step after step on the GPU until every sequence has finished (the flag the step's `advance`
computes: EOS, or the stop schedule forcing it) or --new-tokens steps have run. The host waits
once, at the end, and reads the steps run (the position), the tokens and the per-step record of
who had finished (decode.finish). No host round trip and no launch between steps, and no
overshoot: the flag is read on the device right after the step that sets it.

The same step, the same bookkeeping: the tokens and the stop step are `graphed`'s. On the CPU
(the tests) `eager_loop` runs the loop step by step with `next_condition` in place of the kernel.
"""

import torch

from .decode import allow_sync, finish, reset_state
from .gpt2_step import capture
from .instrument import whole_run

TIMELINE_SOURCE = "gpu-globaltimer"  # untraced_steps.json's `source` for this loop's marks


def next_condition(done: bool, steps: int, limit: int) -> bool:
    """The loop kernel's rule (cuda_loop.SOURCE, gapscope_while_next) after `steps` steps: go on
    while some sequence is unfinished and fewer than `limit` steps have run."""
    return not done and steps < limit


def eager_loop(st: dict, step) -> dict:
    """The WHILE node's loop on the host, step by step (the condition starts at 1: the first step
    always runs): what the launch does, for the CPU tests."""
    reset_state(st)
    go, steps = True, 0
    while go:
        flag = step()
        steps = int(st["pos"][0])
        go = next_condition(bool(flag[0]), steps, st["new_tokens"])
    return finish(st, steps, None)


def while_loop(st: dict, new_tokens: int, eager, graph: bool = True):
    """run(window) for the step `eager` (returns the all-finished flag [1]): one launch of the
    WHILE graph a run; graph=False runs eager_loop (on the CPU too)."""
    if not graph:
        return lambda window: eager_loop(st, eager)
    from . import cuda_loop

    cu = cuda_loop.bindings()  # one line where cuda-python or the driver cannot do it
    g, flag = capture(eager, warmups=min(3, new_tokens), keep_graph=True)
    kernels = cuda_loop.compile_kernels(cu, torch.cuda.get_device_capability())
    pos = st["pos"]
    stamps = torch.zeros(2, new_tokens, dtype=torch.int64, device=pos.device)  # start, end
    loops = {}

    def loop(timed: bool):
        """The plain loop, or (timed) the one that stamps each step: built once each."""
        if timed not in loops:
            marks = (stamps[0].data_ptr(), stamps[1].data_ptr()) if timed else (0, 0)
            loops[timed] = cuda_loop.assemble(cu, g.raw_cuda_graph(), kernels, flag.data_ptr(),
                                              pos.data_ptr(), new_tokens, *marks)
        return loops[timed]

    loop(False)  # now: a driver that refuses the graph says so before any run
    stream = torch.cuda.current_stream()

    def run(window):
        timed = window.timeline.on
        reset_state(st)
        with whole_run(window):
            cuda_loop.launch(cu, loop(timed), stream.cuda_stream)
            with allow_sync(pos.device):
                steps = int(pos.item())  # the one wait: the launch has ended
        if timed:
            with allow_sync(pos.device):
                start, end = stamps[:, :steps].tolist()
            window.timeline.set_stamps(start, end, TIMELINE_SOURCE)
        return finish(st, steps, None)

    run.held = (g, flag, kernels, loops, stamps)  # the graph's memory and the loop's outlive it
    return run
