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
STATIC = DATA / "h200-eager-static-bs16.sqlite"


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
