"""The in-program hook (harness/inject/sitecustomize.py): the twin's step boundaries, numbered per
thread, from NVTX ranges and step functions; the file it writes; the sync mark's message; its
chaining to another sitecustomize and its silence without gapscope's environment.

On the CPU: a fake clock (or fake CUDA events) stands in for the recorder's marks, fake nvtx
modules record what the program's calls reach, and the subprocesses import no torch.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import threading
import types
import warnings
from collections import namedtuple
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INJECT = ROOT / "harness" / "inject"
HOOK_FILE = INJECT / "sitecustomize.py"


class Clock:
    """The host clock, 10 ns a tick: each mark is the next tick."""

    def __init__(self):
        self.t = 0

    def __call__(self):
        self.t += 10
        return "host-clock", self.t


def recorder(hook, pattern=None, mark=None):
    hook.marks._REC = hook.recorder.Recorder(pattern, mark or Clock())
    return hook.marks._REC


# --- step functions --------------------------------------------------------------------------

LOOP = """
class Model:
    def forward(self, x):
        return self.helper(x) + 1

    def helper(self, x):
        return x

    @staticmethod
    def static_step():
        return 7


def step(n):
    return step(n - 1) if n else 0
"""


def import_with_hook(hook, tmp_path, monkeypatch, name, callbacks, source=LOOP):
    """Imports tmp_path/name.py (source) with the hook's after-import finder in front."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    finder = hook.imports.AfterImport(callbacks)
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    monkeypatch.delitem(sys.modules, name, raising=False)
    module = importlib.import_module(name)
    monkeypatch.delitem(sys.modules, name)
    return module


class NsysImports:
    """A stand-in of nsys's function-trace import machinery (its injected Python, as read from
    libToolsInjectionPythonNvtxAnnotations64.so): sys.meta_path replaced by a list that wraps
    every finder in it or inserted into it, a wrapped finder wrapping the loader of each spec it
    returns (unless that is already an NvtxLoaderBase), and such a loader decorating the traced
    function once it has executed the module."""

    def __init__(self, module: str, function: str):
        stand_in = self

        class NvtxLoaderBase:
            pass

        def wrap_loader(loader):
            if isinstance(loader, NvtxLoaderBase):
                return loader

            def exec_module(_, mod):
                loader.exec_module(mod)
                if mod.__name__ == module:
                    inner = getattr(mod, function)
                    setattr(mod, function, lambda *a: inner(*a))
                    stand_in.decorated += 1

            return type(loader.__class__.__name__, (NvtxLoaderBase,),
                        {"exec_module": exec_module,
                         "__getattr__": lambda _, n: getattr(loader, n)})()

        def wrap_finder(finder):
            if id(finder) in stand_in.wrapped or not hasattr(finder, "find_spec"):
                return
            stand_in.wrapped.add(id(finder))
            found = finder.find_spec

            def find_spec(*args, **kwargs):
                spec = found(*args, **kwargs)
                if spec and spec.loader:
                    spec.loader = wrap_loader(spec.loader)
                return spec

            finder.find_spec = find_spec

        class NvtxMetaPathWrapper(list):
            def __init__(self, finders):
                super().__init__(finders)
                for f in self:
                    wrap_finder(f)

            def insert(self, key, finder):
                super().insert(key, finder)
                wrap_finder(finder)

        self.decorated, self.wrapped = 0, set()
        self.meta_path = lambda finders: NvtxMetaPathWrapper(finders)


@pytest.mark.parametrize("nsys_first", [True, False])
def test_under_nsys_function_trace_a_module_the_hook_watches_is_decorated_once(
        hook, tmp_path, monkeypatch, nsys_first):
    """Either order of start-up: nsys's meta path before the hook's finder goes in, or after
    (nsys then wraps the hook's finder too). Twice would be a range inside a range of the same
    name for each call, each step counted twice."""
    (tmp_path / "hook_traced.py").write_text("def step(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hook_traced", raising=False)
    nsys = NsysImports("hook_traced", "step")
    seen = []
    if nsys_first:
        monkeypatch.setattr(sys, "meta_path", nsys.meta_path(sys.meta_path))
    else:
        monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    finder = hook.imports.AfterImport({"hook_traced": [lambda m: seen.append(m.__name__)]})
    list.insert(sys.meta_path, 0, finder)  # as start.install puts it in
    if not nsys_first:
        monkeypatch.setattr(sys, "meta_path", nsys.meta_path(sys.meta_path))
    module = importlib.import_module("hook_traced")
    monkeypatch.delitem(sys.modules, "hook_traced")
    assert (nsys.decorated, seen, module.step(1)) == (1, ["hook_traced"], 2)


