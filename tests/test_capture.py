"""analysis.capture.nsys is lib.sh's rules in Python (pip installs no scripts/): the two agree."""

import os

import pytest
from test_scripts import fake_nsys_at, lib_sh, make_env, path_without_nsys

from analysis.capture import nsys as capture


def test_metrics_flags_are_lib_sh_metrics_flags(tmp_path):
    shell = lib_sh(make_env(tmp_path), "metrics_flags 1 10000", cwd=tmp_path)
    assert capture.metrics_flags("1", "10000") == shell.stdout.splitlines()


def test_default_flags_are_lib_sh_capture_flags(tmp_path):
    for trace in ("cuda,nvtx", "cuda,nvtx,osrt"):
        shell = lib_sh(make_env(tmp_path), f"capture_flags {trace}", cwd=tmp_path)
        assert capture.capture_flags(trace) == shell.stdout.split()


def test_the_function_trace_flag_is_lib_sh_capture_flags_third_argument(tmp_path):
    shell = lib_sh(make_env(tmp_path), "capture_flags cuda,nvtx graph /run/functions.json",
                   cwd=tmp_path)
    flags = capture.capture_flags("cuda,nvtx", graph_trace="graph",
                                  functions_trace="/run/functions.json")
    assert flags == shell.stdout.split()
    assert flags[-1] == "--python-functions-trace=/run/functions.json"


def test_minimum_version_and_install_places_are_lib_sh_defaults(tmp_path):
    env = {k: v for k, v in make_env(tmp_path).items() if k != "GAPSCOPE_NSYS_PLACES"}
    shell = lib_sh(env, 'printf "%s\\n" "$NSYS_MIN_VERSION" "$NSYS_PLACES"', cwd=tmp_path)
    assert shell.stdout.splitlines() == [capture.DEFAULT_MIN_VERSION, capture.DEFAULT_PLACES]


def test_range_all_and_a_timed_stretch_drop_the_profiler_api_range():
    assert capture.capture_flags(capture_range="all", graph_trace="graph", delay_s=2.5,
                                 duration_s=10) == [
        "--delay=2.5", "--duration=10", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
        "--cuda-graph-trace=graph", "--force-overwrite=false"]


def use_env(monkeypatch, env: dict) -> None:
    for name in [k for k in os.environ if k not in env]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("versions, pick", [
    (["2024.2.1", "2025.3.2.0"], 1),   # the newest wins
    (["2025.3.2.0", "2025.3.2.0"], 0),  # a tie keeps PATH order
])
def test_find_nsys_chooses_as_lib_sh_does(tmp_path, monkeypatch, versions, pick):
    dirs = [tmp_path / f"nsys{i}" for i in range(len(versions))]
    for d, v in zip(dirs, versions, strict=True):
        fake_nsys_at(d, v)
    env = make_env(tmp_path, PATH=os.pathsep.join([*map(str, dirs), os.environ["PATH"]]))
    shell = lib_sh(env, "find_nsys", cwd=tmp_path)
    use_env(monkeypatch, env)
    found = capture.find_nsys()
    assert found.path == shell.stdout.strip() == str(dirs[pick] / "nsys")
    assert f"gapscope: {found.note}" == shell.stderr.strip().splitlines()[-1]


def test_nsys_env_and_too_old_messages_match_lib_sh(tmp_path, monkeypatch):
    old = fake_nsys_at(tmp_path / "old", "2023.4.1.97")
    env = make_env(tmp_path, NSYS=str(old))
    shell = lib_sh(env, 'require_nsys_version "$(find_nsys)"', cwd=tmp_path)
    use_env(monkeypatch, env)
    found = capture.find_nsys()
    assert found.note == f"using nsys 2023.4.1.97 at {old} (from $NSYS)"
    with pytest.raises(capture.NsysError) as e:
        capture.require_version(found)
    assert f"gapscope: error: {e.value}" == shell.stderr.strip().splitlines()[-1]


def test_no_nsys_message_matches_lib_sh(tmp_path, monkeypatch):
    env = make_env(tmp_path, PATH=path_without_nsys())
    shell = lib_sh(env, "find_nsys", cwd=tmp_path)
    use_env(monkeypatch, env)
    with pytest.raises(capture.NsysError) as e:
        capture.find_nsys()
    assert f"gapscope: error: {e.value}" == shell.stderr.strip().splitlines()[-1]


def test_the_capture_check_counts_the_ranges_the_reader_reads(tmp_path):
    from synth import Synth

    from analysis.readers import load_trace

    t = Synth()
    # The four range types, registered or not; then a mark (34) and a range left open.
    for i, (kind, registered) in enumerate(((59, True), (60, True), (70, False), (71, False))):
        t.range(f"Step {i}", 10 * i, 10 * i + 5, registered=registered, event_type=kind)
    t.range("Step 8", 80, 80, event_type=34)
    t.range("Step 9", 90, None)
    t.launch(1, 2, 3, 4)
    path = t.write(tmp_path / "ranges.sqlite")
    c = capture.capture_contents(path, r"^Step (\d+)$")
    assert (c.steps, c.ranges, c.names) == (4, 4, ["Step 0", "Step 1", "Step 2", "Step 3"])
    assert sorted(load_trace(path).ranges["name"]) == c.names


def test_a_graph_level_capture_counts_its_graph_executions_as_kernels():
    from pathlib import Path

    run = Path(__file__).parent / "data" / "runs" / "graphed-sync-graphlevel"
    c = capture.capture_contents(run / "capture.sqlite", r"^Step (\d+)$")
    # No kernel rows at all: the 10 graph replays are what the capture holds (lib.sh agrees).
    assert (c.steps, c.kernels) == (10, 10)
