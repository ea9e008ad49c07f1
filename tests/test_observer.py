"""The profiler's share from an overhead.sh sweep (study/observer.py,
study/overhead.py) and the RESULTS part `python -m study --part observer` rewrites; built
from the bundled captures with hand-made untraced files whose medians are worked out below."""

import json
import shutil
from pathlib import Path

import golden
import pytest
from click.testing import CliRunner

from study import observer, overhead
from study.cli import study as main
from study.results import PART_END, PART_START

RUNS = Path(__file__).parent / "data" / "runs"


def twin(path: Path, variant: str, starts: list, ends: list, ms: float) -> None:
    path.write_text(json.dumps({
        "format": "gapscope-untraced-steps/1", "source": "cuda-events", "variant": variant,
        "window": [1, 4], "ms_per_step_median": ms,
        "runs": [{"step": [1, 2, 3, 4], "start_ns": starts, "end_ns": ends}]}))


def bench(path: Path, variant: str, ms: float) -> None:
    path.write_text(json.dumps({"results": [{"variant": variant, "ms_per_step_median": ms}]}))


def capture(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True)
    for name in ("capture.sqlite.xz", "run.json"):
        shutil.copy(src / name, dst / name)


@pytest.fixture
def sweep_dir(tmp_path):
    """b8/graphed-sync: the graph-level fixture, twin steps 2-4 with bubbles 30, 40, 35 µs and
    periods 1030, 1040, 1035 µs; two processes at 1.20 and 1.22 ms/step.
    b8/graphed: the node-level graphed fixture, twin bubbles 1, 2, 1 µs, periods 1001, 1002,
    1001 µs; one process at 1.16 ms/step."""
    root = tmp_path / "sweep"
    gs, g = root / "b8" / "graphed-sync", root / "b8" / "graphed"
    capture(RUNS / "graphed-sync-graphlevel", gs / "graph")
    capture(RUNS / "graphed", g / "node")
    us = 1000
    twin(gs / "untraced_steps.json", "graphed-sync", [0, 1030 * us, 2070 * us, 3105 * us],
         [1000 * us, 2030 * us, 3070 * us, 4105 * us], 1.21)
    twin(g / "untraced_steps.json", "graphed", [0, 1001 * us, 2003 * us, 3004 * us],
         [1000 * us, 2001 * us, 3003 * us, 4004 * us], 1.17)
    bench(gs / "untraced-p1.json", "graphed-sync", 1.20)
    bench(gs / "untraced-p2.json", "graphed-sync", 1.22)
    bench(g / "untraced-p1.json", "graphed", 1.16)
    return root


def test_the_sweep_sets_each_bubble_beside_its_untraced_twin(sweep_dir):
    table = observer.sweep(sweep_dir)
    assert list(table["variant"]) == ["graphed-sync", "graphed"]
    gs, g = table.iloc[0], table.iloc[1]
    assert gs["graph_bubble_ns"] == 30432  # the fixture's own median (test_analysis_graphs)
    assert g["node_bubble_ns"] == 6624
    assert (gs["untraced_bubble_ns"], gs["untraced_period_ns"]) == (35000, 1035000)
    assert (g["untraced_bubble_ns"], g["untraced_period_ns"]) == (1000, 1001000)
    assert gs["bench_ms"] == [1.20, 1.22] and g["bench_ms"] == [1.16]
    shown = observer.bubble_table(table).iloc[0]
    assert shown["untraced ms/step"] == "1.210 [1.200–1.220]"
    assert (shown["graph-level"], shown["untraced (events)"]) == ("30.4", "35.0")
    assert shown["graph"] == "-15%"  # (30.432 - 35) / 30.432: the twin saw more than nsys


def test_the_sync_costs_what_the_pair_differs_by_untraced(sweep_dir):
    (row,) = observer.sync_cost_table(observer.sweep(sweep_dir)).to_dict("records")
    assert (row["pair"], row["batch"]) == ("graphed-sync vs graphed", 8)
    assert row["sync cost µs/step: events"] == "34.0"  # 1035 - 1001
    # median 1.21 - 1.16; spread 1.20 - 1.16 and 1.22 - 1.16
    assert row["bench [spread]"] == "50.0 [40.0, 60.0]"


def test_overhead_table_divides_traced_by_untraced(sweep_dir):
    gs = sweep_dir / "b8" / "graphed-sync"
    overhead.merge_untraced(gs)
    (row,) = [r for r in overhead.rows(sweep_dir) if r["variant"] == "graphed-sync"]
    assert row["untraced_ms"] == pytest.approx(1.21)
    assert (row["untraced_min_ms"], row["untraced_max_ms"], row["processes"]) == (1.20, 1.22, 2)
    assert row["traced_ms"] == {"graph": 1.2071701}  # the fixture's run.json
    (cells,) = [r for r in golden.table_rows(overhead.table(sweep_dir), "8")
                if r[0] == "graphed-sync"]
    # Untraced 1.21 [1.20-1.22]; events on 1.21 (+0%); no node-level capture; graph-level
    # 1.2071701 / 1.21 - 1 = -0.23%: under nsys a hair faster than the untraced processes.
    assert golden.values(cells) == ["graphed-sync", 1.21, 1.2, 1.22, 1.21, 0, None, 1.207, -0.2]


def test_study_part_observer_rewrites_only_its_part(sweep_dir, tmp_path):
    out = tmp_path / "docs"
    out.mkdir()
    (out / "RESULTS.md").write_text("# R\n\nintro\n\n## 1. The ladder\n\nrest\n")
    for _ in range(2):  # the second run replaces the part, never adds one
        result = CliRunner().invoke(main, [str(sweep_dir), "-o", str(out), "--part", "observer"])
        assert result.exit_code == 0, result.output
        text = (out / "RESULTS.md").read_text()
        assert text.count(PART_START) == 1 and text.count(PART_END) == 1
    assert text.startswith("# R\n\nintro\n\n" + PART_START)
    assert text.endswith(PART_END + "\n\n## 1. The ladder\n\nrest\n")
    assert "## How much of the bubble is the profiler's" in text
    assert golden.png_size(out / "figures" / "observer.png") == (990, 396)  # 9 x 3.6 in, 110 dpi


def test_the_bubble_figure_draws_each_bubble_beside_its_twin_in_us(sweep_dir):
    from analysis.render.plots_runs import bubbles_figure

    (ax,) = bubbles_figure(observer.sweep(sweep_dir), 8).axes
    heights = [[bar.get_height() for bar in bars] for bars in ax.containers]
    # node-level, graph-level, untraced; graphed-sync was captured graph-level only, graphed
    # node-level only (the sweep above): a missing capture is a bar of 0.
    assert heights == [[0, 6.624], [30.432, 0], [35.0, 1.0]]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["graphed-sync", "graphed"]