def test_step_functions_are_wrapped_on_import_and_each_outermost_call_is_a_step(
        hook, tmp_path, monkeypatch):
    rec = recorder(hook)

    def wrap(qualname):
        return lambda module: hook.marks.wrap_function(module, qualname)

    loop = import_with_hook(hook, tmp_path, monkeypatch, "hook_loop_a",
                            {"hook_loop_a": [wrap("Model.forward"), wrap("step"),
                                             wrap("Model.static_step")]})
    # The module keeps its own loader; the wrapper keeps the function's name and signature.
    assert type(loop.__loader__).__name__ == "SourceFileLoader"
    assert loop.Model.forward.__name__ == "forward" and loop.Model.forward.__wrapped__
    model = loop.Model()
    assert model.forward(1) == 2 and model.forward(2) == 3
    assert loop.step(3) == 0            # recursion: the outermost call alone is a step
    assert loop.Model.static_step() == 7
    (run,) = rec.runs()
    # Marks tick by 10 ns: step k starts at tick 2k-1 and ends at tick 2k.
    assert run == {"thread": "MainThread", "thread_order": 0, "sequence": 0,
                   "clock": "host-clock", "step": [1, 2, 3, 4], "start_ns": [0, 20, 40, 60],
                   "end_ns": [10, 30, 50, 70]}
    # Wrapping twice (a reload's callback on a wrapped class) adds no second layer.
    assert hook.marks.wrap_function(loop, "step") and loop.step.__wrapped__.__name__ == "step"
    assert not hasattr(loop.step.__wrapped__, "__wrapped__")
    assert not hook.marks.wrap_function(loop, "Model.nothing")
    assert not hook.marks.wrap_function(loop, "nope")


