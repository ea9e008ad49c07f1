"""`python -m study.benchmark --json FILE`, and the block publish makes of it in
docs/ANALYSIS.md: says when, under what load, against which nsys, and the range of every output
against nsys's time."""

import golden

from study.benchmark import block_text
from study.publish import GEN_END, gen_start, put_generated


def test_the_block_gives_each_median_its_runs_and_the_range_against_nsys():
    rows = [("analyze --format text", [3.0, 3.5, 4.0], 0.46, 0.0),
            ("report -o DIR", [5.0, 6.0, 7.5], 0.54, 0.3)]
    text = block_text("2026-12-02 10:00 UTC", 2, 1_176_000, 174.2, 3, (1.5, 3.25),
                      ("2024.2.3", [5.0, 5.0, 6.0]), rows)
    head, table, tail = text.split("\n\n")
    head, tail = " ".join(head.split()), " ".join(tail.split())  # wrapped at 100 columns
    assert head.startswith("Measured 2026-12-02 10:00 UTC on 2 cores: 1,176,000 GPU op records "
                           "(174 MiB")
    assert "load average (1 min) 1.50 at the start, 3.25 at the end" in head
    assert "nsys 2024.2.3 `stats -r nvtx_gpu_proj_trace`: 5.00 s (median; runs 5.00–6.00 s)" \
        in head
    # Medians 3.5 and 6.0 s over nsys's 5.0 s.
    assert golden.row(table, "`analyze --format text`") == [3.5, 3.0, 4.0, 0.7, 0.46, 0.0]
    assert golden.starts(table, "`report -o DIR`", 4) == [[6.0, 5.0, 7.5, 1.2]]
    assert tail == ("Every output took 0.70–1.20x of nsys's projection in this run (medians), "
                    "under a load average of 1.50–3.25 on 2 cores; the largest peak RSS 0.54 "
                    "GiB.")


def test_the_block_goes_between_its_markers():
    doc = f"# Speed\n\n{gen_start('benchmark')}\nold table\n{GEN_END}\n\nafter\n"
    new = put_generated(doc, "benchmark", "new table")
    assert new == f"# Speed\n\n{gen_start('benchmark')}\nnew table\n{GEN_END}\n\nafter\n"


def test_the_json_record_holds_every_figure_the_machine_and_the_load(tmp_path, monkeypatch):
    from study import benchmark

    # wall s, peak RSS KiB, bytes written, CPU s
    calls = iter([(3.0, 2**20, 2**20, 2.5), (5.0, 2**19, 0, 4.0)])
    monkeypatch.setattr(benchmark, "run_command", lambda args, out: next(calls))
    record = benchmark.measure(benchmark.DEFAULT_SOURCE, 1, True, 1, None, tmp_path,
                               only=("format text", "format json"))
    assert record["format"] == "gapscope-benchmark/1" and record["nsys"] is None
    assert record["trace"]["source"] == "tests/data/h200-eager-static-bs16.sqlite.xz"
    assert (record["trace"]["copies"], record["trace"]["step_names"]) == (1, "repeated")
    assert record["machine"]["cores"] >= 1 and len(record["load_average"]["start"]) == 3
    assert [{k: c[k] for k in ("name", "wall_s", "cpu_s", "peak_rss_gib", "written_mib", "ratio")}
            for c in record["commands"]] == [
        {"name": "analyze --format text", "wall_s": [3.0], "cpu_s": [2.5], "peak_rss_gib": 1.0,
         "written_mib": 1.0, "ratio": None},
        {"name": "analyze --format json", "wall_s": [5.0], "cpu_s": [4.0], "peak_rss_gib": 0.5,
         "written_mib": 0.0, "ratio": None}]
    tail = " ".join(benchmark.block_from_record(record).split("\n\n")[-1].split())
    assert tail == "No nsys in this run, so no ratio; the largest peak RSS 1.00 GiB."
