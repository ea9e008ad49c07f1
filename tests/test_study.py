"""RESULTS.md from a study directory: the tables say what the bench files and captures say."""

import json

import golden
from click.testing import CliRunner
from conftest import plain_copy

from study.cli import study as main

CONFIG = {"model": "gpt2", "dtype": "fp32", "batch": 32, "new_tokens": 100}


def bench_entry(variant: str, ms_per_step: float, spread: float = 0.1) -> dict:
    return {"variant": variant, "steps": 100, "ms_per_step_median": ms_per_step,
            "ms_per_step_p10": ms_per_step - spread, "ms_per_step_p90": ms_per_step + spread,
            "ms_per_run_median": 100 * ms_per_step, "peak_allocated_bytes": 2**30,
            "peak_reserved_bytes": 2**31, "fragmentation": 0.5, "weight_floor_pct": 2.0}


def write_bench(path, entries: list, compile_mode=None) -> None:
    path.write_text(json.dumps({"config": {"compile": compile_mode, "repeats": 5},
                                "copy_bytes_per_s": 4e12, "results": entries}))


def test_results_tables_come_from_the_bench_files_and_the_capture(tmp_path, data_dir):
    study = tmp_path / "study-x"
    run = study / "capture" / "20261130T000000Z-static"
    run.mkdir(parents=True)
    plain_copy(data_dir / "h200-eager-static-bs16.sqlite.xz", run / "capture.sqlite")
    (run / "run.json").write_text(json.dumps({
        "config": {**CONFIG, "variant": "static", "batch": 16}, "timing": {"ms_per_step": 8.0},
        "untraced": {"ms_per_step_median": 5.0},
        "floor": {"bytes_by_step": [[31, 200e6], [32, 400e6]]}}))
    write_bench(study / "bench-ladder.json", [bench_entry("naive", 6.0), bench_entry("kv", 4.0)])
    write_bench(study / "bench-ladder-compile.json", [bench_entry("pipelined", 2.0)], "default")
    write_bench(study / "bench-batch-1.json", [bench_entry("compiled", 2.2, 0.05),
                                               bench_entry("pipelined", 2.0, 0.05)], "default")
    result = CliRunner().invoke(main, [str(study), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "RESULTS.md").read_text()
    assert ["bench-ladder", 4.0, 3.9, 4.1, 1.5, 1024, 2048, 50.0] in golden.rows(text, "kv")
    # Benched in another process than naive: marked, and the sentence says so.
    (row,) = [r for r in golden.table_rows(text, "pipelined+compile")
              if r[0] == "bench-ladder-compile"]
    assert golden.values(row[1:4]) == [2.0, 1.9, 2.1, 3.0] and row[3].endswith("†")
    assert ("`pipelined+compile`, ran 2.000 in another process (`bench-ladder-compile`): "
            "3.00x naive's figure, between processes.") in " ".join(text.split())
    # 2.2 / 2.0 - 1, and the p10-p90 ranges (2.15-2.25, 1.95-2.05) do not overlap.
    assert [2.2, 2.0, 10.0, "no"] in golden.rows(text, "1")
    # The METRICS.md reference trace: 13.2% busy (23864070 of 180644905 ns), +60% under nsys,
    # 392 op records a step (343 kernels), each its own launch call.
    (row,) = [r for r in golden.table_rows(text, "static") if r[0] == "20261130T000000Z"]
    assert golden.values(row[1:])[:9] == [16, "none", 8.0, 5.0, 60, 392, 343, 392, 13.2]
    # Under the kernel classes, the whole step: its 300 MB floor (run.json) over its median
    # period of 8576.6 µs is 35 GB/s, 0.9% of the 4000 GB/s copy rate.
    assert [None, 8576.6, None, 300, 35, 1] in golden.starts(text, "whole step (floor)", 6)
    assert sorted(p.name for p in (tmp_path / "out" / "figures").iterdir()) == [
        "batch.png", "idle.png", "kernels-static.png", "ladder.png", "timeline-static.png"]


def test_a_directory_without_a_ladder_bench_is_one_line_and_exit_2(tmp_path):
    result = CliRunner().invoke(main, [str(tmp_path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "no bench-ladder.json" in result.output and len(result.output.splitlines()) == 1


def test_finish_options_put_micro_batches_and_lt_off_beside_the_finish_bench(tmp_path):
    study = tmp_path / "study-y"
    study.mkdir()
    write_bench(study / "bench-ladder.json", [bench_entry("naive", 6.0)])
    write_bench(study / "bench-finish.json", [
        bench_entry("graphed", 1.3), bench_entry("fused", 0.7), bench_entry("hf-generate", 2.1)])
    write_bench(study / "bench-lt-off.json", [bench_entry("graphed", 1.15)])
    write_bench(study / "bench-branches-2.json", [bench_entry("fused", 0.95, 0.01)])
    result = CliRunner().invoke(main, [str(study), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "RESULTS.md").read_text()
    assert [0.7, 0.6, 0.8, 100, 3, 2] in golden.starts(text, "fused", 6)  # 2.1 / 0.7
    rows = [line for line in text.splitlines() if line.startswith(("| graphed", "| fused,"))]
    assert [(r.split("|")[1].strip(), golden.values(golden.cells(r)[1:])) for r in rows[-4:]] == [
        ("graphed", [1.3, 1.2, 1.4, 2048]),
        ("graphed, DISABLE_ADDMM_CUDA_LT=1", [1.15, 1.05, 1.25, 2048]),
        ("fused, 1 branch", [0.7, 0.6, 0.8, 2048]),
        ("fused, 2 branches", [0.95, 0.94, 0.96, 2048])]


def twin(period_ns: int, bubble_ns: int) -> dict:
    """One run of steps 30..50, each `period_ns` apart with a bubble of `bubble_ns`."""
    starts = [bubble_ns + i * period_ns for i in range(21)]
    return {"step": list(range(30, 51)), "start_ns": starts,
            "end_ns": [s + period_ns - bubble_ns for s in starts]}


def test_the_profilers_share_and_the_untraced_cost_of_the_sync_from_the_twins(tmp_path, data_dir):
    study = tmp_path / "study-z"
    for variant, trace, bench, runs in (
            ("static", "h200-eager-static-bs16", 5.0, [twin(9_000_000, 20_000),
                                                       twin(9_200_000, 20_000)]),
            ("deferred", "h200-eager-pipelined-seed-bs16", 4.0, [twin(7_500_000, 30_000)])):
        run = study / "capture" / f"20261130T000000Z-{variant}"
        run.mkdir(parents=True)
        plain_copy(data_dir / f"{trace}.sqlite.xz", run / "capture.sqlite")
        (run / "run.json").write_text(json.dumps({
            "config": {**CONFIG, "variant": variant, "batch": 16},
            "timing": {"ms_per_step": 8.0}, "untraced": {"ms_per_step_median": bench}}))
        (run / "untraced_steps.json").write_text(json.dumps({
            "format": "gapscope-untraced-steps/1", "source": "cuda-events", "variant": variant,
            "window": [30, 50], "ms_per_step_median": bench, "runs": runs}))
    write_bench(study / "bench-ladder.json", [bench_entry("naive", 6.0)])
    result = CliRunner().invoke(main, [str(study), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "RESULTS.md").read_text()
    assert "### How much of the bubble is the profiler's" in text
    # static: traced bubble 189086 ns against 20000 untraced: (189086 - 20000) / 189086 = 89%;
    # its two runs' periods 9.0 and 9.2 ms, pooled median 9.1.
    assert [16, "none", 189.1, 20, 89, 8.577, 9.1, 2, 9, 9.2] in golden.starts(text, "static", 10)
    assert [16, "none", 282.9, 30, 89, 7.832, 7.5, 1, 7.5, 7.5] in golden.starts(
        text, "deferred", 10)
    # 9.1 - 7.5 ms from the twins, 5.0 - 4.0 ms from the bench.
    assert [16, 189.1, 282.9, 1600, 1000] in golden.starts(text, "static vs deferred", 5)


def test_the_header_names_the_family_the_ladder_ran(tmp_path):
    from study.results import model_description

    (tmp_path / "bench-ladder.json").write_text(json.dumps({"model": {
        "architecture": "llama", "size": "small", "parameters": 125_000_000, "layers": 12,
        "hidden": 768, "heads": 12, "kv_heads": 4}}))
    assert model_description(tmp_path) == (
        "llama:small (125M parameters, 12 layers of 768, 4 of 12 heads for keys and values)")
    (tmp_path / "bench-ladder.json").write_text(json.dumps({"config": {}}))
    assert model_description(tmp_path) == "GPT-2 124M"  # studies made before the record


def test_benches_across_processes_become_a_table_with_their_cis(tmp_path):
    from study.benches import processes_tables

    (tmp_path / "processes-eager.json").write_text(json.dumps({
        "processes": 5, "aa": False,
        "results": [
            {"variant": "static", "processes": 5, "ms_per_step_median": 5.9,
             "ms_per_step_ci95": [5.75, 6.1]},
            {"variant": "deferred", "processes": 5, "ms_per_step_median": 5.8,
             "ms_per_step_ci95": [5.7, 6.2]}],
        "differences": [{"a": "static", "b": "deferred", "median_diff_ms": -0.1,
                         "ci95": [-0.4, 0.3], "within_noise": True}]}))
    ((title, table),) = processes_tables(tmp_path)
    assert title == "### eager: 5 processes a variant, interleaved"
    assert table.values.tolist() == [
        ["static", 5, "5.900", "[5.750, 6.100]"],
        ["deferred", 5, "5.800", "[5.700, 6.200]"],
        ["deferred − static", "", "-0.100", "[-0.400, +0.300] within noise"]]
