"""The host table (docs/METRICS.md, "Host time"): each step's host period split by the named code
that spent it, worked out by hand on tests/synth.py's host_trace, its bounds, its untraced twin,
and its outputs; then pinned on real H200 captures (tests/data/user/, tests/data/runs/)."""

import io
import json

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import DATA_DIR, plain_copy
from synth import host_trace, syncs_trace

import analysis
from analysis.cli import main
from analysis.measures.host_untraced import with_host_untraced
from analysis.measures.summary import Options, analyze
from analysis.readers import load_trace
from analysis.readers.untraced import read_untraced_steps

FORWARD = "pkg.model.LM.forward"
WARPER = "pkg.gen.Warper.__call__"
LOOP = "pkg.gen.Loop.run"
STEPS = r"^pkg\.model\.LM\.forward$"


def host(tmp_path, scale=1, name="h.sqlite"):
    (a,) = analyze(load_trace(host_trace(scale).write(tmp_path / name)), Options(STEPS))
    return a


def by_row(a, step_row):
    rows = a.host[a.host["step_row"] == step_row].set_index("name")
    return {r: tuple(rows.loc[r, ["python_ns", "cuda_ns", "sync_ns"]]) for r in rows.index}


def test_each_step_host_period_is_split_by_the_innermost_named_code(tmp_path):
    a = host(tmp_path)
    steps = a.host_steps
    # Step 1 runs to step 2's start; step 2 is cut at its end (the pause after it is longer
    # than the median period); step 3 is the last.
    assert list(steps["host_start_ns"]) == [10, 110, 400]
    assert list(steps["host_end_ns"]) == [110, 160, 450]
    assert list(steps["paused"]) == [False, True, True]
    # (python, cuda, sync): the forward's launches and its capture check are CUDA calls; the
    # per-launch lookup (cuKernelGetName) is not read; the sync is split at the loop's end.
    assert by_row(a, 0) == {FORWARD: (35, 15, 0), WARPER: (15, 5, 0), LOOP: (15, 0, 5),
                            "other": (5, 0, 5)}
    assert by_row(a, 1) == {FORWARD: (40, 10, 0)}
    assert by_row(a, 2) == {FORWARD: (45, 5, 0)}
    assert list(steps["host_period_ns"]) == list(a.host.groupby("step_row")["ns"].sum())
    assert list(steps["forward_ns"]) == [50, 50, 50]
    assert list(steps["forward_python_ns"]) == [35, 40, 45]
    # Calls: the ranges that start in the step (the loop began before it).
    first = a.host[a.host["step_row"] == 0].set_index("name")["calls"].to_dict()
    assert first == {FORWARD: 1, WARPER: 1, LOOP: 0, "other": 0}


def test_the_summary_means_rows_over_the_steps_and_the_least_named_step(tmp_path):
    h = host(tmp_path).summary["host"]
    assert (h["steps"], h["steps_in_means"], h["paused_steps"]) == (3, 3, 2)
    assert h["period_ns_mean"] == pytest.approx(200 / 3)
    assert h["named_share"] == pytest.approx(190 / 200)
    assert h["named_share_min"] == pytest.approx(0.9)
    rows = {r["name"]: r for r in h["rows"]}
    assert [r["name"] for r in h["rows"]] == [FORWARD, LOOP, WARPER, "other"]
    assert (rows[FORWARD]["ns"], rows[FORWARD]["python_ns"], rows[FORWARD]["cuda_ns"]) == (
        50, 40, 10)
    assert rows[WARPER]["ns"] == pytest.approx(20 / 3) and rows[WARPER]["kind"] == "code"
    assert rows["other"]["kind"] == "other" and h["why"] is None


