"""The library face (analysis.open, compare, Database, one Analysis type): docs/ANALYSIS.md's
notebook block run as it is, its numbers checked; and the module table against the files."""

import json
import re
from pathlib import Path

import golden
import pytest

import analysis
from analysis.errors import TraceError

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ANALYSIS.md"


def notebook_block() -> str:
    text = DOC.read_text()
    section = text.split("## In a notebook", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


def test_the_notebook_example_runs_and_gives_the_traces_numbers(monkeypatch):
    monkeypatch.chdir(ROOT)
    seen = {}
    exec(compile(notebook_block(), str(DOC), "exec"), seen)
    a = seen["a"]
    # The reference trace's figures (tests/test_analysis_api.py, METRICS.md).
    assert (a.kind, a.device, a.label) == ("trace", 0, "h200-eager-static-bs16")
    assert seen["bubble_us"] == 189.086
    assert seen["steps"]["step"].tolist() == list(range(31, 51))
    assert seen["by_cause"].to_dict() == {"sync": 3578243, "host": 147906023, "queued": 5296569}
    assert seen["longest"]["gap_ns"].iloc[0] == a.gaps["gap_ns"].max()
    assert len(seen["syncs"]) == 1
    # The kernels by name: cuBLAS's GEMM first (49 a step), the five taking 90% of the GPU time.
    top = seen["top"]
    assert top["name"].tolist() == ["Kernel2", "vectorized_elementwise_kernel",
                                    "fmha_cutlassF_f32_aligned_64x64_rf_sm80",
                                    "vectorized_layer_norm_kernel", "index_elementwise_kernel"]
    assert top["ops_per_step"].tolist() == [49.0, 185.0, 12.0, 25.0, 24.0]
    assert round(top["share"].sum(), 3) == 0.901
    # One step: its row, its 392 ops and the gaps that fill its idle time exactly.
    one, row = seen["one"], a.steps.set_index("step").loc[40]
    assert (one.row["period_ns"], len(one.ops)) == (row["period_ns"], row["op_records"]) \
        == (8552828, 392)
    assert one.gaps["gap_ns"].sum() == row[["idle_blocked_ns", "idle_pre_launch_ns",
                                            "idle_in_launch_ns"]].sum()
    assert repr(one) == ("Step 40 (thread python3): GPU period 8.553 ms, busy 1.192 ms, bubble "
                         "177.9 µs; 392 op records; 392 gaps: sync 0.178, host 6.925, queued "
                         "0.257 ms")
    assert len(seen["per_step"]) == len(a.ops) == 7840
    assert golden.png_size(seen["out"] / "static.png")[0] == 1430  # the figure, 13 in at 110 dpi
    events = json.loads((seen["out"] / "static.json").read_text())["traceEvents"]
    assert sum(e.get("cat") == "gap" for e in events) == len(a.gaps)
    assert seen["periods_ms"].to_dict() == {"static": 8.191, "graphed": 1.434}
    assert seen["text"].splitlines()[0].split() == ["static", "graphed"]
    assert seen["stored"].to_dict("list") == {"label": ["static", "graphed"], "steps": [20, 20],
                                               "bubble_ns_median": [57792, 6624]}
    again = seen["again"]
    assert [x.kind for x in again.analyses] == ["stored", "stored"]
    assert again.table["period_ns_median"].tolist() == [8190547.5, 1434111.5]
    assert again.to_text() == seen["c"].to_text()


def test_the_face_is_in_dir_and_all():
    names = {"Analysis", "Comparison", "Database", "TraceError", "analyze_trace", "compare",
             "load", "open", "open_devices"}
    assert set(analysis.__all__) == names and names <= set(dir(analysis))
    assert analysis.analyze_trace.__doc__ and analysis.open.__doc__


def test_a_metrics_only_capture_is_an_analysis_with_its_absent_parts_none(tmp_path):
    from synth import metrics_only_trace

    (a,) = analysis.open(metrics_only_trace().write(tmp_path / "m.sqlite"))
    assert (a.kind, a.traced, a.gaps, a.streams, a.syncs) == ("metrics", False, None, None, None)
    with pytest.raises(TraceError, match="GPU metrics only, no CUDA trace"):
        analysis.open(tmp_path / "m.sqlite", metrics_only=False)


def test_compare_opens_paths_and_refuses_nothing():
    c = analysis.compare([ROOT / "tests" / "data" / "runs" / "graphed",
                          ROOT / "tests" / "data" / "runs" / "static"])
    assert c.table["label"].tolist() == ["graphed", "static"]
    assert c.between_runs is None and c.hardware is None and c.order_flips == []
    with pytest.raises(TraceError, match="no runs to compare"):
        analysis.compare([])


def test_a_missing_database_opened_read_only_is_one_line(tmp_path):
    with pytest.raises(TraceError, match=r"no such database$"):
        analysis.Database(tmp_path / "none.db", read_only=True)


def table_modules() -> set:
    section = DOC.read_text().split("## Modules", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {m for row in rows for m in re.findall(r"`([\w/]+\.py)`", row.split(" | ")[0])}


def test_the_module_table_names_every_module_and_only_modules_that_exist():
    named = table_modules()
    # the library's modules relative to analysis/, the study's (its own table) as study/...
    on_disk = {p.relative_to(ROOT / "analysis").as_posix()
               for p in (ROOT / "analysis").rglob("*.py")}
    on_disk |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "study").rglob("*.py")}
    # A sub-package's __init__.py is its docstring (readers' holds load_trace and is named).
    packages = {p for p in on_disk if p.endswith("/__init__.py")} - {"readers/__init__.py",
                                                                      "cli/__init__.py"}
    assert named - on_disk == set()
    assert on_disk - packages - named == set()


