"""What a new user tripped on in the first hour (issue 30), each behaviour as it now is: the
library's frames agree on what a step is, bad input is named for what it is, compare and
ranges say what they do."""

import json
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

import analysis
from analysis.cli import main

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
STATIC = DATA / "h200-eager-static-bs16.sqlite.xz"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def static():
    (a,) = analysis.open(STATIC)
    return a


def test_an_ops_step_is_the_step_number_of_the_steps_and_gaps_tables(static):
    a = static
    assert a.steps["step"].tolist() == list(range(31, 51))
    on = a.ops[a.ops["step"] >= 0]
    assert sorted(on["step"].unique()) == list(range(31, 51))
    assert set(a.gaps["step"]) <= set(on["step"])
    # The merge a notebook writes first: every op of a step gets its step's row.
    merged = a.steps[["step", "op_records"]].merge(on, on="step")
    assert len(merged) == len(on) == a.steps["op_records"].sum()
    assert (merged.groupby("step").size() == a.steps.set_index("step")["op_records"]).all()


def test_the_perfetto_timeline_numbers_ops_and_gaps_alike(tmp_path):
    out = tmp_path / "t.json"
    assert run("analyze", STATIC, "--perfetto", out, "--format", "json").exit_code == 0
    events = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    op_steps = {e["args"]["step"] for e in events if e["cat"] == "op"}
    gap_steps = {e["args"]["step"] for e in events if e["cat"] == "gap"}
    assert gap_steps <= op_steps and min(gap_steps) == 31 and max(op_steps) == 50


FORWARD = "transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel.forward"


def forwards_trace(tmp_path) -> Path:
    """Three forwards of a function trace (a name with digits of its own) and two numbered
    ranges, one launch each."""
    from synth import Synth

    s = Synth()
    for i in range(3):
        s.range(FORWARD, 100 * i, 100 * i + 80)
        s.range(f"layer_{i}", 100 * i + 10, 100 * i + 20)
        s.launch(100 * i + 12, 100 * i + 14, 100 * i + 30, 100 * i + 60)
    return s.write(tmp_path / "fwd.sqlite")


def test_ranges_shapes_keep_an_identifiers_digits_and_give_a_pattern_to_paste(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no pandas UserWarning about match groups
        result = run("ranges", forwards_trace(tmp_path), "--shapes")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"       3   {FORWARD}",
        "       3   layer_N",
        "6 ranges, 2 kinds of name; the steps pattern '^Step (\\d+)$' takes none,",
        "nor does torch.profiler's '^ProfilerStep#(\\d+)$': analyze infers the steps from the "
        "trace",
        "the first kind above as the steps: --steps "
        "'^transformers\\.models\\.gpt2\\.modeling_gpt2\\.GPT2LMHeadModel\\.forward$'"]
    # The pattern it gives takes the forwards as they are named.
    pasted = result.output.splitlines()[-1].split("'")[1]
    (a,) = analysis.open(tmp_path / "fwd.sqlite", steps=pasted)
    assert (a.summary["steps_from"], a.steps["step"].tolist()) == ("function", [1, 2, 3])


def test_ranges_says_one_kind_and_that_infer_takes_no_range(tmp_path):
    path = forwards_trace(tmp_path)
    one = run("ranges", path, "--shapes", "--steps", "^layer_(\\d+)$").output.splitlines()
    assert one[-1] == "6 ranges, 2 kinds of name; * the steps pattern '^layer_(\\d+)$' takes 3 " \
                      "of them"
    assert run("ranges", path, "--steps", "infer").output.splitlines()[-1] == (
        "6 ranges, 4 names; --steps infer: analyze infers the steps from the trace, taking no "
        "range")
    lone = run("ranges", path, "--steps", "^transformers")
    assert lone.output.splitlines()[-1] == "6 ranges, 4 names; * the steps pattern " \
                                           "'^transformers' takes 3 of them"


def test_analyze_with_steps_infer_says_nothing_of_a_pattern_group():
    result = CliRunner().invoke(main, ["analyze", str(STATIC), "--steps", "infer"])
    assert result.exit_code == 0, result.output
    assert "gapscope: note" not in result.stderr


# --- compare ---------------------------------------------------------------------------------

PIPELINED = DATA / "h200-eager-pipelined-seed-bs16.sqlite.xz"


