"""`--perfetto FILE`: the analysed timeline as a Chrome trace, read back: every gap with its
cause and exact times, the ops by stream, the steps, the host's blocking calls, and tracks whose
slices never cross (what Perfetto UI and chrome://tracing need to draw them)."""

import json
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from synth import TID, causes_trace

from analysis.api import load_and_analyse
from analysis.cli import main
from analysis.render.perfetto import CAUSE_CNAMES, chrome_trace, lanes

DATA = Path(__file__).parent / "data"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _events(doc: dict, cat: str) -> list:
    return [e for e in doc["traceEvents"] if e.get("cat") == cat]


def _names(doc: dict, what: str) -> dict:
    """(pid, tid or None) -> the name a metadata event gives it."""
    return {(e["pid"], e.get("tid")): e["args"]["name"] for e in doc["traceEvents"]
            if e["ph"] == "M" and e["name"] == what}


def _ns(us: float, origin: int) -> int:
    return round(us * 1000) + origin


def assert_tracks_nest(doc: dict) -> None:
    """On each track, two slices are apart or one holds the other; ts and dur in µs, >= 0."""
    tracks = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            assert isinstance(e["ts"], float) and e["ts"] >= 0 and e["dur"] >= 0
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for slices in tracks.values():
        slices.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for start, end in slices:
            while open_ends and open_ends[-1] <= start + 1e-9:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-9, (start, end, open_ends)
            open_ends.append(end)


def test_every_gap_is_a_slice_named_and_coloured_by_its_cause_at_its_exact_times(tmp_path):
    path = causes_trace().write(tmp_path / "t.sqlite")
    out = tmp_path / "t.json"
    result = run("analyze", path, "--perfetto", out)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    origin = doc["otherData"]["origin_ns"]["t"]
    assert origin == 0  # Step 1's range starts at 0, before any op
    gaps = _events(doc, "gap")
    # The five gaps of causes_trace (tests/test_analysis_synthetic.py works them out).
    assert [(g["name"], g["args"]["start_ns"], g["args"]["end_ns"]) for g in gaps] == [
        ("idle: host", 30, 50), ("idle: sync", 60, 95), ("idle: queued", 105, 110),
        ("idle: unknown", 120, 125), ("idle: host", 128, 140)]
    for g in gaps:
        a = g["args"]
        assert (_ns(g["ts"], origin), _ns(g["ts"] + g["dur"], origin)) == (a["start_ns"],
                                                                            a["end_ns"])
        assert g["cname"] == CAUSE_CNAMES[a["cause"]] and g["name"] == f"idle: {a['cause']}"
        assert sum(a[c] for c in ("idle_blocked_ns", "idle_pre_launch_ns",
                                  "idle_in_launch_ns")) == a["gap_ns"]
    assert gaps[1]["args"]["idle_blocked_ns"] == 20  # the sync gap: the host blocked from 60 to 80
    assert [g["args"]["next_op"] for g in gaps] == ["k2", "k3", "k4", "k5", "k6"]
    ops = _events(doc, "op")
    assert [(o["name"], o["args"]["start_ns"], o["args"]["end_ns"]) for o in ops] == [
        ("k1", 20, 30), ("k2", 50, 60), ("k3", 95, 105), ("k4", 110, 120), ("k5", 125, 128),
        ("k6", 140, 150)]
    steps = _events(doc, "step")
    assert [(s["name"], s["args"]["start_ns"], s["args"]["end_ns"], s["args"]["period_ns"])
            for s in steps] == [("Step 1", 20, 60, 40), ("Step 2", 95, 150, 90)]
    nvtx = _events(doc, "nvtx")
    assert [(n["name"], n["ts"], n["dur"]) for n in nvtx] == [("Step 1", 0.0, 0.081),
                                                              ("Step 2", 0.081, 0.119)]
    (sync,) = _events(doc, "blocking")
    assert (sync["name"], sync["args"]["start_ns"], sync["args"]["end_ns"]) == (
        "cudaStreamSynchronize", 58, 80)
    assert _names(doc, "process_name") == {(1, None): "t: host", (2, None): "t: GPU 0"}
    # The host table's tracks (its host periods, its named code) before the blocking calls.
    assert _names(doc, "thread_name") == {
        (1, 1): f"NVTX steps: thread {TID}", (1, 10): f"thread {TID}: host period",
        (1, 11): f"thread {TID}: named code", (1, 12): f"thread {TID}: blocking calls",
        (2, 1): "steps (GPU)", (2, 2): "idle gaps, by cause", (2, 10): "stream 7"}
    assert_tracks_nest(doc)


