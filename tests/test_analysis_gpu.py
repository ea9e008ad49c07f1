"""On the GPU machine, with nsys: a fresh capture (eager steps and CUDA-graph replays, NVTX
`text` names from torch.cuda.nvtx) analysed, and its projection checked against nsys's own."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.measures.summary import analyze
from analysis.readers import load_trace

pytestmark = pytest.mark.gpu

STEPS = 8
# Even steps run eagerly, odd ones replay a captured graph; each ends in a blocking `.item()`.
PROGRAM = f"""
import torch
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
torch.cuda.synchronize()
torch.cuda.profiler.start()
for i in range({STEPS}):
    torch.cuda.nvtx.range_push(f"Step {{i}}")
    if i % 2:
        graph.replay()
        y = out
    else:
        y = torch.tanh(x @ x) + 1
    torch.cuda.nvtx.range_push("Check Stop Condition")
    y.sum().item()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
"""


def _nsys() -> str:
    nsys = os.environ.get("NSYS") or shutil.which("nsys")
    if not nsys or not Path(nsys).exists():
        pytest.skip("needs nsys: `source .carry/env.sh` sets NSYS on the GPU machine")
    return nsys


def _run(*cmd):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd[:3]} failed: {done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    nsys = _nsys()
    tmp = tmp_path_factory.mktemp("capture")
    (tmp / "prog.py").write_text(PROGRAM)
    _run(nsys, "profile", "--trace=cuda,nvtx", "--cuda-graph-trace=node", "--sample=none",
         "--cpuctxsw=none", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
         "-o", tmp / "cap", sys.executable, tmp / "prog.py")
    _run(nsys, "export", "--type", "sqlite", "-o", tmp / "cap.sqlite", tmp / "cap.nsys-rep")
    _run(nsys, "stats", "-r", "nvtx_gpu_proj_trace", "-f", "csv", "-o", tmp / "proj",
         tmp / "cap.sqlite")
    return tmp


def test_fresh_capture_projection_equals_nsys_with_graph_launches(capture):
    (a,) = analyze(load_trace(capture / "cap.sqlite"))
    nsys = pd.read_csv(capture / "proj_nvtx_gpu_proj_trace.csv")
    # nsys 2025.3 names a range `domain:name` (`:Step 0` in the default domain); 2024.2 `Step 0`.
    steps = nsys["Name"].str.extract(r"^(?:[^:]*:)?Step (\d+)$")[0]
    nsys = nsys[steps.notna()].copy()
    nsys["step"] = steps.dropna().astype(int)
    merged = a.steps.merge(nsys, on="step", validate="one_to_one")
    assert list(merged["step"]) == list(range(STEPS)), (
        f"nsys ranges {nsys['Name'].tolist()[:12]}, ours {a.steps['step'].tolist()[:12]}, "
        f"csv rows {pd.read_csv(capture / 'proj_nvtx_gpu_proj_trace.csv')['Name'].tolist()[:6]}")
    assert (merged["ops"] == merged["NumGPUOps"]).all()
    assert (merged["gpu_start_ns"] == merged["Projected Start (ns)"]).all()
    assert (merged["span_ns"] == merged["Projected Duration (ns)"]).all()
    graphed = merged[merged["step"] % 2 == 1]
    # A graph replay is one launch call for several kernels.
    assert (graphed["op_records"] > graphed["ops"]).all()
    s = a.summary
    assert s["steps"] == STEPS and s["idle_ns_by_cause"]["sync"] > 0
    assert s["unattributed_ops"] == 0 and s["ops_without_launch_call"] == 0
