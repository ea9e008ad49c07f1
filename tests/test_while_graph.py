"""while-graph on the CPU: the loop's stop bookkeeping against graphed's (eagerly, tiny GPT-2),
the WHILE graph's assembly against a stand-in for cuda-python's driver bindings, and the one
line said where the rung cannot run. The launch itself: tests/test_gpu_while_graph.py."""

import ctypes
import sys
from types import SimpleNamespace

import pytest
import torch

from harness import cuda_loop
from harness.cli import main
from harness.config import ConfigError, RunConfig, bench_configs, profile_window, validate
from harness.decode import new_state
from harness.instrument import StepTimeline, no_window
from harness.model import build_model
from harness.processes import child_command
from harness.stops import stop_steps
from harness.variants import own_step, variant_lines, while_graph
from harness.while_graph import next_condition

BATCH, NEW = 4, 12
EOS = 50256
SCHEDULES = ["none", "fixed:5", "uniform:4-9", "geometric:0.3"]


@pytest.fixture(scope="module")
def tiny():
    torch.set_float32_matmul_precision("highest")
    return build_model("tiny", "fp32", "cpu", seed=0)


def eager(model, stop: str, maker) -> dict:
    cfg = RunConfig(variant="graphed", model="tiny", batch=BATCH, new_tokens=NEW, device="cpu",
                    stop=stop, matmul_precision="highest")
    st = new_state(BATCH, NEW, stop_steps(stop, BATCH, NEW, 0), "cpu", 0, EOS, (EOS,))
    run = maker(model, cfg, st, graph=False)
    run(no_window())  # the second run must not depend on what the first left behind
    return run(no_window())


@pytest.mark.parametrize("stop", SCHEDULES)
def test_the_loop_gives_graphed_tokens_and_stop_step_with_no_overshoot(tiny, stop):
    ref = eager(tiny, stop, own_step)
    got = eager(tiny, stop, while_graph)
    assert torch.equal(got["tokens"], ref["tokens"])
    assert got["stop_step"] == ref["stop_step"]
    # graphed reads its flag a step late: one step past the stop; the loop stops on it.
    expected = {"none": (12, None), "fixed:5": (5, 5), "uniform:4-9": (9, 9),
                "geometric:0.3": (ref["stop_step"], ref["stop_step"])}[stop]
    assert (got["steps_run"], got["stop_step"]) == expected
    assert got["overshoot_steps"] == 0 and got["stale_flag_reads"] is None


def test_the_condition_goes_on_until_all_finished_or_out_of_steps():
    assert next_condition(False, 3, 12)
    assert not next_condition(True, 3, 12)
    assert not next_condition(False, 12, 12)
    assert not next_condition(True, 12, 12)


# --- the graph's assembly, against a stand-in for cuda.bindings.driver ----------------------

class Handle(int):
    pass