def test_overlapping_steps_go_on_tracks_of_their_own():
    assert lanes(*map(_array, ([0, 5, 10], [10, 15, 20]))).tolist() == [0, 1, 0]
    assert lanes(*map(_array, ([0, 10, 20], [10, 20, 30]))).tolist() == [0, 0, 0]
    # Nested intervals are fine on one track in Chrome's format, but lanes never nest either.
    assert lanes(*map(_array, ([0, 2], [10, 5]))).tolist() == [0, 1]


def _array(values):
    import numpy as np

    return np.array(values, dtype=np.int64)


def test_a_pipelined_loops_overlapping_gpu_steps_nest_on_their_tracks(tmp_path):
    t = causes_trace()
    # Step 2's first op, on another stream, starts while Step 1's last op still runs.
    t.launch(82, 83, 55, 58, stream=13)
    path = t.write(tmp_path / "p.sqlite")
    run_, trace, analyses = load_and_analyse(path)
    assert int(analyses[0].steps["overlap_ns"].iloc[1]) == 5
    doc = json.loads(chrome_trace([("p", analyses, trace.strings, trace.blocking)]))
    assert_tracks_nest(doc)
    names = _names(doc, "thread_name")
    assert [names[(2, tid)] for tid in (1, 2, 3, 10, 11)] == [
        "steps (GPU)", "steps (GPU) (2)", "idle gaps, by cause", "stream 7", "stream 13"]
    assert [s["tid"] for s in _events(doc, "step")] == [1, 2]


def test_report_writes_every_run_into_one_timeline_from_its_own_origin(tmp_path):
    out = tmp_path / "timeline.json"
    runs = [DATA / "runs" / "graphed-sync-graphlevel", DATA / "runs" / "fused"]
    result = run("report", *runs, "-o", tmp_path / "r", "--perfetto", out)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert set(doc["otherData"]["origin_ns"]) == {"graphed-sync-graphlevel", "fused"}
    assert sorted(_names(doc, "process_name").values()) == [
        "fused: GPU 0", "fused: host", "graphed-sync-graphlevel: GPU 0",
        "graphed-sync-graphlevel: host"]
    for pid, label in ((2, "graphed-sync-graphlevel"), (4, "fused")):
        (_, _, (a,)) = load_and_analyse(DATA / "runs" / label)
        gaps = [e for e in _events(doc, "gap") if e["pid"] == pid]
        assert len(gaps) == len(a.gaps) and sum(g["args"]["gap_ns"] for g in gaps) == \
            a.summary["idle_ns"]
        assert [g["args"]["cause"] for g in gaps] == a.gaps["cause"].astype(str).tolist()
        origin = doc["otherData"]["origin_ns"][label]
        assert [_ns(g["ts"], origin) for g in gaps] == a.gaps["start_ns"].tolist()
    assert "The analysed timeline, every op and gap" in (tmp_path / "r" / "report.md").read_text()
    assert_tracks_nest(doc)


@pytest.mark.parametrize("dest", ["missing/dir/t.json"])
def test_a_timeline_that_cannot_be_written_is_one_line(tmp_path, dest):
    path = causes_trace().write(tmp_path / "t.sqlite")
    result = run("analyze", path, "--perfetto", tmp_path / dest)
    # Said before any analysis: one line, the output's option and why.
    assert result.exit_code == 2
    assert result.output == (f"gapscope: error: --perfetto {tmp_path / dest}: no folder "
                             f"{tmp_path / 'missing/dir'} to write it in\n")


def test_a_report_writes_its_timeline_into_the_folder_it_makes(tmp_path):
    """As `make demo` does: -o a folder not there yet, the timeline inside it."""
    path = causes_trace().write(tmp_path / "t.sqlite")
    out = tmp_path / "new" / "report"
    result = run("report", path, "-o", out, "--perfetto", out / "timeline.json")
    assert result.exit_code == 0, result.output
    assert (out / "timeline.json").is_file() and (out / "report.md").is_file()
