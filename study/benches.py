"""A study's untraced benches (scripts/study.sh's bench-*.json) as RESULTS.md tables."""

import json
import math
import re
from pathlib import Path

import pandas as pd

from .text import fmt_ms

LADDER = [
    "naive",
    "kv",
    "kv-expandable",
    "static",
    "compiled",
    "pipelined",
    "pipelined+compile",
    "pipelined-seed+compile",
    "hf-generate",
]
LADDER_BENCHES = ("ladder", "ladder-expandable", "ladder-compile")


def made_line(versions: dict, config: dict, processes: int, model: bool = True) -> str:
    """The sentence a part's bench files open with: the card and the software they ran on, the
    configuration they share (the model too where it is one), and how many processes."""
    ver, cfg = versions, config
    what = f"{cfg.get('model')}, " if model else ""
    return (f"Made with {ver.get('gpu')}, driver {ver.get('driver')}, torch {ver.get('torch')}, "
            f"transformers {ver.get('transformers')}: {what}{cfg.get('dtype')} "
            f"with matmul precision \"{cfg.get('matmul_precision')}\", "
            f"{cfg.get('new_tokens')} new tokens, stop schedule {cfg.get('stop')}, "
            f"{cfg.get('repeats')} repeats a rung ({processes} bench processes).")


def read_bench(path: Path) -> pd.DataFrame:
    """One row a variant; compiled runs of a non-compiled variant are labelled `+compile`."""
    data = json.loads(path.read_text())
    rows = pd.DataFrame(data["results"])
    compiled = data["config"].get("compile") not in (None, "none")
    rows["label"] = [v + "+compile" if compiled and v != "compiled" else v for v in rows["variant"]]
    rows["copy_bytes_per_s"] = data["copy_bytes_per_s"]
    return rows.set_index("label")


def benches(study: Path) -> dict:
    return {
        p.stem.removeprefix("bench-"): read_bench(p) for p in sorted(study.glob("bench-*.json"))
    }


def ladder_rows(b: dict) -> pd.DataFrame:
    """The ladder's variants in order, each with the bench (one process) it came from."""
    rows = pd.concat([b[k].assign(bench=f"bench-{k}") for k in LADDER_BENCHES if k in b])
    return rows.loc[[v for v in LADDER if v in rows.index]]


def ladder_table(b: dict, floor: tuple | None = None) -> pd.DataFrame:
    """Each rung untraced; × naive divides naive's ms/step by the rung's, marked † where the
    rung ran in another process than naive (a comparison between processes), and `within
    noise` where that ratio is inside the A/A floor (`floor`: aa.floor)."""
    from .text import beyond

    rows = ladder_rows(b)
    base = rows.loc["naive", "ms_per_step_median"]
    same = rows["bench"] == rows.loc["naive", "bench"]
    return pd.DataFrame(
        {
            "variant": rows.index,
            "bench (one process)": rows["bench"],
            "ms/step median": rows["ms_per_step_median"].map(fmt_ms),
            "p10–p90": [
                f"{a:.2f}–{c:.2f}"
                for a, c in zip(rows["ms_per_step_p10"], rows["ms_per_step_p90"], strict=True)
            ],
            "× naive": [f"{base / x:.2f}x" + ("" if s else " †" if beyond(base / x, floor)
                                              else " † (within noise)")
                        for x, s in zip(rows["ms_per_step_median"], same, strict=True)],
            "peak alloc MiB": (rows["peak_allocated_bytes"] / 2**20).map("{:.0f}".format),
            "peak reserved MiB": (rows["peak_reserved_bytes"] / 2**20).map("{:.0f}".format),
            "fragmentation": (rows["fragmentation"] * 100).map("{:.1f}%".format),
        }
    )


LADDER_NOTE = ("† another process than naive's: × naive compares figures of two processes "
               "(part A/A: how far an eager figure moves between processes); within noise where "
               "that ratio is inside the eager A/A floor.")


def numbered(b: dict, prefix: str) -> dict:
    """bench-<prefix>-<n> files by n, in numeric order."""
    found = {
        int(k[len(prefix) + 1 :]): v for k, v in b.items() if re.fullmatch(rf"{prefix}-\d+", k)
    }
    return dict(sorted(found.items()))


def scale_table(b: dict) -> pd.DataFrame:
    rows = []
    for n, df in numbered(b, "scale").items():
        naive, kv = df.loc["naive"], df.loc["kv"]
        rows.append(
            {
                "new tokens": n,
                "naive ms/run": f"{naive['ms_per_run_median']:.0f}",
                "kv ms/run": f"{kv['ms_per_run_median']:.0f}",
                "naive ms/step": fmt_ms(naive["ms_per_step_median"]),
                "kv ms/step": fmt_ms(kv["ms_per_step_median"]),
                "naive / kv": f"{naive['ms_per_run_median'] / kv['ms_per_run_median']:.2f}x",
                "naive reserved MiB": f"{naive['peak_reserved_bytes'] / 2**20:.0f}",
            }
        )
    return pd.DataFrame(rows)


