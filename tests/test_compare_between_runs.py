"""compare of several runs of one configuration: the spread between runs, said so."""

import json

from click.testing import CliRunner
from synth import Synth

from analysis.cli import main


def run_dir(path, op_ns: int, batch: int):
    """Two steps of one kernel each, `op_ns` long, 100 ns apart: GPU periods op_ns and 100,
    median (op_ns + 100) / 2."""
    t = Synth()
    t.range("Step 1", 0, 100)
    t.range("Step 2", 100, 200)
    t.launch(10, 15, 20, 20 + op_ns)
    t.launch(110, 115, 120, 120 + op_ns)
    path.mkdir()
    t.write(path / "capture.sqlite")
    info = {"config": {"variant": "static", "batch": batch, "out": str(path)}}
    (path / "run.json").write_text(json.dumps(info))
    return str(path)


def test_runs_of_one_configuration_get_the_between_run_spread(tmp_path):
    a = [run_dir(tmp_path / f"a{x}", x, 8) for x in (10, 30, 50)]  # medians 55, 65, 75
    b = [run_dir(tmp_path / f"b{x}", x, 2) for x in (50, 70)]  # medians 75, 85
    result = CliRunner().invoke(main, ["compare", *a, *b, "--format", "json"])
    assert result.exit_code == 0, result.output
    first, second = json.loads(result.output)["between_runs"]
    assert (first["runs"], first["period_ns_median"]) == (3, 65)
    assert 55 <= first["period_ns_ci"][0] <= 65 <= first["period_ns_ci"][1] <= 75
    assert (second["runs"], second["period_ns_median"]) == (2, 80)
    lo, hi = second["vs_first_ci"]
    assert 0 <= lo <= hi <= 30 and first["vs_first_ci"] is None
    text = CliRunner().invoke(main, ["compare", *a, *b]).output
    assert "CIs from the spread between runs of one configuration, not the steps of one" in text
    assert "  static batch=8: 3 runs, 0.000 ms/step [" in text
    assert "  static batch=2: 2 runs" in text


def test_one_run_per_configuration_keeps_the_step_spread_only(tmp_path):
    runs = [run_dir(tmp_path / "a", 10, 8), run_dir(tmp_path / "b", 30, 2)]
    out = json.loads(CliRunner().invoke(main, ["compare", *runs, "--format", "json"]).output)
    assert isinstance(out, list) and len(out) == 2


def test_markdown_says_between_runs_once(tmp_path):
    a = [run_dir(tmp_path / f"a{x}", x, 8) for x in (10, 30)]
    out = CliRunner().invoke(main, ["compare", *a, "--format", "md"]).output
    assert out.count("Between runs") == 1


def test_a_floor_in_run_json_that_is_not_numbers_is_one_line(tmp_path):
    path = tmp_path / "r"
    run_dir(path, 10, 8)
    info = json.loads((path / "run.json").read_text())
    info["floor"] = {"bytes_by_step": [[1, "x"]]}
    info["untraced"] = {"floor": {"copy_bytes_per_s": 1e12}}
    (path / "run.json").write_text(json.dumps(info))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 2
    # The message names the run it is about (compare and report take several).
    assert result.output.startswith(f"gapscope: error: {path}: run.json: floor.bytes_by_step")
    assert result.output.count("\n") == 1
