"""analysis/study/peer.py: the peer bench's JSON as the Markdown its docs block quotes, checked on
the committed H200 run of docs/llama-peer-20261201 (the lines VARIANTS.md quotes today)."""

from pathlib import Path

from analysis.study.peer import floor_sentence, peer_block, read_peer

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
    # docs/sizes-20261202: one process a side and batch (the spread is of its 5 runs), and the
    # three fused steps of one process; VARIANTS.md quotes both.
    from analysis.study.doc_variants import fused_8b, peer_8b

    root = RUN.parent.parent.parent
    table = peer_8b(root).split("\n\n")[0].splitlines()
    assert table[2:] == [
        "| 1 | 5.051 (5.047-5.052) | 4.356 (4.355-4.356) | 1.16x | 77.5 | 95.1 |",
        "| 8 | 5.405 (5.404-5.407) | 4.470 (4.469-4.470) | 1.21x | 72.5 | 87.5 |"]
    fold = fused_8b(root).split("\n\n")[0].splitlines()
    assert [row.split(" | ")[1:4] for row in fold[2:]] == [
        ["5", "5.031 (5.028-5.033)", "77.8"], ["10", "4.659 (4.656-4.663)", "84.0"],
        ["8", "4.354 (4.351-4.356)", "89.9"]]
    assert "kernels ran 4277 µs of it" in " ".join(fused_8b(root).split())
