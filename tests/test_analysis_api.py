"""`from analysis import analyze_trace`: a trace's numbers, for notebooks; and the
text tables that must read in a terminal of 100 columns."""

import json
from pathlib import Path

import pytest

from analysis import analyze_trace
from analysis.errors import TraceError

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
RUNS = ["static", "pipelined", "compiled", "pipelined-compile", "graphed-sync", "graphed", "fused"]


def cli(*args: str):
    """The console script, in this process (click's runner: the same output)."""
    from click.testing import CliRunner

    from analysis.cli import main

    return CliRunner().invoke(main, list(args))


# The reference trace's figures (METRICS.md; test_analysis_reference checks them against nsys's
# own projection report) and the graphed run's steps 40-49.
STATIC = {"steps": 20, "window_ns": 180644905, "busy_ns": 23864070, "idle_ns": 156780835,
          "bubble_ns_median": 189086, "period_ns_median": 8576572,
          "idle_ns_by_cause": {"sync": 3578243, "host": 147906023, "queued": 5296569, "unknown": 0}}
GRAPHED = {"steps": 10, "window_ns": 14365177, "busy_ns": 11626106, "idle_ns": 2739071,
           "bubble_ns_median": 6752, "period_ns_median": 1435647.5,
           "idle_ns_by_cause": {"sync": 0, "host": 0, "queued": 2739071, "unknown": 0}}


@pytest.mark.parametrize("path, kw, expected, steps, first_periods, gaps", [
    (DATA / "h200-eager-static-bs16.sqlite.xz", {}, STATIC, range(31, 51),
     [11387654, 8811706, 8713499, 8753467], 7839),
    (DATA / "runs" / "graphed", {"steps": r"^Step (4\d)$"}, GRAPHED, range(40, 50),
     [1433088, 1435647, 1435647, 1439743], 2839),
])
def test_the_library_gives_the_traces_numbers(path, kw, expected, steps, first_periods, gaps):
    (result,) = analyze_trace(path, **kw)
    assert {k: result.summary[k] for k in expected} == expected
    json.dumps(result.summary)  # JSON-ready, as `--format json` prints it
    assert result.steps["step"].tolist() == list(steps)
    assert result.steps["period_ns"].iloc[:4].tolist() == first_periods
    assert (len(result.gaps), result.gaps["gap_ns"].sum()) == (gaps, expected["idle_ns"])
    assert result.streams["stream"].tolist() == [7]
    assert result.run.trace_path.name.endswith(".sqlite.xz")


def test_bad_input_raises_trace_error_with_the_cli_message(tmp_path):
    with pytest.raises(TraceError, match="no such file or directory"):
        analyze_trace(tmp_path / "missing.sqlite")


def test_a_run_dir_with_only_the_nsys_rep_says_how_to_export_it(tmp_path):
    (tmp_path / "capture.nsys-rep").write_bytes(b"x")
    with pytest.raises(TraceError) as e:
        analyze_trace(tmp_path)
    rep = tmp_path / "capture.nsys-rep"
    assert str(e.value) == (
        f"{tmp_path}: holds capture.nsys-rep but no capture.sqlite: export it with the nsys that "
        f"captured it, `scripts/export.sh {rep}` (or `nsys export --type sqlite -o "
        f"{tmp_path / 'capture.sqlite'} {rep}`)")


def width(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_the_demo_comparison_reads_in_100_columns_and_wide_keeps_one_table():
    paths = [str(DATA / "runs" / r) for r in RUNS]
    narrow, wide = cli("compare", *paths).stdout, cli("compare", "--wide", *paths).stdout
    assert width(narrow) <= 100 < width(wide)
    # Every run appears once as a column heading in both, every metric row in each block (the
    # host tables side by side, after them, in blocks of their own).
    assert width(narrow) <= 100 and "host ms a step (mean)" in narrow
    blocks = [b for b in narrow.split("\n\n") if not b.startswith("host ms a step")][:-1]
    headings = [label for b in blocks for label in b.splitlines()[0].split()]
    assert headings == RUNS
    rows = {line.split("  ")[0] for line in wide.split("\n\n")[0].splitlines()}
    assert all({line.split("  ")[0] for line in b.splitlines()} == rows for b in blocks)


def test_the_bench_table_reads_in_100_columns():
    from harness.bench import table

    floor = {"floor_ms_per_step": 0.215, "floor_pct": 1.7, "kv_slots_read": "all 112",
             "bytes_per_step": {"weights": 497e6, "kv_read": 130e6, "kv_write": 1.2e6,
                                "activations": 3.4e6}}
    result = {"variant": "pipelined-seed", "steps": 100, "ms_per_step_median": 12.345,
              "ms_per_step_p10": 12.001, "ms_per_step_p90": 13.099, "tokens_per_s": 123456,
              "peak_allocated_bytes": 80 << 30, "peak_reserved_bytes": 90 << 30,
              "fragmentation": 0.111, "weight_floor_ms_per_step": 0.15, "floor": floor}
    text = table({"results": [result], "copy_bytes_per_s": 3e12})
    assert width(text) <= 100
    assert text.splitlines()[2].split() == [
        "pipelined-seed", "100", "12.345", "12.001-13.099", "123456", "81920.0", "92160.0",
        "11.1", "0.215", "1.7"]


def test_a_pattern_in_a_message_is_shown_as_typed_not_doubled():
    with pytest.raises(TraceError) as e:
        analyze_trace(DATA / "h200-eager-static-bs16.sqlite.xz", steps=r"^Iteration (\d+)$")
    message = str(e.value)
    assert r"matches the steps pattern (--steps / steps=) '^Iteration (\d+)$'; the ranges" in \
        message
    # Said for a Python caller too: it names the input and the argument, not only the option.
    assert message.startswith(f"{DATA / 'h200-eager-static-bs16.sqlite.xz'}: ")
    assert "pass --steps" not in message


def test_errors_name_the_argument_for_python_callers_as_well():
    with pytest.raises(TraceError) as e:
        analyze_trace(DATA / "h200-eager-static-bs16.sqlite.xz", device=3)
    assert str(e.value) == (f"{DATA / 'h200-eager-static-bs16.sqlite.xz'}: device 3 (--device / "
                            "device=): the steps ran on devices [0]")
    with pytest.raises(TraceError, match=r"the check pattern \(--check / check=\) '\(' is not"):
        analyze_trace(DATA / "h200-eager-static-bs16.sqlite.xz", check="(")
