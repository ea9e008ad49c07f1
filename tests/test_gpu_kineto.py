"""On the GPU machine: one small program profiled by torch.profiler (and, with nsys there, by
nsys too): the Kineto reader on a real trace, eager steps and CUDA-graph replays."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from between_processes import agrees, committed_spread, gpu_time_agreement, same_counts

from analysis.measures.summary import analyze
from analysis.readers import load_trace

pytestmark = pytest.mark.gpu

STEPS = 8
# Even steps run eagerly, odd ones replay a captured graph; each ends in a blocking `.item()`.
# PROFILER is "kineto" (record_function ranges, torch.profiler) or "nsys" (NVTX, profiler range).
PROGRAM = """
import sys
import torch
from torch.profiler import ProfilerActivity, profile, record_function
kineto = sys.argv[1] == "kineto"
x = torch.randn(512, 512, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        y = torch.tanh(x @ x) + 1
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    out = torch.tanh(x @ x) + 1
for _ in range(3):
    (torch.tanh(x @ x) + 1).sum().item()
torch.cuda.synchronize()


def rng(name):
    return record_function(name) if kineto else torch.cuda.nvtx.range(name)


prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) if kineto else None
prof.start() if kineto else torch.cuda.profiler.start()
for i in range(STEPS):
    with rng(f"Step {i}"):
        if i % 2:
            graph.replay()
            y = out
        else:
            y = torch.tanh(x @ x) + 1
        with rng("Check Stop Condition"):
            y.sum().item()
torch.cuda.synchronize()
prof.stop() if kineto else torch.cuda.profiler.stop()
if kineto:
    prof.export_chrome_trace(sys.argv[2])
""".replace("STEPS", str(STEPS))


def _run(*cmd):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd[:3]} failed: {done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kineto")
    (tmp / "prog.py").write_text(PROGRAM)
    _run(sys.executable, tmp / "prog.py", "kineto", tmp / "k.json.gz")
    return tmp


def test_a_real_kineto_trace_reads_into_steps_graphs_and_syncs(traces):
    trace = load_trace(traces / "k.json.gz")
    assert trace.source == "kineto"
    ops = trace.ops
    launched = ops[ops["call_start"] >= 0]
    # One clock: no op starts before its launch call does (else the causes mean nothing).
    assert (launched["start"] >= launched["call_start"]).all()
    assert "cudaStreamSynchronize" in set(trace.blocking["name"])
    (a,) = analyze(trace)
    assert list(a.steps["step"]) == list(range(STEPS))
    graphed = a.steps[a.steps["step"] % 2 == 1]
    eager = a.steps[a.steps["step"] % 2 == 0]
    # A replay's kernels share the cudaGraphLaunch's correlation id: one op, several records.
    assert (graphed["op_records"] > graphed["ops"]).all()
    assert (eager["op_records"] == eager["ops"]).all()
    assert a.summary["idle_ns_by_cause"]["sync"] > 0  # every step ends in a blocking .item()
    assert a.summary["ops_without_launch_call"] == 0


def test_kineto_and_nsys_count_the_same_ops_a_step(traces):
    nsys = os.environ.get("NSYS") or shutil.which("nsys")
    if not nsys or not Path(nsys).exists():
        pytest.skip("needs nsys: `source .carry/env.sh` sets NSYS on the GPU machine")
    _run(nsys, "profile", "--trace=cuda,nvtx", "--cuda-graph-trace=node", "--sample=none",
         "--cpuctxsw=none", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
         "-o", traces / "cap", sys.executable, traces / "prog.py", "nsys")
    _run(nsys, "export", "--type", "sqlite", "-o", traces / "cap.sqlite", traces / "cap.nsys-rep")
    (k,) = analyze(load_trace(traces / "k.json.gz"))
    (n,) = analyze(load_trace(traces / "cap.sqlite"))
    # Exact across the two processes: each step's ops and op records.
    assert same_counts(k, n), (k.steps[["step", "ops", "op_records"]].to_dict("list"),
                               n.steps[["step", "ops", "op_records"]].to_dict("list"))
    # GPU time is not (two processes): medians of each kind of step within the measured spread
    # (tests/between_processes.py).
    agreement = gpu_time_agreement(k, n, lambda s: "graphed" if s % 2 else "eager",
                                   committed_spread())
    assert agrees(agreement), (agreement, k.steps["busy_ns"].tolist(), n.steps["busy_ns"].tolist())
