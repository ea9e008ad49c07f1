"""`gapscope compare` of runs with GPU metrics (analysis/render/hardware.py): captures of metrics
alone get the hardware table only, traced ones both tables; values worked out by hand."""

import json

import golden
from click.testing import CliRunner
from synth import metrics_only_trace

from analysis.cli import main


def metrics_run(tmp_path, name: str, end2_ns: int):
    """metrics_only_trace (SMs active 58.0%, DRAM read 20.0% = 960 GB/s, GR active 92.0%, no
    tensor metric) with a twin whose Step 2 ends at END2 (Step 1 at 100: period END2 - 100) and
    floors of 20 and 40 bytes at 1 GB/s (Step 2's floor 40 ns; mean 30 ns)."""
    d = tmp_path / name
    d.mkdir()
    trace = metrics_only_trace()
    trace.range(name, 0, 1)  # no step: makes each run's export its own (the database's key)
    trace.write(d / "capture.sqlite", drop=("CUPTI_ACTIVITY_KIND_RUNTIME",))
    (d / "run.json").write_text(json.dumps({
        "config": {"variant": name}, "versions": {"gpu": "NVIDIA H200"},
        "timing": {"ms_per_step": 2e-4},
        "floor": {"kv_slots_read": "0..pos", "bytes_by_step": [[1, 20], [2, 40]]},
        "untraced": {"ms_per_step_median": 1e-4, "floor": {"copy_bytes_per_s": 1e9}}}))
    (d / "untraced_steps.json").write_text(json.dumps({
        "format": "gapscope-untraced-steps/1", "source": "cuda-events", "variant": name,
        "window": None, "ms_per_step_median": 1e-4,
        "runs": [{"step": [1, 2], "start_ns": [0, 120], "end_ns": [100, end2_ns]}]}))
    return d


