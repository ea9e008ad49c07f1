"""The device side of `while-graph`: a CUDA graph whose one WHILE node replays a captured step
until a kernel in its body says stop (CUDA 12.3+ conditional nodes), through cuda-python's
driver and NVRTC bindings (`cuda.bindings`, imported only here and only when the rung runs).

    outer graph   [WHILE handle]                     one cuGraphLaunch decodes every token
    its body      [child: the step] -> [next]        the step: torch's capture, cloned
                  ([mark] -> first, with a timeline)

`next` is a one-thread kernel: the step's `advance` has already applied the stop schedule, the
finished mask and the all-finished flag (harness/decode.py, as in `graphed`); `next` reads that
flag and the position (the steps done) and sets the loop's condition: go on while some sequence
is unfinished and fewer than --new-tokens steps have run. The handle is created with default 1
(CU_GRAPH_COND_ASSIGN_DEFAULT: reset at every launch), so the first step always runs.

Why no device runtime: cudaGraphSetConditional is a builtin. The CUDA headers declare it only
under -rdc (relocatable device code, which would need libcudadevrt linked by nvJitLink); declared
here by hand as a `__cudart_builtin__`, NVRTC compiles it to a plain cubin that loads as it is
(NeMo's and cuda-python's own tests do the same). With a timeline, `next` also writes the GPU's
%globaltimer at each step's end, and `mark` (the body's first node) at its start: the untraced
twin's marks, from inside the one launch where no CUDA event can be recorded.

Every call goes through `cu`, an object with the driver and NVRTC functions (`bindings()`), so
that tests/test_while_graph.py assembles the graph against a stand-in.
"""

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from .config import ConfigError

MIN_DRIVER = 12030  # CUDA 12.3: conditional (IF, WHILE) graph nodes
NEXT, MARK = "gapscope_while_next", "gapscope_while_mark"
SOURCE = r"""
typedef __device_builtin__ unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(
    cudaGraphConditionalHandle handle, unsigned int value);

__device__ unsigned long long gapscope_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// After step `*pos` (pos counts the steps done): go on while not all finished and steps remain.
extern "C" __global__ void gapscope_while_next(cudaGraphConditionalHandle handle,
        const bool* done, const long long* pos, long long limit, unsigned long long* ends) {
    long long steps = *pos;
    if (ends) ends[steps - 1] = gapscope_now();
    cudaGraphSetConditional(handle, (!*done && steps < limit) ? 1u : 0u);
}

// Before step `*pos + 1`: its start on the GPU clock.
extern "C" __global__ void gapscope_while_mark(const long long* pos, unsigned long long* starts) {
    starts[*pos] = gapscope_now();
}
"""
INSTALL = ("pip install 'gapscope[while-graph]' (cuda-python's cuda-bindings, the release "
           "of your driver's CUDA major)")


class CudaError(RuntimeError):
    pass


def bindings():
    """The driver and NVRTC bindings, or ConfigError (one line) where cuda-python is missing or
    the driver has no conditional nodes."""
    try:
        from cuda.bindings import driver, nvrtc
    except ImportError as e:
        raise ConfigError(f"while-graph needs cuda-python, which is not importable here ({e}): "
                          f"{INSTALL}") from None
    cu = SimpleNamespace(driver=driver, nvrtc=nvrtc)
    version = call(cu, driver.cuDriverGetVersion())
    if version < MIN_DRIVER:
        raise ConfigError(f"while-graph needs conditional graph nodes (a driver for CUDA 12.3 or "
                          f"later): this driver supports CUDA {version // 1000}."
                          f"{version % 1000 // 10}")
    return cu


def call(cu, result):
    """A binding's (status, *values) with the status checked: the values (one: itself)."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(getattr(status, "value", status)) != 0:
        raise CudaError(f"CUDA call failed: {status!r}")
    return values[0] if len(values) == 1 else tuple(values)


def compile_kernels(cu, arch: tuple[int, int]) -> dict:
    """{name: CUfunction} of NEXT and MARK, compiled by NVRTC for sm_XY and loaded."""
    nv = cu.nvrtc
    prog = call(cu, nv.nvrtcCreateProgram(SOURCE.encode(), b"gapscope_while.cu", 0, [], []))
    opts = [f"--gpu-architecture=sm_{arch[0]}{arch[1]}".encode(), b"--std=c++17"]
    status = nv.nvrtcCompileProgram(prog, len(opts), opts)
    status = status[0] if isinstance(status, tuple) else status
    if int(getattr(status, "value", status)) != 0:
        size = call(cu, nv.nvrtcGetProgramLogSize(prog))
        log = b" " * size
        call(cu, nv.nvrtcGetProgramLog(prog, log))
        first = log.decode(errors="replace").strip().splitlines() or ["no log"]
        raise ConfigError(f"while-graph: NVRTC could not compile its loop kernel: {first[0]}")
    size = call(cu, nv.nvrtcGetCUBINSize(prog))
    cubin = b" " * size
    call(cu, nv.nvrtcGetCUBIN(prog, cubin))
    call(cu, nv.nvrtcDestroyProgram(prog))
    image = np.frombuffer(cubin, dtype=np.uint8)
    module = call(cu, cu.driver.cuModuleLoadData(image.ctypes.data))
    return {name: call(cu, cu.driver.cuModuleGetFunction(module, name.encode()))
            for name in (NEXT, MARK)} | {"module": module}


def kernel_params(values: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Every argument 8 bytes (a handle, pointers, a long long): (the values, the array of their
    addresses that a kernel node's kernelParams points to). Keep both alive."""
    held = np.array(values, dtype=np.uint64)
    addresses = np.array([held.ctypes.data + 8 * i for i in range(len(values))], dtype=np.uint64)
    return held, addresses


