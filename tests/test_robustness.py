"""A library a notebook can call: pure functions leave their input alone, a run's identity is its
whole content, nothing is chosen at import, nothing unreadable is dropped without a word, and
every nsys call ends (ANALYSIS.md, Robustness)."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synth import metrics_only_trace

from analysis import api
from analysis.capture import profile
from analysis.measures.gpu_metrics import with_step_metrics
from analysis.measures.summary import with_idle_by_step
from analysis.readers import load_trace
from analysis.store import db
from study import overhead

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def test_idle_by_step_returns_a_new_table_and_leaves_its_input_alone():
    table = pd.DataFrame({"step": [1, 2, 3]})
    before = table.copy()
    # Gaps 0 and 1 in the first step, gap 2 in the third; none in the second.
    gaps = {"idle_blocked_ns": np.array([5, 0, 7]), "idle_pre_launch_ns": np.array([1, 2, 0]),
            "idle_in_launch_ns": np.array([0, 3, 4])}
    out = with_idle_by_step(table, gaps, np.array([0, 0, 2]))
    pd.testing.assert_frame_equal(table, before)
    assert out["idle_blocked_ns"].tolist() == [5, 0, 7]
    assert out["idle_pre_launch_ns"].tolist() == [3, 0, 0]
    assert out["idle_in_launch_ns"].tolist() == [3, 0, 4]


def test_step_metrics_return_a_new_table_and_leave_their_input_alone(tmp_path):
    path = metrics_only_trace().write(tmp_path / "m.sqlite", drop=("CUPTI_ACTIVITY_KIND_RUNTIME",))
    samples = load_trace(path).gpu_metrics
    table = pd.DataFrame({"step": [1, 2], "cpu_start_ns": [50, 150], "cpu_end_ns": [150, 300]})
    before, samples_before = table.copy(), samples.copy()
    out, summary = with_step_metrics(table, samples, 0, "cpu_start_ns", "cpu_end_ns", (50, 300),
                                     (4.8e12, "datasheet"), "nvtx range")
    pd.testing.assert_frame_equal(table, before)
    pd.testing.assert_frame_equal(samples, samples_before)
    # synth.metrics_only_trace's drawing: [50,150] is 50 ns at 10 and 50 at 50; [150,300] is
    # 50 ns at 50 and 100 at 90.
    np.testing.assert_allclose(out["sm_active_pct"], [30.0, 11500 / 150])
    assert summary["sm_active_pct"] == pytest.approx(58.0)
    # A device that sampled nothing: the very table back, and no summary.
    same, none = with_step_metrics(table, samples, 7, "cpu_start_ns", "cpu_end_ns", (50, 300),
                                   (None, "unknown"), "nvtx range")
    assert same is table and none is None


def test_load_and_analyse_sets_the_floor_on_new_summaries_not_on_the_analyses_it_made(
        monkeypatch):
    made, real = [], api.run_analysis

    def spy(trace, options):
        made.extend(real(trace, options))
        return list(made)

    monkeypatch.setattr(api, "run_analysis", spy)
    _, _, analyses = api.load_and_analyse(DATA / "runs" / "static")
    assert [("floor" in a.summary) for a in made] == [False]
    assert [("floor" in a.summary) for a in analyses] == [True]
    assert {k: v for k, v in analyses[0].summary.items() if k != "floor"} == made[0].summary


def test_two_captures_equal_at_both_ends_and_in_size_are_two_runs(tmp_path):
    mib = 1 << 20
    ends = b"a" * mib, b"z" * mib
    first, second = tmp_path / "first.sqlite", tmp_path / "second.sqlite"
    first.write_bytes(ends[0] + b"1" * mib + ends[1])
    second.write_bytes(ends[0] + b"2" * mib + ends[1])
    assert db.trace_hash(first) != db.trace_hash(second)
    # What `sha256sum` prints: the whole file, chunk boundaries or not.
    assert db.trace_hash(first) == hashlib.sha256(first.read_bytes()).hexdigest()
    odd = tmp_path / "odd.sqlite"
    odd.write_bytes(b"x" * (3 * db.HASH_CHUNK + 17))
    assert db.trace_hash(odd) == hashlib.sha256(odd.read_bytes()).hexdigest()


def test_the_library_chooses_no_backend_and_draws_the_same_png_under_another(tmp_path):
    """A notebook keeps its inline backend: importing every module sets none and imports no
    pyplot; a figure then drawn under another backend (svg here) is the PNG this process draws."""
    from analysis.api import load_and_analyse
    from analysis.render.plots import plot_analysis

    code = (
        "import pkgutil, importlib, sys, matplotlib, analysis\n"
        "for m in pkgutil.walk_packages(analysis.__path__, 'analysis.'):\n"
        "    importlib.import_module(m.name)\n"
        "import matplotlib.rcsetup as r\n"
        "backend = dict.__getitem__(matplotlib.rcParams, 'backend')\n"
        "print('matplotlib.pyplot' in sys.modules, backend is r._auto_backend_sentinel)\n"
        "matplotlib.use('svg')\n"
        "from analysis.api import load_and_analyse\n"
        "from analysis.render.plots import plot_analysis\n"
        "_, _, (a,) = load_and_analyse(sys.argv[1])\n"
        "plot_analysis(a, 'static', sys.argv[2])\n")
    run = DATA / "runs" / "static"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, str(run), str(tmp_path / "svg.png")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
    _, _, (a,) = load_and_analyse(run)
    plot_analysis(a, "static", tmp_path / "here.png")
    here = (tmp_path / "here.png").read_bytes()
    assert (tmp_path / "svg.png").read_bytes() == here and here[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unreadable_process_file_is_skipped_with_a_line_that_names_it(tmp_path, capsys):
    d = tmp_path / "b8" / "static"
    d.mkdir(parents=True)
    for i, ms in enumerate((1.0, 3.0)):
        bench = {"results": [{"variant": "static", "ms_per_step_median": ms}]}
        (d / f"untraced-p{i}.json").write_text(json.dumps(bench))
    (d / "untraced-p2.json").write_text('{"results": [')  # cut short: the process died writing
    (row,) = overhead.rows(tmp_path)
    assert (row["untraced_ms"], row["processes"]) == (2.0, 2)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"gapscope: skipped {d / 'untraced-p2.json'}: "
                                               "unreadable (")


def test_an_unreadable_run_json_is_replaced_and_said_so(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text("{not json")
    profile.write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"gapscope: {path} could not be read (")
    profile.write_json(path, {"b": 2})  # readable now: merged, nothing said
    assert json.loads(path.read_text()) == {"a": 1, "b": 2}
    assert capsys.readouterr().err == ""


def test_every_nsys_call_in_the_library_has_a_timeout():
    """Each subprocess call of the modules that run nsys passes timeout= (the program under
    `gapscope profile` is the user's and runs as long as it does: tee, its one exception)."""
    import ast

    for path in [*(ROOT / "analysis" / "capture").glob("*.py"),
                 ROOT / "study" / "benchmark.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"
                    and node.func.attr in ("run", "check_output", "call", "check_call")):
                where = f"{path.name}:{node.lineno}"
                if path.name == "benchmark.py" and "WRAPPER" in ast.unparse(node):
                    continue  # gapscope itself, timed; not nsys
                if path.name == "hook.py" and "list(cmd)" in ast.unparse(node):
                    continue  # the user's program in an untraced run: it runs as long as it does
                assert "timeout" in {k.arg for k in node.keywords}, where


def test_a_hung_nsys_in_the_doctor_is_a_line_not_a_traceback(monkeypatch):
    from analysis.capture import doctor

    def hang(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, kw.get("timeout"))

    monkeypatch.setattr(doctor.subprocess, "run", hang)
    metrics = doctor.check_metrics("/x/nsys", gpu_ok=True, capture=True)
    assert (metrics["status"], metrics["detail"]) == (
        "WARN", "`nsys profile --gpu-metrics-devices=help` took over 60 s")