def documented_columns() -> dict:
    """help(analysis.Analysis)'s tables: {table: [its columns]} as the docstring lists them."""
    doc = analysis.Analysis.__doc__
    section = doc.split("Tables (", 1)[1].split("\n\n", 2)[1]
    tables, name = {}, None
    for line in section.splitlines():
        head, _, rest = line.strip().partition(" ")
        if line.startswith("    ") and not line.startswith("     "):
            name, line = head, rest
        tables.setdefault(name, []).extend(c.strip() for c in line.split(",") if c.strip())
    return tables


def test_help_analysis_documents_the_columns_each_table_has():
    a = analysis.load(ROOT / "tests" / "data" / "h200-eager-static-bs16.sqlite.xz")
    documented = documented_columns()
    assert set(documented) == {"steps", "gaps", "streams", "syncs", "pairs", "checks", "ops",
                               "host", "host_steps"}
    for table, columns in documented.items():
        assert columns == list(getattr(a, table).columns), table


def test_a_run_read_back_from_the_database_renders_as_it_was_analysed(tmp_path):
    """The database keeps the summary whole, the steps and the syncs: a stored Analysis prints
    what the fresh one did, but for its first line (where it was read from)."""
    run = ROOT / "docs/user-programs-20261202/20261202T062302Z-sample"
    fresh = analysis.load(run)
    with analysis.Database(tmp_path / "r.db") as db:
        db.add([fresh])
    with analysis.Database(tmp_path / "r.db", read_only=True) as db:
        (stored,) = db.analyses()
    assert stored.summary["calls"] == json.loads(json.dumps(fresh.summary["calls"]))
    first, *rest = stored.to_text().splitlines()
    assert first.endswith("96 steps, read from a results database")
    assert rest == fresh.to_text().splitlines()[1:]
    assert "| GenerationMixin.generate call 2 |" in stored.to_markdown()


def test_a_run_stored_before_the_summary_was_kept_whole_is_one_line(tmp_path):
    import sqlite3

    run = ROOT / "tests/data/runs/static"
    with analysis.Database(tmp_path / "old.db") as db:
        db.add([analysis.load(run)])
    with sqlite3.connect(tmp_path / "old.db") as con:  # as an older gapscope wrote it
        con.execute("ALTER TABLE runs DROP COLUMN summary_json")
    with analysis.Database(tmp_path / "old.db", read_only=True) as db:
        (stored,) = db.analyses()
    with pytest.raises(TraceError, match=r"^to_text: static was stored before the database kept "
                                         r"each summary whole: add its run again"):
        stored.to_text()
    metrics = ROOT / "tests/data/runs/fused-metrics"
    with analysis.Database(tmp_path / "new.db") as db:
        db.add([analysis.load(metrics)])
    with analysis.Database(tmp_path / "new.db", read_only=True) as db:
        (stored,) = db.analyses()
    assert "GPU metrics only" in stored.to_text() and "GPU metrics only" in stored.to_markdown()