def test_bounds_set_the_host_work_left_against_the_gpu_busy_time(tmp_path):
    # In µs: GRAPH_LAUNCH_NS (10 µs) is then 10 units, as the hand-worked figures take it.
    b = {x["scenario"]: x for x in host(tmp_path, 1000).summary["host"]["bounds"]}
    graph = b["forward as one CUDA graph"]
    # remaining = host - sync - forward + a launch: 50, 10, 10; busy 26, 25, 15 (µs).
    assert (graph["lower_ns"], graph["upper_ns"], graph["host_period_ns"], graph["step_ns"]) == (
        25_000, 35_000, 50_000, 50_000)
    assert (graph["speedup_min"], graph["speedup_max"]) == pytest.approx((50 / 35, 2.0))
    python = b["forward's Python gone, its launches kept"]
    assert (python["lower_ns"], python["upper_ns"]) == (25_000, 35_000)
    warper = b["Warper.__call__ gone"] if "Warper.__call__ gone" in b else b[f"{WARPER} gone"]
    assert (warper["lower_ns"], warper["upper_ns"], warper["removed_ns"]) == (50_000, 50_000, 0)
    # The forward's own row is not a scenario twice.
    assert f"{FORWARD} gone" not in b


def test_a_step_whose_host_runs_ahead_of_the_gpu_gains_nothing_from_less_host_work():
    # Graph replays queued faster than they run (µs): host periods 90, 90, 100 with 10, 10, 0
    # of it blocked; each launched 260 of GPU work. The step as it runs is the GPU's, 260; with
    # the `other` row's 60 gone, the host work left (20, 20, 40) is below the GPU busy: both
    # bounds are the busy time, 1.00x; never the host period (a 0.35x "speed-up").
    from analysis.measures.host_bound import bounds

    per_step = pd.DataFrame({"step_index": [0, 1, 2], "host_period_ns": [90, 90, 100],
                             "sync_ns": [10, 10, 0], "forward_ns": [0, 0, 0],
                             "forward_python_ns": [0, 0, 0]})
    rows = pd.DataFrame({"step_index": [0, 1, 2], "name": ["other"] * 3,
                         "python_ns": [20, 20, 20], "cuda_ns": [40, 40, 40]})
    (b,) = bounds(per_step, rows, [260, 260, 260]).to_dict("records")
    assert b["scenario"] == "other (no named code) gone"
    assert (b["lower_ns"], b["upper_ns"], b["step_ns"], b["host_period_ns"]) == (260, 260, 260, 90)
    assert (b["speedup_min"], b["speedup_max"]) == (1.0, 1.0)


TWIN = {"format": "gapscope-untraced-steps/1", "source": "hook", "numbering": "order",
        "window": None, "runs": [{"step": [1, 2, 3], "start_ns": [0, 60, 300],
                                  "end_ns": [40, 90, 330]}],
        "host": [{"twin_run": 1, "process": 0, "thread": "MainThread", "step": [1, 2, 3],
                  "start_ns": [0, 60, 300], "end_ns": [40, 90, 330], "next_ns": [60, 300, None],
                  "rows": {FORWARD: {"in": [30, 30, 30], "after": [0, 0, 0]},
                           WARPER: {"in": [0, 0, 0], "after": [10, 5, 0]},
                           LOOP: {"in": [5, 0, 0], "after": [10, 0, 0]},
                           "": {"in": [5, 0, 0], "after": [0, 205, 0]}}}]}


def test_the_untraced_twin_sets_each_row_beside_the_traced_one(tmp_path):
    path = tmp_path / "untraced_steps.json"
    path.write_text(json.dumps(TWIN))
    a = with_host_untraced(host(tmp_path), read_untraced_steps(path))
    h = a.summary["host"]
    rows = {r["name"]: r for r in h["rows"]}
    # Step 2's after-time is a pause (210 > the median period 150): left out, as traced.
    assert rows[FORWARD]["untraced_ns"] == 30 and rows[FORWARD]["profiler_share"] == 0.4
    assert rows[WARPER]["untraced_ns"] == pytest.approx(10 / 3)
    assert rows[LOOP]["untraced_ns"] == 5 and rows["other"]["untraced_ns"] == pytest.approx(5 / 3)
    u = h["untraced"]
    assert (u["runs"], u["steps"], u["period_ns_mean"]) == (1, 3, 40)
    assert u["profiler_share"] == pytest.approx(0.4)
    assert all("untraced_lower_ns" in b for b in h["bounds"])