def test_a_step_that_raises_still_ends(hook):
    rec = recorder(hook)
    failing = hook.marks.step_wrapper(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing()
    assert rec.runs()[0]["step"] == [1] and hook.marks.step_wrapper(len)("abc") == 3
    assert rec.runs()[0]["step"] == [1, 2]


def test_threads_are_numbered_apart_in_order_of_their_first_step(hook):
    rec = recorder(hook)
    step = hook.marks.step_wrapper(lambda: None)

    def work(n):
        for _ in range(n):
            step()

    for name, n in (("decode-a", 3), ("decode-b", 2)):
        thread = threading.Thread(target=work, args=(n,), name=name)
        thread.start()
        thread.join()
    work(1)
    runs = rec.runs()
    assert [(r["thread"], r["thread_order"], r["step"]) for r in runs] == [
        ("decode-a", 0, [1, 2, 3]), ("decode-b", 1, [1, 2]), ("MainThread", 2, [1])]
    assert runs[1]["start_ns"] == [0, 20] and runs[2]["end_ns"] == [10]


# --- NVTX ranges -----------------------------------------------------------------------------


class FakeAnnotate:
    """nvtx.annotate as it is with no tool attached: the decorator returns the function."""

    calls = []

    def __init__(self, message=None, color=None, domain=None, category=None, payload=None):
        self.message = message

    def __enter__(self):
        self.calls.append(("enter", self.message))
        return self

    def __exit__(self, *exc):
        self.calls.append(("exit", self.message))
        return False

    def __call__(self, func):
        return func


def fake_nvtx(calls: list):
    FakeAnnotate.calls = calls
    return types.SimpleNamespace(
        push_range=lambda message=None, color=None, domain=None, **kw: calls.append(
            ("push", message, domain)),
        pop_range=lambda domain=None: calls.append(("pop", domain)),
        start_range=lambda message=None, **kw: calls.append(("start", message)) or (5, 1),
        end_range=lambda range_id: calls.append(("end", range_id)),
        annotate=FakeAnnotate)


def test_nvtx_ranges_matching_the_pattern_are_steps_and_still_reach_nvtx(hook):
    rec = recorder(hook, r"^Step (\d+)$")
    calls = []
    nvtx = fake_nvtx(calls)
    hook.nvtx_ranges.patch_nvtx(nvtx)
    nvtx.push_range("Step 3")
    nvtx.push_range("Model Forward", "green")   # inside a step: not a step
    nvtx.pop_range()
    nvtx.pop_range()
    with nvtx.annotate("Step 4", color="blue"):
        pass

    @nvtx.annotate("Step 5")
    def decorated():
        return "out"

    assert decorated() == "out"
    handle = nvtx.start_range("Step 6")
    nvtx.push_range("other", domain="lib")       # another domain's stack
    nvtx.end_range(handle)
    nvtx.pop_range(domain="lib")
    nvtx.push_range(message="Step 7")
    nvtx.pop_range()
    assert calls == [("push", "Step 3", None), ("push", "Model Forward", None), ("pop", None),
                     ("pop", None), ("enter", "Step 4"), ("exit", "Step 4"), ("start", "Step 6"),
                     ("push", "other", "lib"), ("end", (5, 1)), ("pop", "lib"),
                     ("push", "Step 7", None), ("pop", None)]
    (run,) = rec.runs()
    assert run["step"] == [3, 4, 5, 6, 7]
    assert run["start_ns"] == [0, 20, 40, 60, 80] and run["end_ns"] == [10, 30, 50, 70, 90]


def test_a_step_number_that_does_not_grow_starts_a_new_sequence(hook):
    rec = recorder(hook, r"^Step (\d+)$")
    for i in (1, 2, 3, 1, 2):
        rec.range_push(f"Step {i}")
        rec.range_pop()
    assert [(r["sequence"], r["step"]) for r in rec.runs()] == [(0, [1, 2, 3]), (1, [1, 2])]


def test_ranges_without_a_number_are_counted(hook):
    rec = recorder(hook, r"^decode$")
    for name in ("decode", "other", "decode"):
        rec.range_push(name)
        rec.range_pop()
    assert rec.runs()[0]["step"] == [1, 2]


TORCH_NVTX = """
from contextlib import contextmanager
log = []

def range_push(msg):
    log.append(("push", msg))
    return 0

def range_pop():
    log.append(("pop",))
    return 0

def range_start(msg):
    log.append(("start", msg))
    return 99

def range_end(range_id):
    log.append(("end", range_id))

@contextmanager
def range(msg, *args, **kwargs):
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
"""


def test_torch_cuda_nvtx_ranges_are_steps_its_range_context_manager_too(hook):
    rec = recorder(hook, r"^Step (\d+)$")
    module = types.ModuleType("fake_torch_nvtx")
    exec(TORCH_NVTX, module.__dict__)
    hook.nvtx_ranges.patch_torch_nvtx(module)
    module.range_push("Step 1")
    module.range_pop()
    with module.range("Step {}", 2):
        pass
    module.range_end(module.range_start("Step 3"))
    assert module.log == [("push", "Step 1"), ("pop",), ("push", "Step 2"), ("pop",),
                          ("start", "Step 3"), ("end", 99)]
    assert rec.runs()[0]["step"] == [1, 2, 3]


def test_the_harness_own_timeline_is_taken_not_timed_twice(hook):
    rec = recorder(hook, r"^Step (\d+)$")
    assert hook.marks.harness_timeline()
    rec.range_push("Step 1")     # the harness' own range: its StepTimeline times it
    rec.range_pop()
    hook.marks.harness_step(1, 100, 250)
    hook.marks.harness_step(2, 400, 520)
    assert rec.runs() == [{"thread": "MainThread", "thread_order": 0, "sequence": 0,
                           "clock": "host-clock", "step": [1, 2], "start_ns": [0, 300],
                           "end_ns": [150, 420]}]


def test_no_twin_no_harness_hand_over(hook):
    assert hook.marks._REC is None and hook.marks.harness_timeline() is False
    hook.marks.harness_step(1, 0, 1)  # nothing to record into: no error


# --- the file --------------------------------------------------------------------------------


class FakeEvent:
    """A CUDA event: its time in ms; elapsed_time needs both synchronized, as torch's does."""

    def __init__(self, ms: float):
        self.ms, self.synced = ms, False

    def synchronize(self):
        self.synced = True

    def elapsed_time(self, other) -> float:
        assert self.synced and other.synced
        return other.ms - self.ms


def test_cuda_events_become_ns_from_the_run_first_event(hook):
    times = iter([5.0, 5.25, 6.0, 6.5015])
    rec = recorder(hook, mark=lambda: ("cuda-events", FakeEvent(next(times))))
    for _ in range(2):
        hook.marks._exit(hook.marks._enter())
    doc = hook.recorder.twin_document(rec, "function")
    assert doc["format"] == "gapscope-untraced-steps/1" and doc["source"] == "hook"
    assert doc["kind"] == "function" and doc["pid"] == os.getpid()
    assert doc["runs"] == [{"thread": "MainThread", "thread_order": 0, "sequence": 0,
                            "clock": "cuda-events", "step": [1, 2],
                            "start_ns": [0, 1_000_000], "end_ns": [250_000, 1_501_500]}]


def test_a_step_begun_on_one_clock_and_ended_on_another_is_dropped(hook):
    marks = iter([("host-clock", 5), ("cuda-events", FakeEvent(1.0)),
                  ("cuda-events", FakeEvent(2.0)), ("cuda-events", FakeEvent(3.0))])
    rec = recorder(hook, mark=lambda: next(marks))
    for _ in range(2):
        hook.marks._exit(hook.marks._enter())
    (run,) = rec.runs()
    assert (run["clock"], run["step"], run["end_ns"]) == ("cuda-events", [2], [1_000_000])


def test_a_step_run_inside_a_cuda_graph_capture_is_not_timed(hook):
    marks = iter([("capturing", None), ("capturing", None), ("host-clock", 5), ("host-clock", 9)])
    rec = recorder(hook, mark=lambda: next(marks))
    for _ in range(2):
        hook.marks._exit(hook.marks._enter())
    (run,) = rec.runs()
    assert (run["step"], run["end_ns"]) == ([2], [4])


# --- the sync's source line ------------------------------------------------------------------

Code = namedtuple("Code", "co_filename co_name co_qualname")
Frame = namedtuple("Frame", "f_code f_lineno f_back")


def test_the_sync_mark_names_the_first_frame_outside_torch(hook):
    user = Frame(Code("/work/loop.py", "run", "Loop.run"), 42, None)
    tensor = Frame(Code("/site/torch/_tensor.py", "__bool__", "Tensor.__bool__"), 9, user)
    cuda = Frame(Code("/site/torch/cuda/__init__.py", "synchronize", "synchronize"), 3, tensor)
    assert hook.syncs.sync_mark_message(cuda, "/site/torch/") == \
        "gapscope.sync /work/loop.py:42 Loop.run"
    # torch's generated code is walked past too; a relative path is made absolute.
    relative = Frame(Code("lib/gen.py", "stop", "stop"), 7, None)
    fx = Frame(Code("<eval_with_key>.3", "forward", "forward"), 1, relative)
    assert hook.syncs.sync_mark_message(fx, "/site/torch/") == \
        f"gapscope.sync {os.path.abspath('lib/gen.py')}:7 stop"
    # `python -c` code keeps its pseudo-file name; no frame outside torch: no mark.
    stdin = Frame(Code("<string>", "<module>", "<module>"), 1, None)
    assert hook.syncs.sync_mark_message(stdin, None) == "gapscope.sync <string>:1 <module>"
    assert hook.syncs.sync_mark_message(Frame(tensor.f_code, 9, None), "/site/torch/") is None


def test_torch_sync_warning_becomes_a_mark_and_other_warnings_pass(hook, tmp_path, monkeypatch):
    # A stand-in for torch's package: its code issues the warning, as c10 does through Python.
    fake_torch = tmp_path / "torch"
    fake_torch.mkdir()
    (fake_torch / "ops.py").write_text(textwrap.dedent("""
        import warnings

        def item():
            warnings.warn("called a synchronizing CUDA operation (Triggered internally at "
                          "c10/cuda/CUDAFunctions.cpp:183.)", UserWarning)
            return 1
    """))
    spec = importlib.util.spec_from_file_location("fake_torch_ops", fake_torch / "ops.py")
    ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ops)
    monkeypatch.setattr(hook.syncs, "_torch_dir", lambda: str(fake_torch) + os.sep)
    marks = []
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        monkeypatch.setattr(warnings, "_showwarnmsg", warnings._showwarnmsg)
        hook.syncs.install_sync_marks(warnings, marks.append)

        def loop_line():
            ops.item()
            ops.item()   # `always`: every sync, not once per line
            warnings.warn("something else", DeprecationWarning, stacklevel=1)

        loop_line()
    line = loop_line.__code__.co_firstlineno + 1
    here = os.path.abspath(__file__)
    assert marks == [f"gapscope.sync {here}:{line} {loop_line.__qualname__}",
                     f"gapscope.sync {here}:{line + 1} {loop_line.__qualname__}"]
    assert [str(w.message) for w in shown] == ["something else"]


