"""The seed article's own figures, read from the committed docs/article-claims.json (its "what"
says where each was quoted from): the ladder part tests them, README's findings name them. No
module of the study holds one of them as a constant."""

import functools
import json
from pathlib import Path

ARTICLE = Path(__file__).resolve().parents[1] / "docs" / "article-claims.json"


@functools.cache
def claims(path: Path = ARTICLE) -> dict:
    """claim -> its record (value, words, where, quoted)."""
    return json.loads(path.read_text())["claims"]


def value(name: str) -> float:
    return claims()[name]["value"]


def speedup() -> float:
    """The article's speedup of its last rung over naive (its main table)."""
    return value("speedup_over_naive")


def pingpong_gain() -> float:
    """The ping-pong's gain over `compiled` the article saw at its smallest batch."""
    return value("pingpong_gain_smallest_batch")


def gpu() -> str:
    return json.loads(ARTICLE.read_text())["gpu"]