def test_identical_inputs_get_identical_cis_wherever_they_sit(static):
    (p,) = analysis.open(PIPELINED)
    twice = analysis.compare([static, static]).table
    assert twice["period_ns_median_ci"].iloc[0] == twice["period_ns_median_ci"].iloc[1]
    assert twice["period_ns_median_vs_first_ci"].iloc[1] == (0.0, 0.0)
    first = analysis.compare([static, p]).table
    moved = analysis.compare([p, static, static]).table
    for key in ("period_ns_median_ci", "step_cpu_ns_median_ci", "bubble_ns_median_ci"):
        assert first[key].tolist() == [moved[key].iloc[1], moved[key].iloc[0]]
        assert moved[key].iloc[1] == moved[key].iloc[2]
    assert first["period_ns_median_ci"].iloc[0] == (8365230.0, 8797386.5)


def _run_dir(path: Path, trace, config: dict | None) -> Path:
    path.mkdir()
    trace.write(path / "capture.sqlite")
    if config is not None:
        (path / "run.json").write_text(json.dumps({"config": config}))
    return path


def test_compare_of_a_folder_takes_its_run_folders_and_its_loose_exports(tmp_path):
    from synth import causes_trace

    _run_dir(tmp_path / "b8", causes_trace(), {"variant": "static", "batch": 8})
    _run_dir(tmp_path / "b32", causes_trace(), {"variant": "static", "batch": 32})
    causes_trace().write(tmp_path / "mine.sqlite")
    causes_trace().write(tmp_path / "theirs.sqlite.gz")  # not gzipped: named so, read as it is
    result = CliRunner().invoke(main, ["compare", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["label"] for r in rows] == ["b32", "b8", "mine", "theirs"]
    # Two run folders of different batches: ranked, with a note saying they differ.
    assert [r["work"] for r in rows] == ["batch=32", "batch=8", "batch=?", "batch=?"]
    text = CliRunner().invoke(main, ["compare", str(tmp_path / "b32"), str(tmp_path / "b8")])
    # The comparison's last line (the host tables side by side follow it, a block of their own).
    comparison = text.stdout.split("\n\nhost ms a step")[0]
    # Its last note, wrapped at 100 columns.
    assert comparison.split("\n\n")[-1].splitlines()[-2:] == [
        "note: the runs compute different steps (batch 32, 8): ranks and differences set unlike "
        "steps side by", "  side"]
    same = run("compare", tmp_path / "b8", tmp_path / "mine.sqlite")
    assert "note: the runs compute" not in same.stdout


def test_compare_db_prints_what_compare_of_the_traces_prints(tmp_path):
    from synth import metrics_only_trace

    runs = [DATA / "runs" / n for n in ("static", "graphed")]
    metrics = tmp_path / "metrics"
    _run_dir(metrics, metrics_only_trace(), {"variant": "fused", "batch": 32})
    db = tmp_path / "runs.db"
    # A capture of GPU metrics alone goes into the database too (compare reads its metrics).
    assert run("db", "add", db, *runs, metrics).exit_code == 0
    traced = run("compare", *runs, metrics)
    stored = run("compare", "--db", db)
    assert stored.exit_code == 0, stored.output
    assert "rank traced / untraced       2 / 2" in stored.stdout
    assert stored.stdout == traced.stdout


# --- hints for how gapscope was installed ----------------------------------------------------


def test_hints_name_the_source_trees_commands_only_in_a_source_tree(tmp_path, monkeypatch):
    import sys

    from analysis import install
    from analysis.capture.doctor import check_torch
    from analysis.readers.runs import find_trace

    monkeypatch.setitem(sys.modules, "torch", None)  # torch not importable
    (tmp_path / "capture.nsys-rep").write_bytes(b"")
    assert install.source_tree()
    assert check_torch()["fix"] == "`make install` (or pip install -e '.[harness]')"
    monkeypatch.setattr(install, "ROOT", tmp_path)  # a wheel's site-packages/gapscope
    assert not install.source_tree()
    assert check_torch()["fix"] == "pip install torch transformers nvtx (the harness' part of " \
                                   "gapscope)"
    with pytest.raises(analysis.TraceError) as e:
        find_trace(tmp_path)
    assert "scripts/" not in str(e.value) and str(e.value).endswith(
        f"`nsys export --type sqlite -o {tmp_path / 'capture.sqlite'} "
        f"{tmp_path / 'capture.nsys-rep'}`")
    assert "make" not in run("doctor", "--help").output


def test_gapscope_version_says_the_version_and_where_it_runs_from():
    result = run("--version")
    assert (result.exit_code, result.output) == (0, f"gapscope 0.1.0 (source tree {ROOT})\n")


def test_make_test_says_bringing_up_nodes_once_and_each_skip_reason_with_its_count():
    from types import SimpleNamespace

    import conftest

    said = []
    reporter = SimpleNamespace(ensure_show_status=lambda: said.append("bringing up nodes..."))
    config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: reporter))
    conftest.pytest_xdist_setupnodes(config, [])
    for _ in range(2):  # as the workers start, and once they have collected
        reporter.ensure_show_status()
    assert said == ["bringing up nodes..."]

    def skip(reason):
        return SimpleNamespace(longrepr=("tests/x.py", 1, f"Skipped: {reason}"))

    lines = []
    terminal = SimpleNamespace(write_line=lines.append, stats={"skipped": [
        skip("needs a CUDA GPU"), skip("needs two GPUs"), skip("needs a CUDA GPU")]})
    conftest.pytest_terminal_summary(terminal)
    assert lines == ["skipped 2: needs a CUDA GPU", "skipped 1: needs two GPUs"]


