"""study/peer.py: the peer bench's JSON as the Markdown its docs block quotes, checked on
the committed H200 run of docs/llama-peer-20261201 (the lines VARIANTS.md quotes today)."""

from pathlib import Path

from study.peer import floor_sentence, peer_block, read_peer

RUN = Path(__file__).resolve().parent.parent / "docs" / "llama-peer-20261201" / "peer.json"


def test_the_table_is_the_one_variants_md_quotes():
    table = peer_block(RUN).split("\n\n")[0].splitlines()
    assert table == [
        "| batch | gpt-fast ms/token | `graphed` | `fused` | `graphed` vs gpt-fast | "
        "`fused` vs gpt-fast |",
        "| --- | --- | --- | --- | --- | --- |",
        "| 1 | 0.443 (0.442-0.455) | 0.594 (0.593-0.594) | 0.352 (0.351-0.352) | 0.75x | 1.26x |",
        "| 8 | 0.613 (0.607-0.615) | 0.685 (0.685-0.685) | 0.377 (0.377-0.377) | 0.89x | 1.63x |"]
    variants = (RUN.parent.parent / "VARIANTS.md").read_text()
    for cells in ("0.443 (0.442-0.455)", "0.352 (0.351-0.352)", "0.594 (0.593-0.594)"):
        assert cells in variants


def test_floor_shares_by_side_and_batch():
    assert floor_sentence(read_peer(RUN)) == (
        "Share of the bandwidth floor (harness/floor.py at the copy rate measured in each "
        "process) at batch 1 and 8: gpt-fast 14.8% and 11.9%, `graphed` 11.0% and 10.7%, "
        "`fused` 18.5% and 18.2%.")


def test_the_8b_table_and_the_fold_s_a_b_are_the_committed_h200_runs():
    # docs/ladder8b-20261202/peer.json: two processes a side and batch (the spread is between
    # their medians); docs/sizes-20261202: the three fused steps of one process, and the earlier
    # one-process peer run (gpt-fast 5.051 then 4.722 at batch 1: 4.722 / 5.051 - 1 = -6.5%).
    # VARIANTS.md quotes them.
    from study.doc_variants import fused_8b, peer_8b

    root = RUN.parent.parent.parent
    table = peer_8b(root).split("\n\n")[0].splitlines()
    assert table[2:] == [
        "| 1 | 4.722 (4.693-4.750) | 4.408 (4.408-4.409) | 1.07x | 81.8 | 87.6 |",
        "| 8 | 5.596 (5.565-5.627) | 4.519 (4.518-4.519) | 1.24x | 69.5 | 85.8 |"]
    text = " ".join(peer_8b(root).split())
    assert "copy rates ran 3942-4166 GB/s" in text
    assert "gpt-fast 5.051 at batch 1 (-6.5% now)" in text
    assert "gpt-fast's decode moved up to 6.5%, `fused`'s up to 1.2%" in text
    fold = fused_8b(root).split("\n\n")[0].splitlines()
    assert [row.split(" | ")[1:4] for row in fold[2:]] == [
        ["5", "5.031 (5.028-5.033)", "77.8"], ["10", "4.659 (4.656-4.663)", "84.0"],
        ["8", "4.354 (4.351-4.356)", "89.9"]]
    assert "kernels ran 4277 µs of it" in " ".join(fused_8b(root).split())


def test_the_8b_metrics_block_is_the_committed_h200_captures():
    # docs/ladder8b-20261202/metrics: graphed and fused at llama:8b batch 1, GPU metrics over
    # steps 31-90 with their twins. fused: 3545 GB/s median DRAM read at the run's 4057 GB/s
    # copy rate = 87.4%.
    from study.doc_variants import metrics_8b

    root = RUN.parent.parent.parent
    table = metrics_8b(root).split("\n\n")[0].splitlines()
    assert table[2:] == ["| `graphed` | 5.235 | 76.2 | 3018 | 74.9% | 65.5% | 99.9% |",
                         "| `fused` | 4.342 | 91.3 | 3545 | 87.4% | 74.8% | 99.8% |"]
    assert "over steps 31-90" in " ".join(metrics_8b(root).split())


def test_the_readme_s_8b_block_is_the_committed_study_and_peer_run():
    # bench-sizes-8b-b1.json: while-fused 4.433 ms (88.2%), graphed 5.288, naive 26.389 the
    # fastest eager rung (26.389 / 5.288 = 4.99x); peer.json: 1.07x and 1.24x. The earlier run
    # of the same configuration (docs/sizes-20261202/study/bench-sizes-8b-b1.json): graphed
    # 5.205, graphed-sync 5.269: its `.item()` 64.2 µs against this run's 88.3 (issue 41: the
    # block once quoted this run's alone).
    from study.doc_readme import readme_sizes

    text = " ".join(readme_sizes(RUN.parent.parent.parent).split())
    assert text.startswith("**At Llama-3-8B's shape** (random bf16 weights drawn on the GPU, "
                           "batch 1, 100 tokens, one process;")
    for part in ("`while-fused`, runs 4.433 ms a token, 88.2% of the bandwidth floor",
                 "(`graphed`, 5.288; 5.205 in the earlier run) is 5.0x the fastest eager rung "
                 "(`naive`, 26.389)",
                 "costs 88.3 µs (1.6% of the step; 64.2 µs in the earlier run of the same "
                 "configuration (`docs/sizes-20261202/study`), 24.1 µs apart)",
                 "1.07x at batch 1 and 1.24x at batch 8"):
        assert part in text


def test_the_item_cost_is_given_for_both_runs_of_each_configuration():
    # Part `sizes` (RESULTS.md): graphed-sync minus graphed, this run 9.5 / 40.8 / 88.3 µs
    # (small, 1b, 8b), the earlier run 24.8 / -6.3 / 64.2: apart by 15.3 (small) to 47.1 (1b)
    # µs, both given (the audit found one run's figures where the two disagree).
    from study.sizes import sizes_sections

    study = RUN.parent.parent / "ladder8b-20261202" / "study"
    text = " ".join(" ".join(sizes_sections(study)).split())
    assert ("9.5 µs a step at small (125M) b1 (1.6% of graphed-sync's step), 40.8 µs a step at 1b "
            "(1.24B) b1 (2.9% of graphed-sync's step) and 88.3 µs a step at 8b (8.03B) b1") in text
    assert ("in the earlier run of the same configurations (`docs/sizes-20261202/study`) 24.8, "
            "-6.3 and 64.2 µs: the two runs 15.3 to 47.1 µs apart") in text
    assert "| 1b (1.24B) b1 | 1.419 | 1.379 | 40.8 | 2.9% | -6.3 |" in text
