"""The program's own code, named by the hook as the program imports it (gapscope_hook/own_code.py,
main_code.py), torch.compile of a wrapped function (compiled.py), speculative decoding's marks and
draft (speculative.py), and the function chosen as the step where steps are inferred
(analysis/measures/step_function.py, analysis/capture/own_code.py).

The programs run in subprocesses with no torch: the hook times them on the host clock (the twin)
or opens its ranges through a stand-in `nvtx` package that logs them (the traced run)."""

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
from test_hook_marks import PYTHON_312, needs_312

from analysis.capture import own_code as capture_own
from analysis.measures.step_function import candidates_table, once_a_step
from analysis.readers import load_trace

ROOT = Path(__file__).resolve().parent.parent
INJECT = ROOT / "harness" / "inject"

MODEL = """
import time

class Model:
    def forward(self, x):
        return self.inner(x) + 1

    def inner(self, x):
        return x

    def tokens(self):
        yield 1

    @staticmethod
    def scale(x):
        return x * 2

    def __repr__(self):
        return "Model"

async def serve():
    pass

def sample(x):
    return Model.scale(x)

from os.path import join  # imported, not defined here
"""
PROGRAM = """
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
from mylib.model import Model, sample
import installed

def step(m, x):
    y = m.forward(x)
    installed.helper(y)
    return check(sample(y))

def check(v):
    return v > 10**9

m = Model()
for i in range(4):
    step(m, i)
print("ran")
"""
# A stand-in for the nvtx package: each push and pop, logged at exit.
NVTX = """
import atexit, json, os
events = []
def push_range(message=None, color=None, domain=None, category=None, payload=None):
    events.append(["push", message])
def pop_range(domain=None):
    events.append(["pop"])
def mark(message=None, **kwargs):
    events.append(["mark", message])
atexit.register(lambda: json.dump(events, open(os.environ["NVTX_LOG"], "w")))
"""


def program(tmp: Path, text: str = PROGRAM) -> Path:
    (tmp / "lib" / "mylib").mkdir(parents=True, exist_ok=True)
    (tmp / "lib" / "mylib" / "__init__.py").write_text("")
    (tmp / "lib" / "mylib" / "model.py").write_text(MODEL)
    (tmp / "site-packages").mkdir(exist_ok=True)
    (tmp / "site-packages" / "installed.py").write_text("def helper(x):\n    return x\n")
    (tmp / "stub").mkdir(exist_ok=True)
    (tmp / "stub" / "nvtx.py").write_text(NVTX)
    path = tmp / "prog.py"
    path.write_text(text)
    return path


