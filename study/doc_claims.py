"""Generated blocks for claims the documents once made by hand (issue 41's audit): each figure
read from the committed file that shows it.

gelu_new         VARIANTS.md: the kernels HF's `gelu_new` runs, counted in `static`'s capture
bench_repeats    VARIANTS.md: how many repeats each committed bench file's medians are over
"""

import json
from collections import Counter
from pathlib import Path

from .text import listing

STATIC_RUN = "tests/data/runs/static"


def mlp_elementwise(names: list) -> list:
    """The elementwise kernels between each GPT-2 MLP's two GEMMs, in one step's kernels in
    order: a layer's second layer norm (ln_2) is followed by c_fc's GEMM, the activation's
    kernels, then c_proj's GEMM (the same GEMM kernel again)."""
    norms = [i for i, n in enumerate(names) if "layer_norm" in n]
    counts = []
    for i in norms[1::2]:
        if i + 1 >= len(names):
            break
        gemm = names[i + 1]
        end = next((j for j in range(i + 2, len(names)) if names[j] == gemm), None)
        if end is None:
            break
        between = names[i + 2:end]
        counts.append(sum("elementwise" in n for n in between) if between else 0)
    return counts


def gelu_counts(root: Path) -> Counter:
    """elementwise kernels between c_fc and c_proj -> MLP blocks with that many, over every
    step of `static`'s capture."""
    from .captures import analysed

    ((_, _, (a,), strings),) = analysed([root / STATIC_RUN])
    ops = a.ops[(a.ops["step"] >= 0) & (a.ops["kind"] == "kernel")].sort_values("start_ns")
    found = Counter()
    for _, step in ops.groupby("step"):
        found.update(mlp_elementwise(list(step["name"])))
    return found


def gelu_new(root: Path) -> str:
    counts = gelu_counts(root)
    blocks = sum(counts.values())
    if len(counts) == 1:
        (n,) = counts
        said = f"{n} elementwise kernels between c_fc's GEMM and c_proj's, in all {blocks} MLP " \
               "blocks of its steps"
    else:
        said = "between c_fc's GEMM and c_proj's " + listing(
            [f"{n} elementwise kernels in {k} MLP blocks" for n, k in sorted(counts.items())])
    return (f"HF's `gelu_new`, as `static`'s capture ran it (`{STATIC_RUN}`, traced node by "
            f"node): {said}.")


# the committed directories of harness bench files (`harness bench --json`: a bench-*.json of a
# study, or the untraced.json of a run directory), each file's `config.repeats`
BENCH_GLOBS = ("docs/**/*.json", "tests/data/**/*.json")


def bench_repeats_by_dir(root: Path) -> dict:
    """repeats -> {top directory: files} over every committed bench file."""
    out: dict = {}
    for pattern in BENCH_GLOBS:
        for path in sorted(root.glob(pattern)):
            try:
                doc = json.loads(path.read_text())
            except (ValueError, UnicodeDecodeError):
                continue
            config = doc.get("config") if isinstance(doc, dict) else None
            if not (isinstance(config, dict) and "repeats" in config and "results" in doc):
                continue
            parts = path.relative_to(root).parts
            top = "/".join(parts[:3] if parts[0] == "tests" else parts[:2])
            by_dir = out.setdefault(config["repeats"], {})
            by_dir[top] = by_dir.get(top, 0) + 1
    return out


def bench_repeats(root: Path) -> str:
    found = bench_repeats_by_dir(root)
    parts = []
    for repeats in sorted(found, reverse=True):
        dirs = found[repeats]
        parts.append(f"{repeats} repeat{'s' * (repeats != 1)} in " + listing(
            [f"`{d}` ({n} file{'s' * (n != 1)})" for d, n in sorted(dirs.items())]))
    return ("The committed bench files (`config.repeats` of each): " + "; ".join(parts) + ".")