def test_device_and_event_syncs_torch_does_not_warn_about_are_marked_too(hook, monkeypatch):
    waited = []

    class Event:
        def synchronize(self):
            waited.append("event")

    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
        synchronize=lambda device=None: waited.append("device"), Event=Event))
    monkeypatch.setattr(hook.syncs, "_torch_dir", lambda: "/site/torch/")
    marks = []
    hook.syncs.mark_unwarned_syncs(torch, marks.append)

    def loop_line():
        torch.cuda.synchronize()
        torch.cuda.Event().synchronize()

    loop_line()
    line, here = loop_line.__code__.co_firstlineno, os.path.abspath(__file__)
    assert waited == ["device", "event"]
    assert marks == [f"gapscope.sync {here}:{line + 1} {loop_line.__qualname__}",
                     f"gapscope.sync {here}:{line + 2} {loop_line.__qualname__}"]


def test_sync_debug_mode_waits_for_cuda_to_start(hook):
    queued, modes = [], []
    torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(_lazy_call=queued.append),
        _C=types.SimpleNamespace(_cuda_set_sync_debug_mode=modes.append))
    with warnings.catch_warnings():
        hook.syncs.enable_sync_debug(torch)
        assert modes == [] and len(queued) == 1   # nothing before CUDA starts
        queued[0]()                               # torch.cuda._lazy_init runs the queue
        assert modes == [1]
        assert warnings.filters[0][0] == "always"
        assert warnings.filters[0][1].pattern == ".*called a synchronizing CUDA operation"


