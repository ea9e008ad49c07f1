"""The in-memory trace every reader produces and the analysis reads: it never asks which reader
(an nsys SQLite export, a torch.profiler trace) made it.

Times are ns on one clock per trace; -1 where a value is missing.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

# Kinds of GPU op. GRAPH is one whole CUDA-graph execution, as a graph-level capture records it
# (nsys's default `--cuda-graph-trace=graph`): its nodes are not seen one by one.
KERNEL, MEMCPY, MEMSET, GRAPH = 0, 1, 2, 3
OP_KIND_NAMES = {KERNEL: "kernel", MEMCPY: "[memcpy]", MEMSET: "[memset]", GRAPH: "[graph]"}

# API calls that make the calling thread wait for the device (names after strip_api_suffix).
BLOCKING_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaThreadSynchronize", "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyPeer", "cudaMemcpy3DPeer",
    "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol", "cudaMemcpyToArray", "cudaMemcpyFromArray",
    "cudaMemcpy2DToArray", "cudaMemcpy2DFromArray", "cudaMemcpyArrayToArray",
    "cudaMemcpy2DArrayToArray",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "cuMemcpy", "cuMemcpyDtoH", "cuMemcpyHtoD", "cuMemcpyDtoD", "cuMemcpyDtoA", "cuMemcpyAtoD",
    "cuMemcpyHtoA", "cuMemcpyAtoH", "cuMemcpyAtoA", "cuMemcpy2D", "cuMemcpy2DUnaligned",
    "cuMemcpy3D", "cuMemcpyPeer", "cuMemcpy3DPeer",
})

# The API calls that replay a CUDA graph: every op of a node-level capture that one of them
# launched is a graph node (its kernels carry the launch's correlation id).
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})

# The API calls that launch GPU ops: the ops carry them (call_start, call_end, tid), so a reader
# need not read them again as `api_calls`.
LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
    "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cudaMemcpyAsync", "cudaMemcpy2DAsync",
    "cudaMemcpy3DAsync", "cudaMemcpyPeerAsync", "cudaMemsetAsync", "cudaMemset2DAsync",
    "cuMemcpyAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync",
    "cuMemsetD8Async", "cuMemsetD16Async", "cuMemsetD32Async",
})
# Lookups the CUDA runtime or a framework makes beside a launch (cuKernelGetName before each
# cudaLaunchKernel on torch 2.11): one or more a launch, about 0.1 µs each, so as many rows as
# the launches themselves for under 1% of a step's host time. Not read: their time stays with
# the code around them (METRICS.md, "Host time").
LOOKUP_CALLS = frozenset({
    "cuKernelGetName", "cuKernelGetFunction", "cuKernelGetAttribute", "cuKernelSetAttribute",
    "cuFuncGetAttribute", "cuFuncSetAttribute", "cuFuncGetName", "cuGetProcAddress",
    "cuLibraryGetKernel", "cudaGetLastError", "cudaPeekAtLastError",
})

# `cudaLaunchKernel_v7000`, `cuMemcpyDtoH_v2`, per-thread default stream `_ptsz`/`_ptds`.
_API_SUFFIX = re.compile(r"(?:_v\d+|_ptsz|_ptds)+$")


def strip_api_suffix(name: str) -> str:
    return _API_SUFFIX.sub("", name)


def op_names(kind: np.ndarray, name_id: np.ndarray, strings: dict) -> np.ndarray:
    """Kernel names from their string ids, copies, sets and graphs by their kind ([memcpy]...);
    each distinct name looked up once."""
    codes, keys = pd.factorize(np.where(kind == KERNEL, name_id, -1 - kind))
    names = [strings.get(int(k), "?") if k >= 0 else OP_KIND_NAMES[int(-1 - k)] for k in keys]
    return np.array(names, dtype=object)[codes]


def empty_calls() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in ("start", "end", "tid", "corr")})


def empty_api_calls() -> pd.DataFrame:
    return pd.DataFrame({"start": pd.Series(dtype=np.int64), "end": pd.Series(dtype=np.int64),
                         "tid": pd.Series(dtype=np.int64)})


def empty_marks() -> pd.DataFrame:
    return pd.DataFrame({"start": pd.Series(dtype=np.int64), "tid": pd.Series(dtype=np.int64),
                         "name": pd.Series(dtype=object)})


def empty_metrics() -> pd.DataFrame:
    return pd.DataFrame({"timestamp": pd.Series(dtype=np.int64),
                         "device": pd.Series(dtype=np.int64),
                         "metric": pd.Series(dtype=object),
                         "value": pd.Series(dtype=np.float64)})


@dataclass(frozen=True)
class Trace:
    """One capture.
    `ops`: start, end, device, stream, corr, name_id, kind, and the launch call's call_start,
    call_end and tid (its thread); name_id is a kernel's name (a `strings` id), a GRAPH op's
    graph exec id (graphExecId), -1 for copies and sets. `blocking`: the blocking API calls,
    start, end, tid, name (version suffix stripped). `ranges`: closed NVTX (or record_function)
    ranges, start, end, tid, name. `strings`: name ids to names. `source`: the reader that made
    it ("nsys", "kineto"). `gpu_metrics`: sampled GPU metrics (timestamp, device, metric, value),
    empty when the capture sampled none. `graph_launches`: the graph launch calls
    (GRAPH_LAUNCH_CALLS), start, end, tid, corr: an op one of them launched that is not a GRAPH
    op is a graph node recorded on its own (empty where the reader cannot tell). `dram_peaks`:
    device -> (peak DRAM bytes/s or None, its source), for the devices that have metrics.
    `marks`: NVTX marks (instant events), start, tid, name; gapscope's hook names each
    synchronizing call's Python line so (analysis.measures.syncs); empty where the reader has none.
    `thread_names`: thread (a `tid` as above) -> the name the capture recorded for it (the OS
    thread's name), for the threads that have one. `api_calls`: the other CUDA API calls (start,
    end, tid): neither blocking, nor launching an op (the ops hold those), nor per-launch
    lookups (LOOKUP_CALLS); with the ops' launch calls and the blocking calls, the host's time
    in the CUDA API (measures/host.py). Empty where the reader has none."""

    path: Path
    schema_version: str
    ops: pd.DataFrame
    blocking: pd.DataFrame
    ranges: pd.DataFrame
    strings: dict
    source: str = "nsys"
    gpu_metrics: pd.DataFrame = field(default_factory=empty_metrics)
    graph_launches: pd.DataFrame = field(default_factory=empty_calls)
    dram_peaks: dict = field(default_factory=dict)
    marks: pd.DataFrame = field(default_factory=empty_marks)
    thread_names: dict = field(default_factory=dict)
    api_calls: pd.DataFrame = field(default_factory=empty_api_calls)
