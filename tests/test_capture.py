"""analysis.capture.nsys: finding nsys, its version and the capture flags, the one definition
(scripts/lib.sh runs its main(); tests/test_scripts.py runs the scripts through it end to end).
The stand-in nsys (fake_nsys/) answers `--version`; main() is called in this process."""

import os

import pytest
from test_scripts import FAKE, FAKE_DIR, fake_nsys_at, make_env, path_without_nsys

from analysis.capture import nsys as capture


def test_the_capture_flags_of_every_capture():
    assert capture.capture_flags("cuda,nvtx,osrt") == [
        "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "--trace=cuda,nvtx,osrt",
        "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node", "--force-overwrite=false"]


def test_the_function_trace_flag_comes_last():
    assert capture.capture_flags("cuda,nvtx", graph_trace="graph",
                                 functions_trace="/run/functions.json")[-2:] == [
        "--force-overwrite=false", "--python-functions-trace=/run/functions.json"]


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


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = capture.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- what lib.sh asks: the answer on stdout, notes and one-line errors on stderr ---------------


@pytest.mark.parametrize("trace, graph, functions, flags", [
    (["cuda,nvtx"], [], [], ["--trace=cuda,nvtx", "--cuda-graph-trace=node"]),
    (["cuda,nvtx"], ["graph"], [], ["--trace=cuda,nvtx", "--cuda-graph-trace=graph"]),
    (["cuda,nvtx"], ["graph"], ["/f.json"],
     ["--trace=cuda,nvtx", "--cuda-graph-trace=graph", "--python-functions-trace=/f.json"]),
    (["cuda,nvtx"], ["node"], [""], ["--trace=cuda,nvtx", "--cuda-graph-trace=node"]),
])
def test_capture_flags_one_a_line(capsys, trace, graph, functions, flags):
    code, out, err = run_main(capsys, "capture-flags", *trace, *graph, *functions)
    assert (code, err) == (0, "")
    assert [f for f in out.splitlines() if f.startswith(("--trace", "--cuda-graph", "--python"))] \
        == flags
    assert len(out.splitlines()) == 5 + len(flags)


def test_metrics_flags_one_a_line(capsys):
    assert run_main(capsys, "metrics-flags", "1", "10000") == (0, "\n".join([
        "--capture-range=nvtx", "--nvtx-capture=gapscope window", "--capture-range-end=stop",
        "--trace=nvtx", "--sample=none", "--cpuctxsw=none", "--force-overwrite=false",
        "--gpu-metrics-devices=1", "--gpu-metrics-frequency=10000"]) + "\n", "")


@pytest.mark.parametrize("argv", [[], ["flags"], ["find", "x"], ["metrics-flags", "0"],
                                  ["capture-flags", "a", "b", "c", "d"]])
