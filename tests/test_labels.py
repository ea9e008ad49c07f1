"""Labels and colours stay put (ANALYSIS.md, "Labels"): a run has one label in every command
(its directory's name, profile.sh's UTC time left out), told apart by its path only where two
runs of one command share it; the baseline is chosen by a rule the output states; a name keeps
its colour in every figure."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import analysis
from analysis.cli import main

RUNS = Path(__file__).parent / "data" / "runs"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_run_has_one_label_in_every_command(tmp_path):
    metrics, fused = RUNS / "fused-metrics", RUNS / "fused"
    assert run("analyze", metrics).stdout.startswith("fused-metrics: device 0")
    compared = json.loads(run("compare", fused, metrics, "--format", "json").stdout)
    assert [r["label"] for r in compared["runs"]] == ["fused"]
    assert [r["label"] for r in compared["hardware"]] == ["fused-metrics"]
    done = run("report", fused, metrics, "-o", tmp_path / "r", "--db", tmp_path / "r.db")
    assert done.exit_code == 0, done.output
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## fused\n" in md and "## fused-metrics\n" in md
    assert sorted(p.name for p in (tmp_path / "r").glob("*.png")) == [
        "fused-device0.png", "fused-metrics-device0.png"]
    conn = sqlite3.connect(tmp_path / "r.db")
    assert conn.execute("SELECT label FROM runs ORDER BY rowid").fetchall() == [
        ("fused",), ("fused-metrics",)]
    conn.close()
    # The library labels it so too.
    assert analysis.load(metrics).label == "fused-metrics"


def test_runs_that_share_a_name_are_told_apart_by_as_much_of_their_path_as_it_takes(tmp_path):
    from analysis.readers.runs import resolve_run, unique_labels

    for where in ("b8/static", "b32/static", "20261130T171200Z-pipelined",
                  "20261201T090000Z-pipelined"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).symlink_to(RUNS / "graphed-sync-graphlevel")
    runs = [resolve_run(str(tmp_path / w)) for w in (
        "b8/static", "b32/static", "20261130T171200Z-pipelined", "20261201T090000Z-pipelined",
        "b8/static")]
    assert [r.label for r in runs] == ["static", "static", "pipelined", "pipelined", "static"]
    assert unique_labels(runs) == ["b8/static", "b32/static", "20261130T171200Z-pipelined",
                                   "20261201T090000Z-pipelined", "b8/static #2"]
    # A sweep labels its runs by the same rule: no variant glued before a path.
    rows = json.loads(run("compare", tmp_path, "--format", "json").stdout)["runs"]
    assert [r["label"] for r in rows] == ["20261130T171200Z-pipelined",
                                          "20261201T090000Z-pipelined", "b32/static",
                                          "b8/static"]


def test_a_sweep_of_many_runs_never_cuts_a_label(tmp_path):
    long = "graphed-sync-graphlevel-captured-on-the-h200-with-every-flag-we-had-on-that-day"
    for i in range(8):
        (tmp_path / f"{long}-{i}").symlink_to(RUNS / "graphed-sync-graphlevel")
    text = run("compare", tmp_path).stdout
    table = text.split("\n\n")[0].splitlines()
    assert len(table) == 9 and all(f"{long}-{i}" in table[i + 1] for i in range(8))
    assert "…" not in text
    # The numbers stay in 100 columns; the label, too long for them, goes last on its line.
    assert all(len(line.split(long)[0]) <= 100 for line in table)
    assert f"baseline: {long}-0 (the first run; --baseline LABEL picks another)" in \
        " ".join(text.split())


def test_the_baseline_is_the_first_run_or_the_one_named_and_the_output_says_which():
    static, fused = RUNS / "graphed-sync-graphlevel", RUNS / "fused"
    first = run("compare", static, fused)
    said = " ".join(first.stdout.split())
    assert "baseline: graphed-sync-graphlevel (the first run; --baseline LABEL picks another)" \
        in said
    named = run("compare", static, fused, "--baseline", "fused")
    assert named.stdout.splitlines()[0].split() == ["fused", "graphed-sync-graphlevel"]
    assert "baseline: fused (--baseline; --baseline LABEL picks another)" in \
        " ".join(named.stdout.split())
    bad = run("compare", static, fused, "--baseline", "static")
    assert bad.exit_code == 2 and bad.output == (
        "gapscope: error: --baseline static: no run is labelled so; the labels: "
        "graphed-sync-graphlevel, fused\n")


def test_a_name_keeps_its_colour_in_every_figure():
    from analysis.render.plots import analysis_figure
    from analysis.render.plots_host import host_colour

    def colours(a) -> dict:
        fig = analysis_figure(a, "run")
        out = {}
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
                colour = (handle.get_facecolor() if hasattr(handle, "get_facecolor")
                          else handle.get_color())
                out[text.get_text()] = str(colour)
        return out

    # Check Stop Condition is the third row of one run's host table, the second of another's.
    a, b = analysis.load(RUNS / "compiled"), analysis.load(RUNS / "pipelined")
    ranks = [[r["name"] for r in x.summary["host"]["rows"]].index("Check Stop Condition")
             for x in (a, b)]
    assert ranks == [1, 2]
    ca, cb = colours(a), colours(b)
    assert ca["Check Stop Condition"] == cb["Check Stop Condition"]
    assert ca["Model Forward"] == cb["Model Forward"]
    # Any other name: its colour by the CRC-32 of its name, whatever else the figure holds.
    assert host_colour("mypkg.decode.sample") == host_colour("mypkg.decode.sample")
    assert host_colour("Check Stop Condition") == "#8c564b"


@pytest.mark.parametrize("tail", ["", ":^Step (\\d+)$"])
def test_a_label_does_not_depend_on_a_steps_pattern(tmp_path, tail):
    shutil.copytree(RUNS / "graphed-sync-graphlevel", tmp_path / "mine")
    rows = json.loads(run("compare", f"{tmp_path / 'mine'}{tail}", "--format", "json").stdout)
    assert [r["label"] for r in rows] == ["mine"]