class FakeDriver:
    """The driver calls cuda_loop makes, recorded: each returns (status 0, value)."""

    CU_GRAPH_COND_ASSIGN_DEFAULT = 1
    CUgraphNodeType = SimpleNamespace(CU_GRAPH_NODE_TYPE_CONDITIONAL="conditional")
    CUgraphConditionalNodeType = SimpleNamespace(CU_GRAPH_COND_TYPE_WHILE="while")

    def __init__(self, version=13000, cuda13=True):
        self.version, self.cuda13, self.calls, self.nodes = version, cuda13, [], []

    def CUgraphNodeParams(self):
        return SimpleNamespace(type=None, conditional=SimpleNamespace())

    def CUDA_KERNEL_NODE_PARAMS(self):
        return SimpleNamespace()

    def CUgraph(self, ptr):
        return ("graph", ptr)

    def CUstream(self, ptr):
        return ("stream", ptr)

    def cuDriverGetVersion(self):
        return 0, self.version

    def cuCtxGetCurrent(self):
        return 0, "ctx"

    def cuGraphCreate(self, flags):
        self.calls.append(("create", flags))
        return 0, "outer"

    def cuGraphConditionalHandleCreate(self, graph, ctx, default, flags):
        self.calls.append(("handle", graph, ctx, default, flags))
        return 0, Handle(0xABC)

    def _node(self, graph, deps, what):
        name = f"n{len(self.nodes)}"
        self.nodes.append((name, graph, list(deps), what))
        return 0, name

    def cuGraphAddNode(self, graph, deps, *rest):
        if len(rest) == 3 and not self.cuda13:
            raise TypeError("cuGraphAddNode() takes exactly 4 positional arguments")
        params = rest[-1]
        params.conditional.phGraph_out = ["body"]
        c = params.conditional
        return self._node(graph, deps, (params.type, c.type, c.handle, c.size, c.ctx))

    def cuGraphAddChildGraphNode(self, graph, deps, n, child):
        assert n == len(deps)
        return self._node(graph, deps, ("child", child))

    def cuGraphAddKernelNode(self, graph, deps, n, p):
        assert n == len(deps)
        args = [ctypes.c_uint64.from_address(a).value
                for a in (ctypes.c_uint64 * len(self._args(p))).from_address(p.kernelParams)]
        grid = (p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ)
        return self._node(graph, deps, ("kernel", p.func, grid, args))

    @staticmethod
    def _args(p):
        return {"next": range(5), "mark": range(2)}[p.func]

    def cuGraphInstantiate(self, graph, flags):
        self.calls.append(("instantiate", graph, flags))
        return 0, "exec"

    def cuGraphLaunch(self, exe, stream):
        self.calls.append(("launch", exe, stream))
        return (0,)


KERNELS = {cuda_loop.NEXT: "next", cuda_loop.MARK: "mark"}


def test_the_loop_is_one_while_node_whose_body_is_the_step_then_the_condition_kernel():
    d = FakeDriver()
    cu = SimpleNamespace(driver=d)
    loop = cuda_loop.assemble(cu, 0x5000, KERNELS, done_ptr=0x10, pos_ptr=0x20, limit=100)
    assert d.calls == [("create", 0), ("handle", "outer", "ctx", 1, 1), ("instantiate", "outer", 0)]
    assert d.nodes == [
        ("n0", "outer", [], ("conditional", "while", 0xABC, 1, "ctx")),
        ("n1", "body", [], ("child", ("graph", 0x5000))),
        ("n2", "body", ["n1"], ("kernel", "next", (1,) * 6, [0xABC, 0x10, 0x20, 100, 0])),
    ]
    assert loop.exec == "exec" and loop.nodes == {"while": "n0", "step": "n1", "next": "n2"}
    cuda_loop.launch(cu, loop, 77)
    assert d.calls[-1] == ("launch", "exec", ("stream", 77))


def test_the_timed_loop_marks_each_step_start_before_the_step_and_its_end_after():
    d = FakeDriver()
    cuda_loop.assemble(SimpleNamespace(driver=d), 0x5000, KERNELS, 0x10, 0x20, 100,
                       starts_ptr=0x30, ends_ptr=0x40)
    assert d.nodes[1:] == [
        ("n1", "body", [], ("kernel", "mark", (1,) * 6, [0x20, 0x30])),
        ("n2", "body", ["n1"], ("child", ("graph", 0x5000))),
        ("n3", "body", ["n2"], ("kernel", "next", (1,) * 6, [0xABC, 0x10, 0x20, 100, 0x40])),
    ]


def test_a_cuda_12_binding_of_cugraphaddnode_is_called_without_edge_data():
    d = FakeDriver(cuda13=False)
    cuda_loop.assemble(SimpleNamespace(driver=d), 0x5000, KERNELS, 0x10, 0x20, 100)
    assert d.nodes[0][3][:2] == ("conditional", "while")


def test_kernel_parameters_point_at_their_eight_byte_values():
    held, addresses = cuda_loop.kernel_params([7, 2**63, 0])
    assert [ctypes.c_uint64.from_address(int(a)).value for a in addresses] == [7, 2**63, 0]
    assert held.dtype.itemsize == 8


def test_a_failed_call_raises_with_its_status():
    assert cuda_loop.call(None, (0, "x")) == "x"
    assert cuda_loop.call(None, (0,)) == ()
    with pytest.raises(cuda_loop.CudaError, match="999"):
        cuda_loop.call(None, (999, "x"))