# --- the figures and the timeline ------------------------------------------------------------


def _row_texts(ax, y_lo: float, y_hi: float) -> list:
    return [t.get_text() for t in ax.texts if y_lo <= t.get_position()[1] <= y_hi]


def test_the_timeline_names_the_step_of_the_gpu_work_at_either_edge():
    from analysis.render.plots import new_figure
    from analysis.render.plots_timeline import (
        GPU_ROW_Y,
        HOST_ROW_Y,
        ROW_HEIGHT,
        draw_overview,
        draw_zoom,
        zoom_window,
    )

    # The fused run's host runs a step ahead: host Step 40 starts as the GPU runs Step 39 (the
    # steps drawn, three typical ones nearest the middle: 40 to 42).
    a = analysis.load(DATA / "runs" / "fused")
    fig = new_figure()
    overview, zoom = fig.add_subplot(211), fig.add_subplot(212)
    window = zoom_window(a)
    draw_overview(overview, a, window[:2])
    assert _row_texts(overview, GPU_ROW_Y, GPU_ROW_Y + ROW_HEIGHT) == [
        "Step 39", "Step 40", "Step 41", "Step 42"]
    assert _row_texts(overview, HOST_ROW_Y, HOST_ROW_Y + ROW_HEIGHT) == [
        "Step 40", "Step 41", "Step 42", "Step 43"]
    assert overview.get_title().startswith("Step 40 to Step 42, binned to 1000 columns")
    draw_zoom(zoom, a, window)
    assert zoom.get_title().startswith("zoom: the last ops of Step 40 and the first of Step 41")
    # One stream: its row 0-1, the GPU's steps 1.1-1.9, the host's 2.1-2.9.
    assert _row_texts(zoom, 1, 2) == ["Step 40", "Step 41"]
    assert _row_texts(zoom, 2, 3) == ["Step 41", "Step 42"]


def test_two_threads_are_drawn_and_written_thread_by_thread(tmp_path):
    from test_analysis_infer import two_threads

    from analysis.render.perfetto import chrome_trace
    from analysis.render.plots import draw_step_bars, draw_twin, new_figure

    (a,) = analysis.open(two_threads().write(tmp_path / "t.sqlite"))
    fig = new_figure()
    bars, period, bubble = fig.add_subplot(311), fig.add_subplot(312), fig.add_subplot(313)
    draw_step_bars(bars, a)
    draw_twin((period, bubble), a, None)
    for ax in (bars, period, bubble):
        # Each thread's steps a run of their own, named, every step a tick.
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4"] * 2
        assert [t.get_text() for t in ax.texts] == ["thread python3 (1001)",
                                                    "thread python3 (1002)"]
    doc = json.loads(chrome_trace([("t", [a], a.trace.strings, a.trace.blocking)]))
    tracks = [e["args"]["name"] for e in doc["traceEvents"]
              if e["ph"] == "M" and e["name"] == "thread_name"]
    assert [t for t in tracks if "steps" in t] == [
        "NVTX steps: thread python3 (1001)", "NVTX steps: thread python3 (1002)",
        "steps (GPU): thread python3 (1001)", "steps (GPU): thread python3 (1002)"]