def test_a_question_lib_sh_does_not_ask_is_a_usage_error(capsys, argv):
    code, out, err = run_main(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == f"gapscope: error: {capture.USAGE}\n"


def test_find_nsys_takes_the_newest_on_path(tmp_path, monkeypatch, capsys):
    old = fake_nsys_at(tmp_path / "a", "2024.2.3.38")
    new = fake_nsys_at(tmp_path / "b", "2025.3.2.0")
    use_env(monkeypatch, make_env(tmp_path, PATH=f"{old.parent}:{new.parent}:"
                                  f"{path_without_nsys()}"))
    assert run_main(capsys, "find") == (
        0, f"{new}\n", f"gapscope: using nsys 2025.3.2.0 at {new} (newest of 2 found)\n")


def test_find_nsys_keeps_path_order_on_a_tie(tmp_path, monkeypatch, capsys):
    first = fake_nsys_at(tmp_path / "a", "2025.3.2.0")
    second = fake_nsys_at(tmp_path / "b", "2025.3.2.0")
    use_env(monkeypatch, make_env(tmp_path, PATH=f"{first.parent}:{second.parent}:"
                                  f"{path_without_nsys()}"))
    assert run_main(capsys, "find")[1] == f"{first}\n"


def test_find_nsys_prefers_a_newer_install_place_to_path(tmp_path, monkeypatch, capsys):
    on_path = fake_nsys_at(tmp_path / "bin", "2024.2.3.38")
    fake_nsys_at(tmp_path / "opt" / "2025.1.1" / "bin", "2025.1.1.0")
    newest = fake_nsys_at(tmp_path / "opt" / "2025.3.2" / "bin", "2025.3.2.0")
    use_env(monkeypatch, make_env(
        tmp_path,
        PATH=f"{on_path.parent}:{path_without_nsys()}",
        GAPSCOPE_NSYS_PLACES=f"{tmp_path}/nowhere/nsys {tmp_path}/opt/*/bin/nsys",
    ))
    assert run_main(capsys, "find") == (
        0, f"{newest}\n", f"gapscope: using nsys 2025.3.2.0 at {newest} (newest of 3 found)\n")


def test_find_nsys_prefers_path_to_an_install_place_on_a_tie(tmp_path, monkeypatch, capsys):
    on_path = fake_nsys_at(tmp_path / "bin", "2025.3.2.0")
    fake_nsys_at(tmp_path / "opt" / "bin", "2025.3.2.0")
    use_env(monkeypatch, make_env(tmp_path, PATH=f"{on_path.parent}:{path_without_nsys()}",
                                  GAPSCOPE_NSYS_PLACES=f"{tmp_path}/opt/bin/nsys"))
    assert run_main(capsys, "find")[1] == f"{on_path}\n"


def test_find_nsys_counts_an_nsys_reached_through_a_link_once(tmp_path, monkeypatch, capsys):
    (tmp_path / "cuda").symlink_to(FAKE_DIR)
    use_env(monkeypatch, make_env(tmp_path, PATH=f"{tmp_path / 'cuda'}:{FAKE_DIR}:"
                                  f"{path_without_nsys()}"))
    assert run_main(capsys, "find")[1:] == (
        f"{tmp_path / 'cuda'}/nsys\n",
        f"gapscope: using nsys 2025.3.2.0 at {tmp_path / 'cuda'}/nsys (newest of 1 found)\n")


def test_find_nsys_uses_nsys_env_even_when_older(tmp_path, monkeypatch, capsys):
    chosen = fake_nsys_at(tmp_path / "chosen", "2024.2.3.38")
    use_env(monkeypatch, make_env(tmp_path, NSYS=str(chosen)))
    assert run_main(capsys, "find") == (
        0, f"{chosen}\n", f"gapscope: using nsys 2024.2.3.38 at {chosen} (from $NSYS)\n")


def test_an_nsys_env_that_is_no_program_is_an_error(tmp_path, monkeypatch, capsys):
    use_env(monkeypatch, make_env(tmp_path, NSYS=str(tmp_path / "nowhere")))
    assert run_main(capsys, "find") == (2, "", (
        f"gapscope: error: NSYS={tmp_path / 'nowhere'} is not an executable file: unset NSYS or "
        "point it at nsys\n"))


def test_find_nsys_skips_an_nsys_whose_version_fails(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "broken" / "nsys"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\nexit 127\n")
    broken.chmod(0o755)
    use_env(monkeypatch, make_env(tmp_path, PATH=f"{broken.parent}:{FAKE_DIR}:"
                                  f"{path_without_nsys()}"))
    assert run_main(capsys, "find") == (0, f"{FAKE}\n", (
        f"gapscope: skipping {broken}: `nsys --version` failed\n"
        f"gapscope: using nsys 2025.3.2.0 at {FAKE} (newest of 1 found)\n"))
    assert run_main(capsys, "version", str(broken)) == (1, "", "")
    assert run_main(capsys, "require", str(broken)) == (2, "", (
        f"gapscope: error: {broken} --version failed: reinstall Nsight Systems or set NSYS to a "
        "working nsys\n"))


def test_no_nsys_names_where_it_looked(tmp_path, monkeypatch, capsys):
    env = make_env(tmp_path, PATH=path_without_nsys())
    use_env(monkeypatch, {k: v for k, v in env.items() if k != "GAPSCOPE_NSYS_PLACES"})
    assert run_main(capsys, "find") == (2, "", (
        "gapscope: error: no nsys found (looked at $NSYS, PATH, /opt/nvidia/nsight-systems/*/bin/"
        "nsys /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys): "
        "install Nsight Systems or set NSYS=/path/to/nsys\n"))


@pytest.mark.parametrize("version, minimum, code, err", [
    ("2024.2.3.38", None, 0, ""),
    ("2024.1.1.59", None, 2, "2024.2"),
    ("2023.4.1.97", "2023.4", 0, ""),
    ("2023.4.1.97", "2024.1.1.60", 2, "2024.1.1.60"),
    ("2025.10.1.0", "2025.9", 0, ""),  # by number, not by text
])
def test_require_needs_2024_2_unless_told(tmp_path, monkeypatch, capsys, version, minimum, code,
                                          err):
    nsys = fake_nsys_at(tmp_path / "n", version)
    use_env(monkeypatch, make_env(tmp_path, **({"GAPSCOPE_NSYS_MIN": minimum} if minimum else {})))
    assert run_main(capsys, "version", str(nsys)) == (0, f"{version}\n", "")
    assert run_main(capsys, "require", str(nsys)) == (code, "", err and (
        f"gapscope: error: nsys {version} at {nsys} is too old (gapscope needs {err} or newer to "
        "capture and export SQLite): install a newer Nsight Systems or set NSYS\n"))


def test_usable_is_find_then_require_in_one_call(tmp_path, monkeypatch, capsys):
    # What the capture scripts call: the version, then the path; nsys asked its version once.
    old = fake_nsys_at(tmp_path / "old", "2024.1.1.59")
    use_env(monkeypatch, make_env(tmp_path, NSYS=str(old)))
    assert run_main(capsys, "usable") == (2, "", (
        f"gapscope: using nsys 2024.1.1.59 at {old} (from $NSYS)\n"
        f"gapscope: error: nsys 2024.1.1.59 at {old} is too old (gapscope needs 2024.2 or newer "
        "to capture and export SQLite): install a newer Nsight Systems or set NSYS\n"))
    use_env(monkeypatch, make_env(tmp_path))
    assert run_main(capsys, "usable") == (0, f"2025.3.2.0\n{FAKE}\n", (
        f"gapscope: using nsys 2025.3.2.0 at {FAKE} (newest of 1 found)\n"))


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

    from analysis.readers import compressed

    run = Path(__file__).parent / "data" / "runs" / "graphed-sync-graphlevel"
    export = compressed.plain(run / "capture.sqlite.xz")  # stored xz'd; nsys writes it plain
    c = capture.capture_contents(export, r"^Step (\d+)$")
    # No kernel rows at all: the 10 graph replays are what the capture holds (lib.sh agrees).
    assert (c.steps, c.kernels) == (10, 10)