# --- where it cannot run: one line ----------------------------------------------------------

def test_missing_cuda_python_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda", None)  # `import cuda...` raises ImportError
    with pytest.raises(ConfigError, match=r"needs cuda-python.*gapscope\[while-graph\]") as e:
        cuda_loop.bindings()
    assert "\n" not in str(e.value)


def test_a_driver_without_conditional_nodes_is_one_line(monkeypatch):
    d = FakeDriver(version=12020)
    fake = SimpleNamespace(driver=d, nvrtc=SimpleNamespace())
    monkeypatch.setitem(sys.modules, "cuda", SimpleNamespace(bindings=fake))
    monkeypatch.setitem(sys.modules, "cuda.bindings", fake)
    with pytest.raises(ConfigError, match=r"CUDA 12.3 or later\): this driver supports CUDA 12.2"):
        cuda_loop.bindings()


def test_an_nvrtc_failure_says_its_first_log_line():
    log = b"gapscope_while.cu(3): error: something\nmore"

    class Nvrtc:
        def nvrtcCreateProgram(self, *a):
            return 0, "prog"

        def nvrtcCompileProgram(self, prog, n, opts):
            assert opts[0] == b"--gpu-architecture=sm_90"
            return (6,)

        def nvrtcGetProgramLogSize(self, prog):
            return 0, len(log)

        def nvrtcGetProgramLog(self, prog, buf):
            ctypes.memmove(buf, log, len(log))  # as the binding fills the buffer
            return (0,)

    with pytest.raises(ConfigError, match=r"could not compile .*: .*error: something$"):
        cuda_loop.compile_kernels(SimpleNamespace(nvrtc=Nvrtc()), (9, 0))


@pytest.mark.parametrize("variant", ["while-graph", "while-fused"])
def test_the_loops_need_cuda_and_refuse_a_window(variant):
    with pytest.raises(ConfigError, match=f"{variant} needs CUDA"):
        validate(RunConfig(variant=variant, device="cpu"))
    with pytest.raises(ConfigError, match="--window means nothing for"):
        validate(RunConfig(variant=variant, window="30:50"))
    assert profile_window(RunConfig(variant=variant, new_tokens=60)) == (0, 60)


def test_while_fused_takes_no_compile_and_phi_is_refused():
    with pytest.raises(ConfigError, match="while-fused is its own fused step"):
        validate(RunConfig(variant="while-fused", compile="default"))
    with pytest.raises(ConfigError, match="while-graph runs our own step"):
        validate(RunConfig(variant="while-graph", model="phi"))


def test_a_bench_beside_windowed_variants_leaves_the_loops_without_one():
    cfgs = bench_configs(RunConfig(window="10:20"), ["graphed", "while-graph"])
    assert [c.window for c in cfgs] == ["10:20", None]
    cmd = child_command("while-graph", ["--window", "10:20", "--batch", "8"], 3, "x.json")
    assert "--window" not in cmd and cmd[-2:] == ["--batch", "8"]
    assert "--window" in child_command("graphed", ["--window", "10:20"], 3, "x.json")


def test_the_cli_refuses_the_loop_on_the_cpu_in_one_line(capsys):
    assert main(["run", "--variant", "while-graph", "--device", "cpu", "--out", "x"]) == 2
    assert capsys.readouterr().err == "gapscope: error: while-graph needs CUDA\n"


def test_device_stamps_read_as_the_timeline_from_the_first_start():
    t = StepTimeline(on=True)
    t.set_stamps([1000, 1600, 2250], [1500, 2200, 2900], "gpu-globaltimer")
    assert t.read() == {"step": [1, 2, 3], "start_ns": [0, 600, 1250],
                        "end_ns": [500, 1200, 1900]}
    assert t.source == "gpu-globaltimer"
    assert t.read() == {"step": [], "start_ns": [], "end_ns": []}  # read once, as marks are


def test_the_variant_list_names_both_loops():
    names = [line.split()[0] for line in variant_lines()]
    assert names[names.index("nocheck") + 1:][:2] == ["while-graph", "while-fused"]