def test_a_capture_without_named_code_says_why_and_keeps_the_parts(tmp_path):
    (a,) = analyze(load_trace(syncs_trace().write(tmp_path / "s.sqlite")))
    h = a.summary["host"]
    assert h["why"].startswith("no named code inside the steps")
    # The NVTX steps' own ranges mark steps, not code: none of it is named.
    assert [(r["name"], r["kind"]) for r in h["rows"]] == [("Step N", "step")]
    assert h["named_share"] == 0 and h["sync_ns_mean"] == (30 + 15 + 20 + 18) / 2


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_every_output_has_the_host_table(tmp_path):
    path = host_trace(1000).write(tmp_path / "h.sqlite")
    text = run("analyze", path, "--steps", STEPS)
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("  host time"))
    assert lines[head].startswith("  host time      0.07 ms a step on its thread (mean of 3 steps)")
    assert lines[head + 2].split() == ["ms", "a", "step", "(mean)", "total", "python", "cuda",
                                       "sync", "share"]
    assert lines[head + 3].split() == ["LM.forward", "0.05", "0.04", "0.01", "0.00", "75.0%"]
    assert all(len(line) <= 100 for line in lines)
    csv = run("analyze", path, "--steps", STEPS, "--format", "csv", "--table", "host")
    table = pd.read_csv(io.StringIO(csv.stdout))
    assert list(table.columns) == ["step_row", "step", "thread", "name", "kind", "calls",
                                   "python_ns", "cuda_ns", "sync_ns", "ns", "forward_ns",
                                   "device"]
    assert table.groupby("step_row")["ns"].sum().tolist() == [100_000, 50_000, 50_000]
    out = json.loads(run("analyze", path, "--steps", STEPS, "--format", "json").stdout)
    assert out["host"]["name"][0] == FORWARD and "bounds" in out["summary"]["host"]
    md = run("analyze", path, "--steps", STEPS, "--format", "md").stdout
    assert f"| {FORWARD} | 0.050 | 0.040 | 0.010 | 0.000 | 75.0% | 1.00 |" in md
    assert "| forward as one CUDA graph | 0.025 | 0.035 | 0.050 | 0.025 | 1.43-2.00x |" in md


# --- real captures ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def user(tmp_path_factory):
    out = tmp_path_factory.mktemp("user")
    paths = {}
    for name in ("gen-dynamic-fn", "loop-eager-fn"):
        paths[name] = plain_copy(DATA_DIR / "user" / f"{name}.sqlite.xz", out / f"{name}.sqlite")
    return paths


def test_a_generate_loop_host_time_is_mostly_its_forward(user):
    (a,) = analysis.open(user["gen-dynamic-fn"], steps=r"GPT2LMHeadModel\.forward$")
    h = a.summary["host"]
    assert (h["steps"], h["steps_in_means"], h["paused_steps"]) == (100, 98, 2)
    rows = {r["name"]: r for r in h["rows"]}
    forward = rows["transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel.forward"]
    # Only the forward is traced in this capture: the rest of generate() is `other`.
    assert set(rows) == {forward["name"], "other"}
    assert round(forward["share"], 4) == 0.8541 and round(h["named_share_min"], 4) == 0.8178
    assert round(forward["cuda_ns"] / forward["ns"], 3) == 0.241
    graph = h["bounds"][0]
    assert graph["scenario"] == "forward as one CUDA graph"
    # GPU busy over the whole host period: the sampling and stop check's kernels too.
    assert (graph["host_period_ns"], graph["busy_ns"]) == (6680463, 1375545.5)