# --- start-up, in a fresh interpreter (no torch) ---------------------------------------------


def python(tmp_path: Path, code: str, *paths: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GAPSCOPE_")}
    base["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return subprocess.run([sys.executable, "-c", code], env=base | env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_without_gapscope_env_it_only_chains_to_the_next_sitecustomize(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    result = python(tmp_path, textwrap.dedent("""
        import os, sys
        print(os.environ.get("CHAINED"), sys.modules["sitecustomize"].__file__)
        print("gapscope_hook" in sys.modules,
              [type(f).__name__ for f in sys.meta_path].count("AfterImport"))
    """), INJECT, other)
    assert result.returncode == 0, result.stderr
    chained, state = result.stdout.splitlines()
    assert chained == f"yes {other / 'sitecustomize.py'}"
    assert state == "False 0"  # the hook's package is not even imported
    assert result.stderr == ""
    # No sitecustomize further down: nothing chained, nothing printed.
    alone = python(tmp_path, "import sys; print(sys.modules['sitecustomize'].__name__)", INJECT)
    assert alone.returncode == 0 and alone.stdout.strip() == "sitecustomize" and not alone.stderr


PROGRAM = """
import threading
import steps_mod

for i in range(3):
    steps_mod.decode_step(i)

def worker():
    for i in range(2):
        steps_mod.decode_step(i)

t = threading.Thread(target=worker, name="second")
t.start()
t.join()
"""


def test_a_twin_run_writes_one_file_per_process_with_steps_per_thread(tmp_path):
    (tmp_path / "steps_mod.py").write_text("def decode_step(i):\n    return i * 2\n")
    out = tmp_path / "twin"
    out.mkdir()
    result = python(tmp_path, PROGRAM, INJECT, tmp_path, GAPSCOPE_TWIN_DIR=str(out),
                    GAPSCOPE_STEP_FUNCTIONS="steps_mod:decode_step,steps_mod:missing")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ("gapscope hook: steps_mod:missing: no such function: not timed\n")
    (path,) = out.iterdir()
    doc = json.loads(path.read_text())
    assert path.name == f"untraced-{doc['pid']}.json"
    assert (doc["format"], doc["source"], doc["kind"]) == (
        "gapscope-untraced-steps/1", "hook", "function")
    assert [(r["thread"], r["thread_order"], r["clock"], r["step"]) for r in doc["runs"]] == [
        ("MainThread", 0, "host-clock", [1, 2, 3]), ("second", 1, "host-clock", [1, 2])]
    for r in doc["runs"]:
        assert r["start_ns"][0] == 0 and all(
            s <= e for s, e in zip(r["start_ns"], r["end_ns"], strict=True))


def test_a_twin_of_nvtx_ranges_hooks_the_nvtx_package(tmp_path):
    pytest.importorskip("nvtx")
    out = tmp_path / "twin"
    out.mkdir()
    code = textwrap.dedent("""
        import nvtx
        for i in range(1, 4):
            with nvtx.annotate(f"Step {i}"):
                nvtx.push_range("inner")
                nvtx.pop_range()
    """)
    result = python(tmp_path, code, INJECT, GAPSCOPE_TWIN_DIR=str(out),
                    GAPSCOPE_STEP_PATTERN=r"^Step (\d+)$")
    assert result.returncode == 0, result.stderr
    (path,) = out.iterdir()
    assert [r["step"] for r in json.loads(path.read_text())["runs"]] == [[1, 2, 3]]


def test_a_broken_environment_turns_the_hook_off_not_the_program(tmp_path):
    out = tmp_path / "twin"
    out.mkdir()
    result = python(tmp_path, "print('ran')", INJECT, GAPSCOPE_TWIN_DIR=str(out),
                    GAPSCOPE_STEP_PATTERN="(")
    assert result.returncode == 0 and result.stdout == "ran\n"
    assert result.stderr.startswith("gapscope hook: off (error: missing ), unterminated subpattern")


# --- torch.compile (CPU, eager backend) ------------------------------------------------------


def test_a_compiled_step_function_breaks_its_graph_at_the_events_and_is_still_timed(
        hook, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import torch
    import torch._dynamo

    rec = recorder(hook)
    hook.marks.disable_dynamo(torch._dynamo)
    source = textwrap.dedent("""
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(4, 4)

            def forward(self, x):
                return self.linear(x).relu()
    """)
    wrap = {"hook_compiled_mod": [lambda m: hook.marks.wrap_function(m, "Net.forward")]}
    mod = import_with_hook(hook, tmp_path, monkeypatch, "hook_compiled_mod", wrap, source)
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    net = mod.Net()
    compiled = torch.compile(net, backend="eager")
    x = torch.ones(2, 4)
    for _ in range(3):
        assert torch.equal(compiled(x), net.linear(x).relu())
    # Each call is a step (the marks made eagerly, at graph breaks), the forward one graph.
    assert rec.runs()[0]["step"] == [1, 2, 3]
    assert counters["stats"]["unique_graphs"] == 1
    breaks = " ".join(counters["graph_break"])
    assert "_enter" in breaks and "_exit" in breaks
    torch._dynamo.reset()


def test_the_harness_step_timeline_hands_its_marks_to_the_hook(hook, monkeypatch):
    pytest.importorskip("torch")
    from harness import instrument

    rec = recorder(hook, r"^Step (\d+)$")
    monkeypatch.setitem(sys.modules, "gapscope_hook", hook)
    monkeypatch.setattr(instrument.torch.cuda, "is_available", lambda: False)  # the host clock
    timeline = instrument.StepTimeline(on=True)
    for i in (1, 2):
        with timeline.span(i):
            rec.range_push(f"Step {i}")   # the harness' own NVTX range: left to its timeline
            rec.range_pop()
    (run,) = rec.runs()
    marks = timeline.marks
    assert run["step"] == [1, 2] and run["clock"] == "host-clock"
    assert run["end_ns"] == [marks[0][2] - marks[0][1], marks[1][2] - marks[0][1]]
    # Without the hook's twin (a traced run: sync marks only) the harness keeps to itself.
    hook.marks._REC = None
    assert instrument.StepTimeline(on=True)._hook is None