@dataclass
class WhileGraph:
    """The assembled loop: `exec` launches it; the rest is what must outlive it."""

    exec: object
    graph: object
    handle: object
    body: object
    nodes: dict
    keep: list = field(default_factory=list)


def assemble(cu, step_graph: int, kernels: dict, done_ptr: int, pos_ptr: int, limit: int,
             starts_ptr: int = 0, ends_ptr: int = 0) -> WhileGraph:
    """The outer graph with its WHILE node, the body [mark ->] child(step) -> next, instantiated.
    step_graph: the captured step's cudaGraph_t (an int); the pointers: device addresses (0:
    none). starts_ptr and ends_ptr both or neither (the timeline)."""
    d = cu.driver
    ctx = call(cu, d.cuCtxGetCurrent())
    graph = call(cu, d.cuGraphCreate(0))
    assign_default = getattr(d, "CU_GRAPH_COND_ASSIGN_DEFAULT", 1)
    handle = call(cu, d.cuGraphConditionalHandleCreate(graph, ctx, 1, assign_default))
    params = d.CUgraphNodeParams()
    params.type = d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    params.conditional.handle = handle
    params.conditional.type = d.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE
    params.conditional.size = 1
    params.conditional.ctx = ctx
    loop = add_node(cu, graph, params)
    body = params.conditional.phGraph_out[0]
    keep, deps, nodes = [], [], {"while": loop}
    if starts_ptr:
        nodes["mark"] = add_kernel(cu, body, [], kernels[MARK], [pos_ptr, starts_ptr], keep)
        deps = [nodes["mark"]]
    nodes["step"] = call(cu, d.cuGraphAddChildGraphNode(body, deps, len(deps),
                                                       d.CUgraph(step_graph)))
    nodes["next"] = add_kernel(cu, body, [nodes["step"]], kernels[NEXT],
                               [handle_value(handle), done_ptr, pos_ptr, limit, ends_ptr], keep)
    exe = call(cu, d.cuGraphInstantiate(graph, 0))
    return WhileGraph(exe, graph, handle, body, nodes, keep)


def handle_value(handle) -> int:
    """A conditional handle's 64-bit value (a kernel argument)."""
    try:
        return int(handle)
    except TypeError:
        import ctypes

        return ctypes.c_uint64.from_address(handle.getPtr()).value


def add_node(cu, graph, params):
    """cuGraphAddNode with no dependencies: CUDA 13's signature (edge data), else 12's."""
    d = cu.driver
    try:
        return call(cu, d.cuGraphAddNode(graph, [], None, 0, params))
    except TypeError:
        return call(cu, d.cuGraphAddNode(graph, [], 0, params))


def add_kernel(cu, graph, deps: list, function, args: list[int], keep: list):
    """A one-thread kernel node running `function` on `args` (8-byte values) after `deps`."""
    d = cu.driver
    held, addresses = kernel_params(args)
    keep += [held, addresses]
    p = d.CUDA_KERNEL_NODE_PARAMS()
    p.func = function
    p.gridDimX = p.gridDimY = p.gridDimZ = 1
    p.blockDimX = p.blockDimY = p.blockDimZ = 1
    p.sharedMemBytes = 0
    p.kernelParams = int(addresses.ctypes.data)
    return call(cu, d.cuGraphAddKernelNode(graph, deps, len(deps), p))


def launch(cu, loop: WhileGraph, stream: int) -> None:
    call(cu, cu.driver.cuGraphLaunch(loop.exec, cu.driver.CUstream(stream)))


def destroy(cu, loop: WhileGraph) -> None:
    call(cu, cu.driver.cuGraphExecDestroy(loop.exec))
    call(cu, cu.driver.cuGraphDestroy(loop.graph))
