"""What `python -m study.publish --check` says of each document: the figures it read there
(figures.py), how many stand in generated blocks and how many are listed constants
(doc_constants.py), and every one that is neither; the constants whose pin no longer holds
(the code no longer says what the phrase says); the records it read (blocks.RECORDS), which are
their own source.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

from .figures import GENERATED, figures_in, missing_constants, stray_figures


@dataclass
class Tally:
    """The figures of one document: in generated blocks, listed constants, and the rest."""

    path: Path
    blocks: int = 0
    in_blocks: int = 0
    constants: int = 0
    stray: list = field(default_factory=list)

    @property
    def figures(self) -> int:
        return self.in_blocks + self.constants + len(self.stray)

    def line(self, whole: bool = False) -> str:
        if whole:
            return f"{self.path}: {self.in_blocks} figures, the file generated whole"
        return (f"{self.path}: {self.figures} figures: {self.in_blocks} in {self.blocks} generated "
                f"block{'s' * (self.blocks != 1)}, {self.constants} listed constant"
                f"{'s' * (self.constants != 1)}"
                + (f", {len(self.stray)} neither" if self.stray else ""))


def tally(path: Path, text: str, constants: list, whole: bool = False) -> Tally:
    """The figures of one document's text (as publish would write it)."""
    blocks = GENERATED.findall(text)
    inside = sum(len(figures_in(re.sub(r"<!--.*?-->", "", b, flags=re.S))) for b in blocks)
    if whole:
        return Tally(path, 1, len(figures_in(text)))
    stray = stray_figures(text, constants)
    outside = len(figures_in(text))
    return Tally(path, len(blocks), inside, outside - len(stray), stray)


def constant_errors(root: Path, path: Path, text: str, constants: list) -> list:
    """A listed phrase the text no longer holds, and a pinned constant whose pin (a file of the
    repository and the text in it that fixes the value) is gone: the code changed under it."""
    out = [f"{path}: doc_constants.py lists `{phrase}`, which the file no longer holds"
           for phrase in missing_constants(text, constants)]
    for entry in constants:
        if len(entry) < 3:
            continue
        where, pin = entry[2]
        source = root / where
        if not source.is_file() or pin not in source.read_text():
            out.append(f"{path}: `{entry[0]}` is pinned to `{pin}` in {where}, which no longer "
                       "says so: correct the document and its entry in doc_constants.py")
    return out