def overlaps(a: pd.Series, b: pd.Series) -> bool:
    """Whether two variants' p10–p90 ranges of ms/step overlap: a difference within noise."""
    return (
        a["ms_per_step_p10"] <= b["ms_per_step_p90"]
        and b["ms_per_step_p10"] <= a["ms_per_step_p90"]
    )


def batch_table(b: dict) -> pd.DataFrame:
    rows = []
    for n, df in numbered(b, "batch").items():
        c, p = df.loc["compiled"], df.loc["pipelined+compile"]
        gain = c["ms_per_step_median"] / p["ms_per_step_median"] - 1
        rows.append(
            {
                "batch": n,
                "compiled ms/step": fmt_ms(c["ms_per_step_median"]),
                "pipelined+compile ms/step": fmt_ms(p["ms_per_step_median"]),
                "pipelined gain": f"{gain * 100:+.1f}%",
                "within p10–p90 noise": "yes" if overlaps(c, p) else "no",
            }
        )
    return pd.DataFrame(rows)


def finish_table(b: dict) -> pd.DataFrame:
    rows = b["finish"]
    ref = rows.loc["hf-generate", "ms_per_step_median"] if "hf-generate" in rows.index else math.nan
    return pd.DataFrame(
        {
            "variant": rows.index,
            "ms/step median": rows["ms_per_step_median"].map(fmt_ms),
            "p10–p90": [
                f"{a:.3f}–{c:.3f}"
                for a, c in zip(rows["ms_per_step_p10"], rows["ms_per_step_p90"], strict=True)
            ],
            "steps run": rows["steps"],
            "vs hf-generate": (ref / rows["ms_per_step_median"]).map("{:.2f}x".format),
            "% of weight floor": rows["weight_floor_pct"].map("{:.1f}%".format),
        }
    )


def finish_options_table(b: dict) -> pd.DataFrame:
    """fused by micro-batches (bench-branches-N beside bench-finish's one branch) and graphed with
    cuBLASLt off (bench-lt-off beside bench-finish's graphed): separate processes, same config."""
    fin = b["finish"]
    rows = []
    if "graphed" in fin.index:
        rows.append(("graphed", fin.loc["graphed"]))
    if "lt-off" in b:
        rows.append(("graphed, DISABLE_ADDMM_CUDA_LT=1", b["lt-off"].loc["graphed"]))
    if "fused" in fin.index:
        rows.append(("fused, 1 branch", fin.loc["fused"]))
    for n, df in numbered(b, "branches").items():
        rows.append((f"fused, {n} branches", df.loc["fused"]))
    return pd.DataFrame(
        {
            "variant": [name for name, _ in rows],
            "ms/step median": [fmt_ms(r["ms_per_step_median"]) for _, r in rows],
            "p10–p90": [f"{r['ms_per_step_p10']:.3f}–{r['ms_per_step_p90']:.3f}" for _, r in rows],
            "peak reserved MiB": [f"{r['peak_reserved_bytes'] / 2**20:.0f}" for _, r in rows],
        }
    )


def processes_tables(study: Path, pattern: str = "processes-*.json") -> list:
    """(title, table) for each `processes-*.json` (`harness bench --processes N`): each variant's
    median ms/step with its 95% CI over processes, and each pair's difference against the first
    variant, with its CI (docs/METRICS.md: comparisons across processes)."""
    out = []
    for path in sorted(study.glob(pattern)):
        report = json.loads(path.read_text())
        rows = [{"variant": r["variant"], "processes": r["processes"],
                 "ms/step median": fmt_ms(r["ms_per_step_median"]),
                 "95% CI (between processes)": "[{:.3f}, {:.3f}]".format(*r["ms_per_step_ci95"])}
                for r in report["results"]]
        for d in report["differences"]:
            lo, hi = d["ci95"]
            rel = d.get("relative_ci95")
            rows.append({"variant": f"{d['b']} − {d['a']}", "processes": "",
                         "ms/step median": f"{d['median_diff_ms']:+.3f}",
                         "95% CI (between processes)": f"[{lo:+.3f}, {hi:+.3f}] "
                         + (f"({rel[0] * 100:+.1f}% to {rel[1] * 100:+.1f}%) " if rel else "")
                         + ("within noise" if d["within_noise"] else "a difference")})
        title = (f"### {path.stem.removeprefix('processes-')}: {report['processes']} processes a "
                 "variant, interleaved")
        if report.get("processes_planned", report["processes"]) != report["processes"]:
            title += f" (of {report['processes_planned']} planned)"
        out.append((title, pd.DataFrame(rows)))
    return out



def model_text(model: dict | None) -> str:
    """A bench's model record (harness/model.py) in words; GPT-2 124M for benches made before
    they recorded it."""
    if not model or model.get("architecture") == "gpt2" and model.get("size") == "small":
        return "GPT-2 124M"
    return (f"{model['architecture']}:{model['size']} ({model['parameters'] / 1e6:.0f}M "
            f"parameters, {model['layers']} layers of {model['hidden']}, {model['kv_heads']} "
            f"of {model['heads']} heads for keys and values)")
