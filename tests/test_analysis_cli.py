"""The command line: formats, compare, report, and one-line errors with exit 2 on bad input."""

import gzip
import hashlib
import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import golden
import pytest
from click.testing import CliRunner
from conftest import PIPELINED_SEED as PIPELINED
from conftest import STATIC, plain_copy
from synth import causes_trace

from analysis.cli import main

DATA = Path(__file__).parent / "data"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_analyze_json_has_the_six_keys_and_metrics_names():
    result = run("analyze", STATIC, "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert set(out) == {"summary", "steps", "gaps", "streams", "syncs", "host"}
    assert out["summary"]["window_ns"] == 180644905
    assert out["summary"]["idle_ns_by_cause"]["sync"] == 3578243
    # steps and gaps are columnar: {column: [one value a row]}
    assert len(out["steps"]["step"]) == 20 and out["steps"]["bubble_ns"][0] is None
    assert out["steps"]["bubble_ns"][1] == 222302
    assert len(out["gaps"]["gap_ns"]) == 7839 and sum(out["gaps"]["gap_ns"]) == 156781 - 156781 \
        + 180644905 - 23864070
    assert set(out["gaps"]["cause"]) == {"sync", "host", "queued"}
    assert set(out["streams"]) == {"per_stream", "pairs", "checks"}


def test_analyze_json_with_several_devices_has_one_object_each(tmp_path):
    t = causes_trace()
    t.launch(20, 25, 30, 90, device=1)
    result = run("analyze", t.write(tmp_path / "t.sqlite"), "--format", "json")
    out = json.loads(result.output)
    assert set(out) == {"devices"} and set(out["devices"]) == {"0", "1"}
    assert set(out["devices"]["1"]) == {"summary", "steps", "gaps", "streams", "syncs", "host"}
    assert out["devices"]["1"]["summary"]["window_ns"] == 60
    assert out["devices"]["0"]["summary"]["window_ns"] == 130


def test_analyze_text_reads_in_ten_seconds():
    result = run("analyze", STATIC)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "h200-eager-static-bs16: device 0, 20 steps, nsys export schema 3.20.3"
    assert "GPU busy       13.2% of a 180.64 ms window" in result.output
    assert "bubble         189.1 µs median, 206.6 µs p90" in result.output
    assert "idle by cause  host 94.3%  queued 3.4%  sync 2.3%" in result.output
    # 3578243 ns of sync idle in a 180644905 ns window.
    assert "sync idle      2.0% of the window, as traced (not what hiding the sync buys" in \
        result.output


def test_analyze_csv_and_markdown_give_one_row_a_step():
    csv = run("analyze", PIPELINED, "--format", "csv").output.splitlines()
    assert len(csv) == 21 and csv[0].startswith("step,name,cpu_start")
    md = run("analyze", PIPELINED, "--format", "md").output
    assert md.startswith("## h200-eager-pipelined-seed-bs16")
    assert golden.row(md, "bubble median") == [282.9]


def test_analyze_run_dir_labels_by_its_name_and_plots(tmp_path):
    (tmp_path / "mine").mkdir()
    plain_copy(STATIC, tmp_path / "mine" / "capture.sqlite")
    (tmp_path / "mine" / "run.json").write_text(json.dumps({"config": {"variant": "static"}}))
    result = run("analyze", tmp_path / "mine", "--plot", tmp_path / "p.png")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("mine: device 0")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_marks_noise_and_shows_profiler_overhead(tmp_path):
    for name, src, traced in (("a", STATIC, 8.6), ("b", PIPELINED, None)):
        d = tmp_path / name
        d.mkdir()
        plain_copy(src, d / "capture.sqlite")
        info = {"config": {"variant": name}, "untraced": {"ms_per_step_median": 5.9}}
        if traced:
            info["timing"] = {"ms_per_step": traced}
        (d / "run.json").write_text(json.dumps(info))
    result = run("compare", tmp_path / "a", tmp_path / "b", tmp_path / "a")
    assert result.exit_code == 0, result.output
    rows = {line[:29].strip(): line[29:].split("  ") for line in result.output.splitlines()}
    assert "8.577 [8.365, 8.797]" in result.output
    # The same run given twice: its label, then `#2` (readers.runs.unique_labels).
    assert result.output.split()[:3] == ["a", "b", "a"] and "a #2" in result.output
    assert rows["profiler overhead"][0].strip() == "45.8%"
    period = [c.strip() for c in rows["GPU period ms/step [95% CI]"] if c.strip()]
    assert period[1].endswith(" *") and period[2].endswith(" ~")
    data = json.loads(run("compare", STATIC, PIPELINED, "--format", "json").output)
    assert [r["label"] for r in data] == ["h200-eager-static-bs16",
                                          "h200-eager-pipelined-seed-bs16"]
    assert data[1]["period_ns_median_within_noise"] is False


def test_report_writes_markdown_plots_and_summaries(tmp_path):
    result = run("report", STATIC, PIPELINED, "-o", tmp_path / "out", "--show")
    assert result.exit_code == 0, result.output
    # --show (what profile.sh and `gapscope profile` end with): analyze's text of each, in order.
    assert result.stdout == run("analyze", STATIC).stdout + run("analyze", PIPELINED).stdout
    md = (tmp_path / "out" / "report.md").read_text()
    assert "![h200-eager-static-bs16, device 0](h200-eager-static-bs16-device0.png)" in md
    pngs = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert pngs == ["h200-eager-pipelined-seed-bs16-device0.png",
                    "h200-eager-static-bs16-device0.png"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["h200-eager-static-bs16"]["0"]["busy_ns"] == 23864070


def test_help_works_and_importing_the_cli_pulls_in_no_torch():
    code = ("import sys; from analysis.cli import main; "
            "assert 'torch' not in sys.modules and 'harness' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=DATA.parent.parent)
    assert run("--help").exit_code == 0


# Bad input: each gives one line on stderr naming the problem, exit 2, and leaves the bytes alone.
def _bad_files(tmp: Path) -> dict:
    files = {}
    files["not-sqlite"] = tmp / "notes.sqlite"
    files["not-sqlite"].write_text("step 1 took 8 ms\n")
    files["empty"] = tmp / "empty.sqlite"
    files["empty"].write_bytes(b"")
    files["random"] = tmp / "random.sqlite"
    files["random"].write_bytes(b"\x00" + os.urandom(4096))
    files["empty-json"] = tmp / "trace.json"
    files["empty-json"].write_bytes(b"")
    files["json-list"] = tmp / "list.json"
    files["json-list"].write_text("[1, 2, 3]\n")
    files["gzipped-list"] = tmp / "list.json.gz"
    files["gzipped-list"].write_bytes(gzip.compress(b"[1, 2, 3]\n"))
    files["gzipped-text"] = tmp / "notes.txt.gz"
    files["gzipped-text"].write_bytes(gzip.compress(b"step 1 took 8 ms\n"))
    files["xz-text"] = tmp / "notes.sqlite.xz"
    files["xz-text"].write_bytes(lzma.compress(b"step 1 took 8 ms\n"))
    files["xz-empty"] = tmp / "cut.sqlite.xz"
    files["xz-empty"].write_bytes(lzma.compress(b""))
    files["nsys-rep"] = tmp / "capture.nsys-rep"
    files["nsys-rep"].write_bytes(b"NVIDIA Tegra Profiler Report 363" + bytes(64))
    files["garbled"] = tmp / "garbled.sqlite"
    files["garbled"].write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    # A damaged header that reads as WAL mode (its bytes 18 and 19 are 2, as random bytes are
    # 1 time in 128): even a read-only connection would leave -wal and -shm files beside it.
    files["wal-header"] = tmp / "walled.sqlite"
    files["wal-header"].write_bytes(b"SQLite format 3\x00\x10\x00\x02\x02" + bytes(4076))
    files["other-program"] = tmp / "other.sqlite"
    con = sqlite3.connect(files["other-program"])
    con.execute("CREATE TABLE moz_places (id INTEGER, url TEXT)")
    con.commit()
    con.close()
    files["truncated"] = tmp / "truncated.sqlite"
    export = lzma.decompress(STATIC.read_bytes())
    files["truncated"].write_bytes(export[: len(export) // 3])
    for name, table in (("no-nvtx", "NVTX_EVENTS"), ("no-runtime", "CUPTI_ACTIVITY_KIND_RUNTIME")):
        files[name] = causes_trace().write(tmp / f"{name}.sqlite", drop=(table,))
    files["no-kernels"] = causes_trace().write(
        tmp / "no-kernels.sqlite",
        drop=("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET"))
    return files


NEITHER = ("neither an nsys SQLite export nor a torch.profiler trace (JSON); export the "
           ".nsys-rep with `nsys export --type sqlite`, or a torch.profiler trace with "
           "prof.export_chrome_trace(PATH)")
A_LIST = ("a JSON list, not a torch.profiler trace (a JSON object with a traceEvents list); "
          "export the .nsys-rep with `nsys export --type sqlite`, or a torch.profiler trace "
          "with prof.export_chrome_trace(PATH)")
# Each message whole: what the file is, by its content, and what to pass instead.
BAD_MESSAGES = {
    "not-sqlite": NEITHER,
    "empty": "empty file (a capture cut short?); export the .nsys-rep again with `nsys export "
             "--type sqlite`",
    "empty-json": "empty file (a capture cut short?); export the trace again with "
                  "prof.export_chrome_trace(PATH)",
    "random": NEITHER,
    "json-list": A_LIST,
    "gzipped-list": "a gzip file holding " + A_LIST,
    "gzipped-text": "a gzip file holding " + NEITHER,
    "xz-text": "an xz file holding " + NEITHER,
    "xz-empty": "an xz file holding nothing (a capture cut short?); export the .nsys-rep again "
                "with `nsys export --type sqlite`",
    "nsys-rep": "an Nsight Systems report (.nsys-rep), which gapscope reads through its SQLite "
                "export: `nsys export --type sqlite -o {dir}/capture.sqlite "
                "{dir}/capture.nsys-rep` (`gapscope profile` exports its own)",
    "garbled": "unreadable SQLite",
    "wal-header": "unreadable SQLite",
    "other-program": "not an Nsight Systems export (no StringIds table)",
    "truncated": "the file is damaged or truncated; export it again",
    # No NVTX at all is no error: the steps are inferred, and this trace has too few launches.
    "no-nvtx": "no step ranges, and no repeating structure to infer steps from (thread 1001, 5 "
               "launches: too few launches)",
    "no-runtime": "no CUPTI_ACTIVITY_KIND_RUNTIME table: profile with `nsys profile --trace=cuda",
    "no-kernels": "no GPU operations (no CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET or "
                   "_GRAPH_TRACE table)",
}


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analysis.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=DATA.parent.parent)


# What a fresh `python -m` shows: every warning but these (Python's default filters).
HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def cli_inproc(*args) -> subprocess.CompletedProcess:
    """_cli's call in this process (an interpreter start and the analysis' imports less, ~0.6 s
    CPU): the same main() and one-line errors, from the same directory. A warning goes to stderr
    as `python -m` would print it, so an exact stderr still says nothing else was printed."""
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as seen:
        mp.chdir(DATA.parent.parent)
        warnings.resetwarnings()
        for category in HIDDEN_WARNINGS:
            warnings.simplefilter("ignore", category)
        result = CliRunner().invoke(main, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # python -m would print its traceback and exit 1
    shown = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno)
                    for w in seen)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout,
                                       result.stderr + shown)


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    return _bad_files(tmp_path_factory.mktemp("bad"))


@pytest.mark.parametrize("kind", sorted(BAD_MESSAGES))
def test_bad_file_gives_one_line_and_exit_2(bad_files, kind):
    path = bad_files[kind]
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    result = run("analyze", path)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    line = result.output.strip()
    assert "\n" not in line and line.startswith(f"gapscope: error: {path}: ")
    assert BAD_MESSAGES[kind].format(dir=path.parent) in line
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(
        p.name for p in bad_files.values() if p.parent == path.parent)


def test_bad_paths_and_patterns_give_one_line_and_exit_2(tmp_path):
    cases = [
        (("analyze", tmp_path), "a run directory needs capture.sqlite (no .sqlite file there)"),
        (("analyze", tmp_path / "missing.sqlite"), "missing.sqlite: no such file or directory"),
        (("analyze", STATIC, "--steps", "^Iteration"),
         f"{STATIC}: no NVTX range matches the steps pattern (--steps / steps=) '^Iteration'; "
         "the ranges seen, by name (N: any number): 'Step N' ×20, 'Model Forward' ×20, "
         "'Check Stop Condition' ×20 (`gapscope ranges TRACE` lists every name"),
        (("compare", STATIC, tmp_path / "nope"), "nope: no such file or directory"),
        (("report", tmp_path / "nope", "-o", tmp_path / "out"), "no such file or directory"),
    ]
    # The first through `python -m analysis.cli`, the others in this process: the same main().
    for i, (args, message) in enumerate(cases):
        result = (_cli if i == 0 else cli_inproc)(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_a_run_is_labelled_by_its_own_name_and_its_variant_is_the_configuration(data_dir,
                                                                             tmp_path):
    from analysis.readers.runs import resolve_run

    runs = data_dir / "runs"
    assert resolve_run(str(runs / "pipelined-compile")).label == "pipelined-compile"
    assert resolve_run(str(runs / "pipelined-compile")).variant == "pipelined+compile"
    assert resolve_run(str(runs / "compiled")).label == "compiled"
    assert resolve_run(str(runs / "static" / "capture.sqlite.xz")).label == "static"
    assert resolve_run(str(runs / "fused-metrics")).label == "fused-metrics"
    # profile.sh's and gapscope profile's UTC time before the name is no part of the label.
    made = tmp_path / "20261130T171200Z-pipelined"
    shutil.copytree(runs / "pipelined", made)
    assert resolve_run(str(made)).label == "pipelined"


@pytest.mark.parametrize("args", [["--bogus"], ["report", "tests/data/runs/static"],
                                  ["analyze"], ["study", "docs"]])
def test_usage_errors_are_one_line_and_exit_2(args):
    # --bogus through `python -m analysis.cli`, the others in this process (the same main()).
    if args == ["--bogus"]:
        proc = subprocess.run([sys.executable, "-m", "analysis.cli", *args], capture_output=True,
                              text=True, cwd=Path(__file__).parent.parent)
    else:
        proc = cli_inproc(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gapscope: error: ") and len(proc.stderr.splitlines()) == 1


def test_compare_gives_idle_per_step_so_runs_of_other_lengths_compare():
    result = run("compare", STATIC, f"{STATIC}:^Step (3\\d)$", "--format", "json")
    assert result.exit_code == 0, result.output
    # One trace twice is two runs of one configuration: an object with the runs and the spread.
    whole, part = json.loads(result.output)["runs"]
    assert (whole["steps"], part["steps"]) == (20, 9)
    for r in (whole, part):
        for cause in ("sync", "host", "queued", "unknown"):
            assert r[f"idle_{cause}_ns_per_step"] == r[f"idle_{cause}_ns"] / r["steps"]
    text = run("compare", STATIC, f"{STATIC}:^Step (3\\d)$").output
    # 3578243 ns of sync idle over 20 steps is 0.179 ms a step.
    row = next(line for line in text.splitlines() if line.startswith("idle sync ms/step"))
    assert row.split()[4] == "0.179"


def test_the_report_says_the_sync_note_once_and_keeps_its_tables_in_100_columns(tmp_path):
    runs = DATA / "runs"
    result = run("report", runs / "static", runs / "pipelined", runs / "graphed-sync",
                 runs / "fused", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    md = (tmp_path / "out" / "report.md").read_text()
    assert md.count("sync idle (a share of the window): as traced") == 1
    assert "sync idle (a share of the window): as traced; no run here has the untraced twin" \
        in md
    assert max(len(line) for line in md.splitlines() if line.startswith("|")) <= 100
    assert [6.547, 6.559] in golden.starts(md, "idle host ms/step (mean)", 2)
    assert "| step | ops | host | period | busy | bubble | overlap | blocked | pre-launch | " \
        "in launch |" in md
