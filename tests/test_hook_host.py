"""The hook's host table part (harness/inject/gapscope_hook/host_times.py): each named function's
exclusive time by step on a fake host clock, the NVTX range a call makes where no twin runs,
calls straight through while torch.compile traces, and the twin file's `host` from a real
(torch-free) subprocess."""

import importlib
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INJECT = ROOT / "harness" / "inject"


def ticking(step: int = 10):
    """A host clock that moves `step` ns at each reading."""
    now = iter(range(0, 10**9, step))
    return lambda: next(now)


def test_each_function_is_charged_its_own_time_by_step_and_after_it(hook):
    c = hook.host_times.HostClock(clock=ticking())
    # t: 0 step 1 | 10 f | 20 g | 30 /g | 40 /f | 50 end | 60 p | 70 /p | 80 step 2 | 90 f ...
    c.step_begin()
    c.enter("f")
    c.enter("g")
    c.exit()
    c.exit()
    c.step_end()
    c.enter("p")
    c.exit()
    c.step_begin()
    c.enter("f")
    c.exit()
    c.step_end()
    (doc,) = c.document()
    assert (doc["step"], doc["start_ns"], doc["end_ns"], doc["next_ns"]) == (
        [1, 2], [0, 80], [50, 110], [80, None])
    assert doc["rows"] == {"": {"in": [20, 20], "after": [20, 0]},
                           "f": {"in": [20, 10], "after": [0, 0]},
                           "g": {"in": [10, 0], "after": [0, 0]},
                           "p": {"in": [0, 0], "after": [10, 0]}}
    # In a step, and after it to the next start, the rows add up to the time.
    for k, (start, end, nxt) in enumerate([(0, 50, 80), (80, 110, None)]):
        assert sum(r["in"][k] for r in doc["rows"].values()) == end - start
        if nxt is not None:
            assert sum(r["after"][k] for r in doc["rows"].values()) == nxt - end


def test_nvtx_ranges_are_rows_and_those_the_pattern_takes_are_steps(hook):
    c = hook.host_times.HostClock(r"^Step (\d+)$", clock=ticking())
    # A step's push reads the clock twice (the step begins, then its row): 0, 10; 80, 90.
    for i in (31, 32):
        c.range_push(f"Step {i}")
        c.range_push("Model Forward")
        c.range_pop()
        c.range_pop()
        c.range_push("outside")     # not a step: a row after it
        c.range_pop()
    (doc,) = c.document()
    assert doc["step"] == [31, 32] and doc["start_ns"] == [0, 80]
    assert doc["rows"]["Model Forward"]["in"] == [10, 10]
    assert doc["rows"]["Step 31"]["in"] == [20, 0] and doc["rows"]["Step 32"]["in"] == [0, 20]
    # After the last step too: the analysis counts it only where a step follows.
    assert doc["rows"]["outside"]["after"] == [10, 10]


def test_only_the_outermost_step_counts_and_unended_steps_are_left_out(hook):
    c = hook.host_times.HostClock(clock=ticking())
    c.step_begin()
    c.step_begin()      # nested: the same step
    c.step_end()
    c.step_end()
    c.step_begin()      # never ends
    assert [d["step"] for d in c.document()] == [[1]]


class FakeNvtx:
    def __init__(self):
        self.events = []

    def rangePushA(self, message):  # noqa: N802 (torch's name)
        self.events.append(("push", message))

    def rangePop(self):  # noqa: N802
        self.events.append(("pop",))


def fake_torch(monkeypatch, compiling: bool = False) -> FakeNvtx:
    nvtx = FakeNvtx()
    torch = types.ModuleType("torch")
    torch._C = types.SimpleNamespace(_nvtx=nvtx)
    torch.compiler = types.SimpleNamespace(is_compiling=lambda: compiling)
    monkeypatch.setitem(sys.modules, "torch", torch)
    return nvtx


MODULE = """
class Warper:
    def __call__(self, x):
        return x + 1

    @staticmethod
    def helper(x):
        return x * 2


def sample(x):
    return Warper()(x)
"""


def module(tmp_path, monkeypatch, name="host_mod"):
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name)


def test_where_no_twin_runs_each_call_is_an_nvtx_range_of_its_qualified_name(
        hook, tmp_path, monkeypatch):
    nvtx = fake_torch(monkeypatch)
    mod = module(tmp_path, monkeypatch)
    for q in ("sample", "Warper.__call__", "Warper.helper"):
        assert hook.host_times.wrap_host_function(mod, q)
    assert mod.sample(1) == 2 and mod.Warper.helper(3) == 6 and mod.Warper().helper(1) == 2
    assert nvtx.events[:4] == [("push", "host_mod.sample"), ("push", "host_mod.Warper.__call__"),
                               ("pop",), ("pop",)]
    # Wrapped once only; a missing name is said False.
    assert hook.host_times.wrap_host_function(mod, "sample")
    assert not hook.host_times.wrap_host_function(mod, "missing")
    assert not hook.host_times.wrap_host_function(mod, "Nope.method")
    nvtx.events.clear()
    mod.sample(1)
    assert len(nvtx.events) == 4


def test_while_torch_compile_traces_a_wrapper_only_calls_through(hook, tmp_path, monkeypatch):
    nvtx = fake_torch(monkeypatch, compiling=True)
    mod = module(tmp_path, monkeypatch)
    assert hook.host_times.wrap_host_function(mod, "sample")
    assert mod.sample(1) == 2 and nvtx.events == []