def test_a_loop_of_its_own_names_its_step_function_and_the_library_ranges_in_it(user):
    (a,) = analysis.open(user["loop-eager-fn"], steps=r"toy_lm\.decode_one_token$")
    rows = {r["name"]: r for r in a.summary["host"]["rows"]}
    assert set(rows) == {"toy_lm.decode_one_token", "cub::DeviceRadixSort",
                         "cub::DeviceScan::InclusiveScan", "other"}
    assert a.summary["host"]["named_share_min"] > 0.98


def test_the_harness_steps_name_its_forward_and_stop_check(data_dir):
    (a,) = analysis.open(data_dir / "runs" / "static")
    h = a.summary["host"]
    rows = {r["name"]: r for r in h["rows"]}
    assert list(rows) == ["Model Forward", "Check Stop Condition", "Step N", "other"]
    assert rows["Step N"]["kind"] == "step"
    assert round(h["named_share"], 4) == 0.9941
    graph = h["bounds"][0]
    assert (graph["lower_ns"], graph["upper_ns"]) == (1452900.5, 1550066)


def test_the_ladder_check_says_where_a_measured_step_lies_against_the_bound(tmp_path):
    from study.host_ladder import _where, bench_rungs

    assert [_where(v, 1.0, 2.0) for v in (0.9, 1.0, 1.5, 2.0, 2.3, None)] == [
        "10.0% below", "inside", "inside", "inside", "15.0% above", "n/a"]
    (tmp_path / "bench-ladder-b8.json").write_text(json.dumps({
        "config": {"model": "gpt2", "batch": 8},
        "results": [{"variant": "graphed", "ms_per_step_median": 1.15},
                    {"variant": "compiled", "ms_per_step_median": 2.49}]}))
    assert bench_rungs(tmp_path) == {("gpt2", 8, "graphed"): 1.15, ("gpt2", 8, "compiled"): 2.49}


def test_the_means_cost_table_reads_the_batch_calls(tmp_path):
    from study.host_overhead import call_table

    path = tmp_path / "overhead.jsonl"
    path.write_text("".join(json.dumps({"mode": m, "calls": 10, "ns_per_call": ns}) + "\n"
                            for m, ns in (("bare", 40.0), ("clock", 900.04), ("ranges", 300.0),
                                          ("ranges", 650.0), ("nsys", 2100.0))))
    table = call_table(path)
    assert table.values.tolist() == [
        ["a bare call", "without nsys", 40.0],
        ["the hook's wrapper, twin (host clock)", "without nsys", 900.0],
        ["the hook's wrapper, traced (NVTX push and pop)", "without nsys", 300.0],
        ["the hook's wrapper, traced (NVTX push and pop)", "under nsys", 650.0],
        ["nsys's own function-trace wrapper (sys.audit), under nsys", "under nsys", 2100.0]]


def test_a_long_row_name_is_cut_where_two_rows_that_end_alike_stay_apart():
    from analysis.render.host import cut_row as _cut

    assert _cut("MinNewTokensLengthLogitsProcessor.__call__", 34) == (
        "MinNewTokens…itsProcessor.__call__")
    assert _cut("RepetitionPenaltyLogitsProcessor.__call__", 34) == (
        "RepetitionPe…itsProcessor.__call__")
    assert _cut("GenerationMixin.prepare_inputs_for_generation", 34) == (
        "…xin.prepare_inputs_for_generation")
    # Two classes' long method stay apart by their classes' ends.
    assert _cut("LlamaForCausalLM.prepare_inputs_for_generation", 34) == (
        "…lLM.prepare_inputs_for_generation")
    assert _cut("a_range_name_with_no_dots_that_is_long", 20) == "…o_dots_that_is_long"
    assert _cut("LogitsProcessorList.__call__", 34) == "LogitsProcessorList.__call__"
