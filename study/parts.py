"""RESULTS.md one part at a time (`python -m study DIR -o OUT --part PART`): the parts, each made
from one directory, and their blocks between markers (`<!-- part: NAME -->`), put into a
RESULTS.md whose other text stays as it is. The whole study's RESULTS.md is results.py's.

The parts' modules are imported when a part is made; results.py imports this one's markers.
"""

from pathlib import Path


class StudyError(Exception):
    """Nothing to make the results from: one line, said as it is (not "cannot make the
    results")."""


def part_start(name: str) -> str:
    return f"<!-- part: {name} -->"


PART_START, PART_END = part_start("observer"), "<!-- /part -->"
# The parts of RESULTS.md in the order they stand, each made from one directory (`overview`
# from the repository root: every directory sources.SOURCES names).
PARTS = ("ladder", "captures", "observer", "hardware", "aa", "family", "loop", "sizes",
         "mega", "host", "overview")
PART_HELP = {
    "ladder": "a study's bench-*.json (no captures needed)",
    "captures": "a directory of run directories (tests/data/runs)",
    "observer": "a scripts/overhead.sh directory (or STUDY/observer)",
    "hardware": "a scripts/hardware-view.sh directory (its runs/)",
    "aa": "harness bench --processes A/A reports (aa-*.json)",
    "family": "bench-ladder-b<B>.json and capture/ of another model family",
    "host": "the repository root: the eager captures' host bounds beside the rungs they predict",
    "loop": "bench-b<B>-p<K>.json and steps-*.json of the loops of one launch",
    "sizes": "bench-sizes-<size>-b<B>.json and capture/ of the ladder at 125M, 1B and 8B",
    "mega": "bench-mega-<size>-b<B>-p<K>.json: fused, while-fused, mega and while-mega",
    "overview": "the repository root: every capture of the published directories",
}


def part_sections(part: str, study: Path, fig: Path | None) -> list:
    """One part's Markdown blocks (empty when STUDY has nothing for it); its figures into
    `fig` when given."""
    from .aa import aa_sections
    from .family import family_sections
    from .hardware import hardware_sections
    from .ladder import ladder_sections
    from .loop import loop_sections
    from .mega import mega_sections
    from .observer_part import observer_sections
    from .runs import captures_sections
    from .sizes import sizes_sections

    if part == "observer":
        return observer_sections(study / "observer" if (study / "observer").is_dir()
                                 else study, fig)
    if part == "overview":
        from .overview import overview_sections

        return overview_sections(study, fig)
    if part == "host":
        from .host_ladder import host_sections

        return host_sections(study, fig)
    return {"ladder": ladder_sections, "captures": captures_sections,
            "hardware": hardware_sections, "aa": lambda s, _: aa_sections(s),
            "family": lambda s, f: family_sections(s, f), "loop": loop_sections,
            "sizes": sizes_sections, "mega": mega_sections}[part](study, fig)


def part_body(part: str, study: Path, out: Path | None) -> list:
    fig = None
    if out is not None:
        fig = out / "figures"
        fig.mkdir(parents=True, exist_ok=True)
    body = part_sections(part, study, fig)
    if not body:
        raise StudyError(f"{study}: nothing for part {part} here: it needs "
                         f"{PART_HELP[part]}")
    return body


def part_block(part: str, body: list) -> str:
    from .text import wrap

    return "\n\n".join([part_start(part), *map(wrap, body), PART_END])


def put_part(text: str, part: str, block: str) -> str:
    """`text` with the part's block replaced, or put before the first later part present (the
    PARTS order), or at the end."""
    start = part_start(part)
    if start in text and PART_END in text.split(start, 1)[1]:
        head, rest = text.split(start, 1)
        return head + block + rest.split(PART_END, 1)[1]
    later = [part_start(p) for p in PARTS[PARTS.index(part) + 1:] if part_start(p) in text] \
        if part in PARTS else []
    if later:
        head, rest = text.split(later[0], 1)
        return head + block + "\n\n" + later[0] + rest
    if "\n## 1. " in text:
        head, rest = text.split("\n## 1. ", 1)
        return head + "\n" + block + "\n\n## 1. " + rest
    return text.rstrip("\n") + ("\n\n" if text.strip() else "") + block + "\n"


def write_part(study: Path, out: Path, part: str = "observer") -> Path:
    """One part alone, put into OUT/RESULTS.md between its markers (`<!-- part: NAME -->`),
    the rest of the file left as it is."""
    body = part_body(part, study, out)
    path = out / "RESULTS.md"
    text = path.read_text() if path.is_file() else ""
    path.write_text(put_part(text, part, part_block(part, body)))
    return path