def test_in_the_twin_a_call_is_timed_not_marked(hook, tmp_path, monkeypatch):
    nvtx = fake_torch(monkeypatch)
    clock = hook.host_times.HostClock(clock=ticking())
    hook.host_times.use(clock)
    mod = module(tmp_path, monkeypatch)
    assert hook.host_times.wrap_host_function(mod, "sample")
    clock.step_begin()
    mod.sample(1)
    clock.step_end()
    assert nvtx.events == []
    (doc,) = clock.document()
    assert doc["rows"]["host_mod.sample"]["in"] == [10]


def test_a_step_function_is_its_own_row_and_not_wrapped_again(hook, tmp_path, monkeypatch):
    fake_torch(monkeypatch)
    hook.marks.use(hook.recorder.Recorder(mark=lambda: ("host-clock", 0)))
    clock = hook.host_times.HostClock(clock=ticking())
    hook.host_times.use(clock)
    mod = module(tmp_path, monkeypatch)
    assert hook.marks.wrap_function(mod, "sample")
    assert hook.host_times.wrap_host_function(mod, "sample")  # already a step: left as it is
    assert hook.host_times.wrap_host_function(mod, "Warper.__call__")
    mod.sample(1)
    mod.sample(1)
    (doc,) = clock.document()
    assert doc["step"] == [1, 2]
    assert set(doc["rows"]) == {"", "host_mod.sample", "host_mod.Warper.__call__"}
    assert doc["rows"]["host_mod.Warper.__call__"]["in"] == [10, 10]


def test_the_variable_lists_modules_and_their_qualified_names(hook):
    assert hook.host_times.host_functions("a.b:f, a.b:C.m,c:g,bad,") == {
        "a.b": ["f", "C.m"], "c": ["g"]}


PROGRAM = """
import host_mod, steps_mod
for i in range(3):
    steps_mod.decode_step(i)
    host_mod.sample(i)
"""


def python(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GAPSCOPE_")}
    base["PYTHONPATH"] = os.pathsep.join([str(INJECT), str(tmp_path)])
    return subprocess.run([sys.executable, "-c", code], env=base | env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_a_twin_run_writes_the_host_times_beside_its_steps(tmp_path):
    (tmp_path / "host_mod.py").write_text(MODULE)
    (tmp_path / "steps_mod.py").write_text(textwrap.dedent("""
        import host_mod
        def decode_step(i):
            return host_mod.Warper()(i)
    """))
    out = tmp_path / "twin"
    out.mkdir()
    result = python(tmp_path, PROGRAM, GAPSCOPE_TWIN_DIR=str(out),
                    GAPSCOPE_STEP_FUNCTIONS="steps_mod:decode_step",
                    GAPSCOPE_HOST_FUNCTIONS="host_mod:sample,host_mod:Warper.__call__,nomod:x")
    assert result.returncode == 0, result.stderr
    (path,) = out.iterdir()
    (host,) = json.loads(path.read_text())["host"]
    assert host["thread"] == "MainThread" and host["step"] == [1, 2, 3]
    assert set(host["rows"]) == {"", "steps_mod.decode_step", "host_mod.sample",
                                 "host_mod.Warper.__call__"}
    rows = host["rows"]
    # Each step's rows add up to its time, and what runs after it (sample) to the next start.
    for k in range(3):
        span = host["end_ns"][k] - host["start_ns"][k]
        assert sum(r["in"][k] for r in rows.values()) == span
        assert rows["host_mod.sample"]["in"][k] == 0
        if k < 2:
            gap = host["next_ns"][k] - host["end_ns"][k]
            assert sum(r["after"][k] for r in rows.values()) == gap
            assert rows["host_mod.sample"]["after"][k] > 0
    assert host["next_ns"][2] is None


COMPILED = """
import torch

def inner(x):
    return x.sin() * 2

def step(x):
    return inner(x) + torch.multinomial(torch.softmax(x, -1), 1).float()
"""


@pytest.mark.parametrize("twin", [False, True])
def test_a_wrapped_function_inside_a_fullgraph_compile_keeps_the_graph_whole(
        hook, tmp_path, monkeypatch, twin):
    """The reason the hook names the code, not nsys's function trace (whose wrapper's sys.audit
    dynamo cannot trace): under torch.compile(fullgraph=True) the wrappers call through."""
    pytest.importorskip("torch")
    import torch
    import torch._dynamo

    if twin:
        hook.host_times.use(hook.host_times.HostClock(clock=ticking()))
    (tmp_path / "compiled_mod.py").write_text(COMPILED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "compiled_mod", raising=False)
    mod = importlib.import_module("compiled_mod")
    monkeypatch.setattr(torch, "multinomial", torch.multinomial)  # put back after the test
    assert hook.host_times.wrap_host_function(mod, "inner")
    assert hook.host_times.wrap_host_function(torch, "multinomial")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(mod.step, fullgraph=True, backend="eager")
    assert compiled(torch.randn(4, 8)).shape == (4, 8)
    assert not torch._dynamo.utils.counters["graph_break"]
    if twin:  # eager, the calls are timed
        clock = hook.host_times.clock()
        clock.step_begin()
        mod.step(torch.randn(4, 8))
        clock.step_end()
        (doc,) = clock.document()
        assert set(doc["rows"]) == {"", "compiled_mod.inner", "torch.multinomial"}
