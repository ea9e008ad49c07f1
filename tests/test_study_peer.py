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