def test_load_gives_one_analysis_and_says_so_where_the_steps_ran_on_several_devices(tmp_path):
    from synth import causes_trace

    t = causes_trace()
    t.launch(20, 25, 30, 90, device=1)
    path = t.write(tmp_path / "two.sqlite")
    with pytest.raises(analysis.TraceError) as e:
        analysis.load(path)
    assert str(e.value) == (f"{path}: the steps ran on devices [0, 1]: load(path, device=N) "
                            "for one, open_devices(path) for each")
    assert analysis.load(path, device=1).device == 1
    assert [a.device for a in analysis.open_devices(path)] == [0, 1] == [
        a.device for a in analysis.open(path)]
    a = analysis.load(tmp_path / "two.sqlite", device=0)
    with pytest.raises(analysis.TraceError, match=r"^step 9: the steps are 1 to 2 \(2 of "):
        a.step(9)
    # A stored Analysis keeps its summary and steps: drawing it says where its capture is.
    with analysis.Database(tmp_path / "runs.db") as db:
        db.add([a])
        (kept,) = db.analyses()
    with pytest.raises(analysis.TraceError, match="plot: a stored Analysis keeps no ops to draw"):
        kept.plot()
    with pytest.raises(analysis.TraceError, match="kernels: this Analysis .kind 'stored'. has "
                                                  "no ops"):
        kept.kernels()


def test_a_graph_level_and_a_node_level_capture_of_one_configuration_are_not_repeats(tmp_path):
    from test_analysis_graphs import graph_only

    def node_level():
        """graph_only's steps with the graph's kernels recorded one by one (node level)."""
        from synth import GRAPH_LAUNCH, Synth

        t = Synth()
        for k, (start, end) in enumerate(((0, 40), (40, 90), (90, 130))):
            t.range(f"Step {k + 1}", start, end)
            t.launch(start + 2, start + 6, start + 10, start + 25, api=GRAPH_LAUNCH)
        return t

    config = {"variant": "graphed", "batch": 8}
    runs = [_run_dir(tmp_path / f"graph{i}", graph_only(), config) for i in (1, 2)]
    runs.append(_run_dir(tmp_path / "node", node_level(), config))
    rows = json.loads(run("compare", *runs, "--format", "json").stdout)["between_runs"]
    assert [(r["label"], r["runs"]) for r in rows] == [
        ("graphed cuda_graph_trace=graph", 2), ("graphed cuda_graph_trace=node", 1)]


def test_matplotlib_gets_a_folder_of_its_own_where_home_cannot_be_written(tmp_path,
                                                                          monkeypatch):
    from analysis.render import mpl_config

    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}
    mpl_config.quiet_config_dir(env)
    assert "MPLCONFIGDIR" not in env  # ~/.config/matplotlib can be made
    # A HOME nobody may write in (as root, os.access says yes to everything: stood in for).
    asked = []
    monkeypatch.setattr(mpl_config.os, "access", lambda p, mode: asked.append(Path(p)) and False)
    mpl_config.quiet_config_dir(env)
    assert asked == [home] and Path(env["MPLCONFIGDIR"]).is_dir()
    kept = {"HOME": str(home), "MPLCONFIGDIR": "/mine"}
    mpl_config.quiet_config_dir(kept)
    assert kept["MPLCONFIGDIR"] == "/mine"


def test_a_folder_of_run_directories_given_to_analyze_points_at_compare(tmp_path):
    from click.testing import CliRunner

    from analysis.cli import main

    for name in ("a", "b"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "capture.sqlite").write_bytes(b"")
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "runs")])
    assert result.exit_code == 2
    assert result.stderr == (
        f"gapscope: error: {tmp_path / 'runs'}: a folder of 2 run directories (a, ...), not one: "
        f"analyse one of them, or compare them all with `gapscope compare {tmp_path / 'runs'}`\n")


def test_the_figures_name_function_steps_by_class_method_and_number():
    import pandas as pd

    from analysis.render.plots_timeline import step_labels, title_lines

    f = "transformers.models.llama.modeling_llama.LlamaForCausalLM.forward"
    assert step_labels(pd.DataFrame({"name": [f, f], "step": [47, 48]})) == [
        "LlamaForCausalLM.forward 47", "LlamaForCausalLM.forward 48"]
    # NVTX steps name themselves.
    assert step_labels(pd.DataFrame({"name": ["Step 3", "Step 4"], "step": [3, 4]})) == [
        "Step 3", "Step 4"]
    assert title_lines("word " * 40).count("\n") == 1
