"""`from analysis import analyze_trace`: the console script's numbers, for notebooks; and the
text tables that must read in a terminal of 100 columns."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis import analyze_trace
from analysis.errors import TraceError

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
RUNS = ["static", "pipelined", "compiled", "pipelined-compile", "graphed-sync", "graphed", "fused"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analysis.cli", *args], capture_output=True,
                          text=True, cwd=ROOT)


@pytest.mark.parametrize("path, args", [
    (DATA / "h200-eager-static-bs16.sqlite", []),
    (DATA / "runs" / "graphed", ["--steps", r"^Step (4\d)$"]),
])
def test_the_library_and_the_console_script_give_the_same_numbers(path, args):
    printed = json.loads(cli("analyze", str(path), "--format", "json", *args).stdout)
    kw = {"steps": args[1]} if args else {}
    (result,) = analyze_trace(path, **kw)
    assert result.summary == printed["summary"]
    assert result.summary["steps"] == (10 if args else 20)
    steps = pd.DataFrame(printed["steps"])
    assert result.steps["step"].tolist() == steps["step"].tolist()
    assert result.steps["period_ns"].fillna(-1).tolist() == steps["period_ns"].fillna(-1).tolist()
    assert result.gaps["gap_ns"].tolist() == printed["gaps"]["gap_ns"]  # columnar
    assert result.streams["stream"].tolist() == [
        s["stream"] for s in printed["streams"]["per_stream"]]
    assert result.run.trace_path.name.endswith(".sqlite")


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
    # Every run appears once as a column heading in both, every metric row in each block.
    blocks = narrow.split("\n\n")[:-1]
    headings = [label for b in blocks for label in b.splitlines()[0].split()]
    assert headings == RUNS[:3] + ["pipelined+compile", "graphed-sync", "graphed", "fused"]
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
        analyze_trace(DATA / "h200-eager-static-bs16.sqlite", steps=r"^Iteration (\d+)$")
    message = str(e.value)
    assert r"matches the steps pattern (--steps / steps=) '^Iteration (\d+)$'; the ranges" in \
        message
    # Said for a Python caller too: it names the input and the argument, not only the option.
    assert message.startswith(f"{DATA / 'h200-eager-static-bs16.sqlite'}: ")
    assert "pass --steps" not in message


def test_errors_name_the_argument_for_python_callers_as_well():
    with pytest.raises(TraceError) as e:
        analyze_trace(DATA / "h200-eager-static-bs16.sqlite", device=3)
    assert str(e.value) == (f"{DATA / 'h200-eager-static-bs16.sqlite'}: device 3 (--device / "
                            "device=): the steps ran on devices [0]")
    with pytest.raises(TraceError, match=r"the check pattern \(--check / check=\) '\(' is not"):
        analyze_trace(DATA / "h200-eager-static-bs16.sqlite", check="(")