def run(tmp: Path, script: Path, python: str = sys.executable, **env: str):
    base = {k: v for k, v in os.environ.items() if not k.startswith("GAPSCOPE_")}
    base["PYTHONPATH"] = os.pathsep.join([str(INJECT), str(tmp / "stub")])
    base["NVTX_LOG"] = str(tmp / "nvtx.json")
    done = subprocess.run([python, str(script)], env=base | env, cwd=tmp, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "ran\n", done.stderr
    return done


def twin(tmp: Path, **env: str) -> tuple:
    """(the twin file, the own-code record) of one host-timed twin run."""
    out = tmp / "twin"
    out.mkdir()
    run(tmp, tmp / "prog.py", env.pop("python", sys.executable), GAPSCOPE_TWIN_DIR=str(out),
        GAPSCOPE_RUN_DIR=str(out), GAPSCOPE_HOST_FUNCTIONS="", **env)
    (steps,) = out.glob("untraced-*.json")
    (own,) = out.glob("own_code-*.json")
    return json.loads(steps.read_text()), json.loads(own.read_text())


# --- which code is the program's own ------------------------------------------------------------


def test_own_modules_are_source_files_outside_the_library_and_torch_or_transformers(hook):
    roots = ("/usr/lib/python3.11/", "/venv/lib/python3.11/site-packages/")
    own = hook.own_code.is_own
    assert own("mylib.model", "/home/me/gpt-fast/model.py", roots)
    assert own("app", "/home/me/proj/src/app/__init__.py", roots)  # an editable install's
    assert not own("json", "/usr/lib/python3.11/json/__init__.py", roots)
    assert not own("x", "/venv/lib/python3.11/site-packages/x.py", roots)
    assert not own("y", "/opt/other/dist-packages/y.py", roots)
    assert not own("transformers.models", "/home/me/transformers/src/transformers/x.py", roots)
    assert not own("_sre", "built-in", roots) and not own("ext", "/home/me/ext.so", roots)


def test_a_package_installed_into_a_folder_of_its_own_is_no_own_code(hook, tmp_path):
    """pip install --target DIR, DIR on PYTHONPATH: its dist-info lies beside the package."""
    (tmp_path / "tabulate").mkdir()
    (tmp_path / "tabulate" / "__init__.py").write_text("")
    (tmp_path / "tabulate-0.10.0.dist-info").mkdir()
    (tmp_path / "mine.py").write_text("")
    own = hook.own_code.is_own
    assert not own("tabulate", str(tmp_path / "tabulate" / "__init__.py"), ())
    assert own("mine", str(tmp_path / "mine.py"), ())
    assert hook.own_code.module_root("/x/a/b.py", "a.b") == "/x"
    assert hook.own_code.module_root("/x/a/__init__.py", "a") == "/x"


def test_a_module_names_its_plain_functions_and_methods_not_imports_generators_or_dunders(
        hook, tmp_path, monkeypatch):
    (tmp_path / "own_mod.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "own_mod", raising=False)
    import own_mod

    assert hook.own_code.definitions(own_mod) == [
        "Model.forward", "Model.inner", "Model.scale", "sample"]


# --- a twin run: host times of the program's own code -------------------------------------------


def test_modules_found_through_a_folder_the_program_adds_to_sys_path_are_timed(tmp_path):
    program(tmp_path)
    steps, own = twin(tmp_path, GAPSCOPE_OWN_CODE="600",
                      GAPSCOPE_STEP_FUNCTIONS="mylib.model:Model.forward")
    (host,) = steps["host"]
    assert host["step"] == [1, 2, 3, 4]
    # The step function is its own row; installed code (a site-packages folder) is not named.
    assert set(host["rows"]) == {"", "mylib.model.Model.forward", "mylib.model.Model.inner",
                                 "mylib.model.Model.scale", "mylib.model.sample"}
    assert own["functions"] == ["mylib.model:Model.forward", "mylib.model:Model.inner",
                                "mylib.model:Model.scale", "mylib.model:sample"]
    assert sorted(own["modules"]) == ["mylib", "mylib.model"]
    assert (own["left_out"], own["capped_at"]) == (0, None)
    if sys.version_info < (3, 12):
        assert own["main"] == {"named": False, "functions": [], "why": (
            "the script's own functions (__main__) are not named: that needs sys.monitoring, "
            f"new in Python 3.12 (this is {sys.version.split()[0]})")}


def test_the_cap_names_the_first_functions_and_says_where_it_bit(tmp_path):
    program(tmp_path)
    out = tmp_path / "twin"
    out.mkdir()
    done = run(tmp_path, tmp_path / "prog.py", GAPSCOPE_TWIN_DIR=str(out),
               GAPSCOPE_RUN_DIR=str(out), GAPSCOPE_HOST_FUNCTIONS="", GAPSCOPE_OWN_CODE="2",
               GAPSCOPE_STEP_FUNCTIONS="mylib.model:sample")
    (own,) = [json.loads(p.read_text()) for p in out.glob("own_code-*.json")]
    assert own["functions"] == ["mylib.model:Model.forward", "mylib.model:Model.inner"]
    assert (own["limit"], own["left_out"], own["capped_at"]) == (2, 2, "mylib.model")
    assert done.stderr == ("gapscope hook: own code: 2 functions named, the cap: mylib.model's "
                           "and later modules' are not (gapscope profile --max-own-functions N)\n")


# --- the script's own functions (sys.monitoring) ------------------------------------------------


@needs_312
def test_the_script_own_functions_are_rows_and_one_of_them_the_step(tmp_path):
    program(tmp_path)
    steps, own = twin(tmp_path, python=PYTHON_312, GAPSCOPE_OWN_CODE="600",
                      GAPSCOPE_STEP_FUNCTIONS="__main__:step")
    (run_,) = steps["runs"]
    assert run_["step"] == [1, 2, 3, 4]
    (host,) = steps["host"]
    assert set(host["rows"]) == {"", "__main__.step", "__main__.check", "mylib.model.sample",
                                 "mylib.model.Model.forward", "mylib.model.Model.inner",
                                 "mylib.model.Model.scale"}
    assert own["main"] == {"named": True, "why": None, "functions": ["step", "check"]}
    for k in range(4):  # the rows add up to each step
        assert (sum(r["in"][k] for r in host["rows"].values())
                == host["end_ns"][k] - host["start_ns"][k])


@needs_312
def test_in_the_traced_run_each_call_of_the_script_own_code_is_a_range(tmp_path):
    program(tmp_path)
    run(tmp_path, tmp_path / "prog.py", PYTHON_312, GAPSCOPE_OWN_CODE="600")
    events = json.loads((tmp_path / "nvtx.json").read_text())
    first = [tuple(e) for e in events[:12]]
    assert first == [
        ("push", "__main__.step"), ("push", "mylib.model.Model.forward"),
        ("push", "mylib.model.Model.inner"), ("pop",), ("pop",),
        ("push", "mylib.model.sample"), ("push", "mylib.model.Model.scale"), ("pop",), ("pop",),
        ("push", "__main__.check"), ("pop",), ("pop",)]
    assert len(events) == 4 * 12


@needs_312
def test_a_step_function_of_main_alone_is_a_range_where_the_code_is_not_named(tmp_path):
    program(tmp_path)
    run(tmp_path, tmp_path / "prog.py", PYTHON_312, GAPSCOPE_MAIN_STEPS="step")
    events = json.loads((tmp_path / "nvtx.json").read_text())
    assert events == [["push", "__main__.step"], ["pop"]] * 4


# --- torch.compile of a wrapped function ---------------------------------------------------------


def test_compiling_a_wrapped_function_compiles_it_and_wraps_the_result(hook, monkeypatch):
    compiled = []

    def compile_(model=None, **options):
        if model is None:
            return lambda fn: compile_(fn, **options)
        compiled.append((model, options))
        return lambda *a: ("compiled", model(*a))

    torch = types.SimpleNamespace(compile=compile_)
    hook.compiled.patch_compile(torch)
    clock = hook.host_times.HostClock(clock=iter(range(0, 10**6, 10)).__next__)
    hook.host_times.use(clock)

    def decode(x):
        return x + 1

    wrapped = hook.host_times.host_wrapper(decode, "m.decode")
    fast = torch.compile(wrapped, mode="reduce-overhead")
    assert compiled == [(decode, {"mode": "reduce-overhead"})]  # the function, not the wrapper
    slow = torch.compile(mode="max-autotune")(wrapped)
    assert compiled[1] == (decode, {"mode": "max-autotune"})
    clock.step_begin()
    assert fast(1) == ("compiled", 2) and slow(1) == ("compiled", 2)
    clock.step_end()
    (doc,) = clock.document()
    assert doc["rows"]["m.decode"]["in"] == [20]  # each compiled call still a timed row
    plain = torch.compile(decode)
    assert compiled[2] == (decode, {}) and plain(1) == ("compiled", 2)


def test_a_compiled_step_function_is_a_step_with_its_graph_whole(hook, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import torch
    import torch._dynamo

    rec = hook.recorder.Recorder(mark=iter(("host-clock", t) for t in range(0, 10**6, 10))
                                 .__next__)
    hook.marks.use(rec)
    hook.marks.disable_dynamo(torch._dynamo)
    monkeypatch.setattr(torch, "compile", torch.compile)  # put back after the test
    hook.compiled.patch_compile(torch)
    (tmp_path / "cstep.py").write_text("def step(x):\n    return (x.sin() * 2).relu()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cstep", raising=False)
    import cstep

    assert hook.marks.wrap_function(cstep, "step")
    torch._dynamo.reset()
    fast = torch.compile(cstep.step, backend="eager", fullgraph=True)
    x = torch.ones(3)
    for _ in range(3):
        assert torch.equal(fast(x), (x.sin() * 2).relu())
    assert rec.runs()[0]["step"] == [1, 2, 3]
    torch._dynamo.reset()


# --- speculative decoding -------------------------------------------------------------------------


def test_each_verification_marks_the_tokens_it_added(hook):
    """The sequence's length after the verification less its length at get_candidates (shapes,
    no sync), else num_matches + 1 where that is a plain int."""
    marks = []

    class Ids:
        def __init__(self, n):
            self.shape = (1, n)

    class Generator:
        def get_candidates(self, input_ids):
            return input_ids

        def update_candidate_strategy(self, input_ids, scores, num_matches):
            return num_matches

    module = types.SimpleNamespace(Generator=Generator, other=1)
    assert hook.speculative.patch_update(module, marks.append) == 2
    assert hook.speculative.patch_update(module, marks.append) == 0  # once
    g = Generator()
    g.get_candidates(Ids(16))
    assert g.update_candidate_strategy(Ids(21), None, object()) is not None  # 5 added
    g.get_candidates(Ids(21))
    g.update_candidate_strategy(input_ids=Ids(22), scores=None, num_matches=0)
    fresh = Generator()  # no get_candidates seen: num_matches + 1, else nothing
    fresh.update_candidate_strategy(None, None, 2)
    fresh.update_candidate_strategy(None, None, object())
    assert marks == ["gapscope.accepted 5", "gapscope.accepted 1", "gapscope.accepted 3"]


def test_the_draft_forwards_are_no_steps_and_the_step_starts_with_the_draft(hook):
    rec = hook.recorder.Recorder(mark=iter(("host-clock", t) for t in range(0, 10**6, 10))
                                 .__next__)
    hook.marks.use(rec)

    def forward(x):
        return x

    step = hook.marks.step_wrapper(forward, "m.forward")
    draft = hook.speculative.draft_wrapper(lambda: [step(1), step(2)])
    # The marks (10 ns a tick): the draft's entry 0 (its two forwards take none), the target
    # forward's end 10; the second draft 20, its forward's end 30; a forward with no draft
    # before it, its own start 40 and end 50.
    for _ in range(2):
        draft()
        step(0)
    step(0)
    (only,) = rec.runs()
    assert only["step"] == [1, 2, 3]
    assert (only["start_ns"], only["end_ns"]) == ([0, 20, 40], [10, 30, 50])


# --- the step function chosen where the steps are inferred ----------------------------------------


def table(rows: list) -> pd.DataFrame:
    columns = ["name", "calls", "steps", "cover", "duration_ns", "inside"]
    return pd.DataFrame([(*r, ()) if len(r) == 5 else r for r in rows], columns=columns)


def test_the_step_is_the_function_that_covers_the_launches_once_a_step_outermost_first():
    rows = [("gen.decode_one_token", 99, 99, 1.0, 900), ("model.Transformer.forward", 100, 99,
             0.995, 800), ("model.Block.forward", 1200, 99, 0.99, 700),  # 12 a step: no
            ("gen.generate", 1, 99, 1.0, 1000),                           # once in all: no
            ("gen.check", 99, 99, 0.0, 5)]                                # launches nothing
    assert once_a_step(table(rows)) == "gen.decode_one_token"
    # Two inferred steps a call (a step cut at each of two syncs) still qualify.
    assert once_a_step(table([("model.GPT.forward", 100, 199, 0.9, 5)])) == "model.GPT.forward"
    assert once_a_step(table([("a.f", 99, 99, 0.49, 5)])) is None
    assert once_a_step(table([("a.f", 2, 2, 1.0, 5)])) is None
    assert once_a_step(table([])) is None
    # The forward inside decode_one_token covers more (the prefills' launches too): the outer
    # function is the step all the same.
    assert once_a_step(table([("__main__.decode_one_token", 297, 297, 0.97, 900, ()),
                              ("__main__.Decoder.forward", 300, 297, 0.99, 950,
                               ("__main__.decode_one_token",))])) == "__main__.decode_one_token"


def test_candidates_are_measured_on_the_steps_threads_outermost_calls(tmp_path):
    from synth import Synth

    s = Synth()
    # Three steps 0-100, 100-200, 200-300; `f` once a step around two launches, `g` around one.
    for k in range(3):
        t = 100 * k
        s.range("m.f", t + 10, t + 60)
        s.range("m.f", t + 20, t + 30)  # nested: the outer call counts
        s.range("m.g", t + 40, t + 50)
        s.launch(t + 15, t + 17, 1000 + t, 1010 + t)
        s.launch(t + 42, t + 44, 1020 + t, 1030 + t)
        s.launch(t + 70, t + 72, 1040 + t, 1050 + t)
    path = s.write(tmp_path / "t.sqlite")
    trace = load_trace(path)
    steps = pd.DataFrame({"tid": [trace.ops["tid"].iloc[0]] * 3, "start": [0, 100, 200],
                          "end": [100, 200, 300]})
    got = candidates_table(trace, steps, ["m.f", "m.g", "m.absent"])
    assert got.to_dict("records") == [
        {"name": "m.f", "calls": 3, "steps": 3, "cover": 2 / 3, "duration_ns": 150, "inside": ()},
        {"name": "m.g", "calls": 3, "steps": 3, "cover": 1 / 3, "duration_ns": 30,
         "inside": ("m.f",)}]


def test_the_hook_records_are_merged_and_map_ranges_to_functions(tmp_path):
    (tmp_path / "own_code-1.json").write_text(json.dumps({
        "limit": 600, "modules": {"m": "/p/m.py"}, "functions": ["m:f", "m:C.g"], "left_out": 0,
        "capped_at": None, "main": {"named": True, "why": None, "functions": ["step"]}}))
    (tmp_path / "own_code-2.json").write_text(json.dumps({
        "limit": 600, "modules": {"n": "/p/n.py"}, "functions": ["m:f", "n:h"], "left_out": 3,
        "capped_at": "n", "main": {"named": False, "why": None, "functions": []}}))
    record = capture_own.read(tmp_path)
    assert record["functions"] == ["m:f", "m:C.g", "n:h"]
    assert capture_own.specs_by_range(record) == {
        "m.f": "m:f", "m.C.g": "m:C.g", "n.h": "n:h", "__main__.step": "__main__:step"}
    assert capture_own.summary(record) == {
        "modules": 2, "functions": 3, "limit": 600, "left_out": 3, "capped_at": "n",
        "main_functions": 1, "main_why": None}
    assert capture_own.read(tmp_path / "none") is None


def test_a_function_wrapped_before_torch_was_imported_still_calls_through_when_compiled(
        hook, tmp_path, monkeypatch):
    """A module of the program's own that imports no torch is wrapped first; once torch comes,
    its wrapper still steps aside inside a fullgraph compile (the global it reads is torch's)."""
    pytest.importorskip("torch")
    import torch
    import torch._dynamo

    (tmp_path / "early.py").write_text("def double(x):\n    return x * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "early", raising=False)
    monkeypatch.delitem(sys.modules, "torch")  # not imported yet, as the program sees it
    import early

    assert hook.host_times.wrap_host_function(early, "double")
    monkeypatch.setitem(sys.modules, "torch", torch)
    hook.host_times.watch_compiling(torch)  # the hook's callback on torch's import
    torch._dynamo.reset()
    fast = torch.compile(lambda x: early.double(x).relu(), backend="eager", fullgraph=True)
    assert torch.equal(fast(torch.ones(2)), torch.full((2,), 2.0))
    torch._dynamo.reset()