def test_metrics_only_runs_compare_in_the_hardware_table(tmp_path):
    # a: untraced period 80 ns, floor 40/80 = 50%; b: 160 ns, 25%, 80/160 = 0.50x of a's speed.
    a, b = metrics_run(tmp_path, "fused", 180), metrics_run(tmp_path, "graphed", 260)
    out = CliRunner().invoke(main, ["compare", str(a), str(b), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["runs"] == []  # nothing traced: no gap comparison
    first, second = doc["hardware"]
    assert (first["label"], first["untraced_ms_per_step"], first["floor_pct"]) == ("fused", 8e-5,
                                                                                  50)
    assert first["speed_vs_first"] == 1 and first["floor_ms_per_step"] == 3e-5
    assert (second["untraced_ms_per_step"], second["floor_pct"], second["speed_vs_first"]) == (
        1.6e-4, 25, 0.5)
    assert (second["sm_active_pct"], second["dram_read_pct"], second["dram_read_gbps"],
            second["gr_active_pct"], second["tensor_active_pct"]) == (58, 20, 960, 92, None)
    text = CliRunner().invoke(main, ["compare", str(a), str(b)]).output
    lines = text.splitlines()
    assert lines[0] == "GPU metrics, time-weighted over each run's steps"
    assert lines[3] == ("fused       2       0.000    1.00x    0.000    50.0   58.0      20.0"
                        "   960  92.0        –")
    assert lines[4].startswith("graphed     2       0.000    0.50x    0.000    25.0")
    assert max(map(len, lines)) <= 100
    md = CliRunner().invoke(main, ["compare", str(a), str(b), "--format", "md"]).output
    assert golden.row(md, "graphed") == [2, 0, 0.5, 0, 25, 58, 20, 960, 92, None]


def test_a_traced_run_and_a_metrics_run_each_go_where_they_can(tmp_path, data_dir):
    traced = data_dir / "h200-eager-static-bs16.sqlite.xz"
    m = metrics_run(tmp_path, "fused", 180)
    out = json.loads(CliRunner().invoke(main, ["compare", str(traced), str(m), "--format",
                                               "json"]).output)
    assert [r["label"] for r in out["runs"]] == ["h200-eager-static-bs16"]
    assert [r["label"] for r in out["hardware"]] == ["fused"]  # the traced one sampled none
    text = CliRunner().invoke(main, ["compare", str(traced), str(m)]).output
    assert "GPU metrics, time-weighted over each run's steps" in text
    assert max(map(len, text.splitlines())) <= 100


def test_long_labels_are_numbered_to_fit(tmp_path):
    a = metrics_run(tmp_path, "fused-with-a-very-long-name-for-this-run", 180)
    text = CliRunner().invoke(main, ["compare", str(a), str(a)]).output
    lines = text.splitlines()
    assert lines[3].startswith("#1 ") and lines[5].startswith(
        "#1: fused-with-a-very-long-name-for-this-run")
    assert max(map(len, lines)) <= 100


def test_the_database_gives_the_same_hardware_table(tmp_path):
    a, b = metrics_run(tmp_path, "fused", 180), metrics_run(tmp_path, "graphed", 260)
    db = tmp_path / "runs.db"
    direct = CliRunner().invoke(main, ["compare", str(a), str(b), "--db", str(db), "--format",
                                       "json"])
    stored = CliRunner().invoke(main, ["compare", "--db", str(db), "--format", "json"])
    assert stored.exit_code == 0, stored.output
    assert json.loads(stored.stdout)["hardware"] == json.loads(direct.stdout)["hardware"]
    doc = json.loads(stored.stdout)
    assert len(doc["hardware"]) == 2 and doc["runs"] == []


def test_the_hardware_plot(tmp_path, data_dir):
    a, b = metrics_run(tmp_path, "fused", 180), metrics_run(tmp_path, "graphed", 260)
    png = tmp_path / "hw.png"
    out = CliRunner().invoke(main, ["compare", str(a), str(b), "--hardware-plot", str(png)])
    assert out.exit_code == 0, out.output
    # 11 x (0.5 x 2 runs + 1.9) in at 110 dpi: two panels, the legends above them.
    assert golden.png_size(png) == (1210, 319)
    traced = data_dir / "h200-eager-static-bs16.sqlite.xz"
    none = CliRunner().invoke(main, ["compare", str(traced), "--hardware-plot", str(png),
                                     "--force"])
    assert none.exit_code == 2 and "none of these runs sampled GPU metrics" in none.output


def test_the_hardware_figure_draws_each_run_a_row_of_bars():
    import pandas as pd

    from analysis.render.plots_runs import hardware_figure

    table = pd.DataFrame({
        "config_label": [None, "b-config"], "label": ["a", "b"],
        "untraced_ms_per_step": [2.0, None], "floor_ms_per_step": [1.0, 0.5],
        "sm_active_pct": [50.0, 60.0], "dram_read_pct": [20.0, 30.0], "floor_pct": [50.0, None]})
    left, right = hardware_figure(table).axes
    widths = [[bar.get_width() for bar in bars] for bars in left.containers + right.containers]
    # untraced step, floor | SMs active, DRAM read, % of floor; a value not known is no bar,
    # but an "n/a" (b's untraced step, b's % of the floor).
    assert widths == [[2.0], [1.0, 0.5], [50, 60], [20, 30], [50]]
    assert [t.get_text() for t in left.texts + right.texts] == [" n/a", " n/a"]
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["untraced step",
                                                                     "bandwidth floor"]
    # A run's config label where it has one, its label otherwise; the first run on top.
    assert [t.get_text() for t in left.get_yticklabels()] == ["a", "b-config"]
    assert left.yaxis_inverted()


def test_a_hardware_figure_without_step_times_is_one_panel_with_only_what_it_draws():
    import pandas as pd

    from analysis.render.plots_runs import hardware_figure

    # One metrics run, as `compare RUN --hardware-plot` of a capture of metrics alone gives.
    table = pd.DataFrame({"config_label": ["fused b32 fp32"], "label": ["fused"],
                          "untraced_ms_per_step": [None], "floor_ms_per_step": [None],
                          "sm_active_pct": [55.0], "dram_read_pct": [18.0], "floor_pct": [None]})
    (ax,) = hardware_figure(table).axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["SMs active", "DRAM read"]
    assert [[b.get_width() for b in bars] for bars in ax.containers] == [[55.0], [18.0]]
    assert ax.get_xlabel() == "% of peak"
