"""What a new user tripped on in the first hour (issue 30), each behaviour as it now is: the
library's frames agree on what a step is, bad input is named for what it is, compare and
ranges say what they do."""

import json
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
