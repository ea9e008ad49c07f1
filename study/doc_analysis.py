"""docs/ANALYSIS.md's generated blocks (blocks.py): the Speed block from the committed run of
`python -m study.benchmark --json`, the fused step's longest waits from its bundled
capture, and the HTA comparisons from the committed JSONs of `python -m scripts.hta_compare`
beside the Kineto capture's cross-check with nsys."""

import json
from pathlib import Path

from .text import BETWEEN_PROCESSES, between, floor_note, listing, pct

BENCHMARK = "docs/benchmark-2core.json"
FUSED_RUN = "tests/data/runs/fused"
KINETO_RUN = "tests/data/runs/static-kineto"
HTA_DIR = "docs/hta-20261201"


def benchmark_block(root: Path) -> str:
    """The Speed block: the committed benchmark run, on this project's 2-core machine, with the
    load it ran under and nsys's projection timed in the same run."""
    from .benchmark import block_from_record

    record = json.loads((root / BENCHMARK).read_text())
    m = record["machine"]
    command = record.get("command", "python -m study.benchmark")
    # the record holds the command as it ran; the study's module has moved out of the library
    moved = "python -m analysis.study." in command
    command = command.replace("python -m analysis.study.", "python -m study.")
    return (block_from_record(record) + "\n\n"
            + f"From `{BENCHMARK}`: `{command}`"
            + (" (recorded as `analysis.study.benchmark`, the study's module then)" if moved
               else "") + f" on {m['cpu']}, Python {m['python']}.")


def _analysis(root: Path, run: str):
    from .captures import analysed

    ((run_, _, (a, *_), _),) = analysed([root / run])
    return a, run_


def fused_waits(root: Path) -> str:
    """The last query's answer on the bundled `fused` capture: the ops the GPU waits for
    longest, idle before each a step."""
    a, _ = _analysis(root, FUSED_RUN)
    per = (a.gaps.groupby("next_op", observed=True)["gap_ns"].sum() / 1e3
           / a.summary["steps"]).sort_values(ascending=False).head(3)
    return (f"On the bundled `fused` capture (`{FUSED_RUN}`, traced node by node) the last one "
            "puts first " + listing([f"`{name}` ({us:.1f} µs a step)" for name, us in
                                     per.items()]) + ".")


def _hta(root: Path, name: str) -> dict:
    return json.loads((root / HTA_DIR / name).read_text())


def _row(label: str, d: dict, digits: int = 1) -> str:
    cells = [d["host_wait"], d["kernel_wait"], d["other"]]
    idle = sum(cells)
    return (f"| {label} | {idle:.{digits}f} | "
            + " | ".join(f"{c:.{digits}f}" for c in cells) + " |")


def _streams(hta: dict) -> dict:
    """HTA's breakdown summed over the streams it reports, in µs."""
    out = {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0}
    for per in hta.values():
        for k in out:
            out[k] += per.get(k, 0.0)
    return out


def _gapscope(doc: dict) -> tuple:
    (g,) = doc["gapscope"].values()
    rules = {k: v / 1e3 for k, v in g["hta_rules_ns"].items()}
    causes = {k: v / 1e3 for k, v in g["idle_ns_by_cause"].items()}
    return rules, causes


def hta_resnet(root: Path) -> str:
    """HTA's own test trace (ResNet training on a V100): HTA rounded and not, gapscope by HTA's
    rules and by cause, over the steps HTA keeps and over all of them."""
    four, five = _hta(root, "resnet-steps-101-104.json"), _hta(root, "resnet-all-steps.json")
    shipped, exact = _streams(four["hta_us"]), _streams(four["hta_exact_us"])
    rules, causes = _gapscope(four)
    _, all_causes = _gapscope(five)
    lines = ["| | idle | host wait | kernel wait | other |", "| --- | --- | --- | --- | --- |",
             _row("HTA, as shipped (rounded to whole µs)", shipped),
             _row("HTA, `HTA_DISABLE_NS_ROUNDING=1`", exact),
             _row("gapscope, steps 101–104, HTA's rules", rules),
             f"| gapscope, steps 101–104, by cause | {sum(causes.values()):.1f} | host "
             f"{causes['host']:.1f} | queued {causes['queued']:.1f} | sync {causes['sync']:.1f}, "
             f"unknown {causes['unknown']:.1f} |"]
    idle = {k: sum(v.values()) for k, v in (("shipped", shipped), ("exact", exact),
                                            ("rules", rules))}
    text = (f"The idle agrees to {abs(idle['exact'] - idle['rules']):.1f} µs once HTA's rounding "
            f"is off (rounded, HTA reports {pct(idle['shipped'] / idle['exact'] - 1, 0)} more "
            f"idle than unrounded); {abs(exact['host_wait'] - rules['host_wait']):.1f} µs move "
            "between host wait and kernel wait. All five steps in gapscope: idle "
            f"{sum(all_causes.values()):.1f} µs, host {all_causes['host']:.1f}, queued "
            f"{all_causes['queued']:.1f} (HTA leaves out the last step).")
    return "\n".join(lines) + "\n\n" + text


def hta_h200(root: Path) -> str:
    """The H200 pair of one decode loop: HTA beside gapscope on its Kineto capture, and the
    Kineto capture beside the nsys one (each its own process) and the untraced figures."""
    from analysis.toolkit import analyze, load_trace

    from .aa import floor

    doc = _hta(root, "h200-static-kineto.json")
    shipped, exact = _streams(doc["hta_us"]), _streams(doc["hta_exact_us"])
    rules, causes = _gapscope(doc)
    lines = ["| | host wait | kernel wait | other |", "| --- | --- | --- | --- |"]
    for label, d in (("HTA, as shipped (rounded to whole µs)", shipped),
                     ("HTA, `HTA_DISABLE_NS_ROUNDING=1`", exact), ("gapscope, HTA's rules", rules)):
        lines.append(f"| {label} | {d['host_wait']:.1f} | {d['kernel_wait']:.1f} | "
                     f"{d['other']:.1f} |")
    lines.append(f"| gapscope, by cause | sync {causes['sync']:.1f} + host {causes['host']:.1f} = "
                 f"{causes['sync'] + causes['host']:.1f} | queued {causes['queued']:.1f} | "
                 f"unknown {causes['unknown']:.1f} |")
    run_dir = root / KINETO_RUN
    nsys, run = _analysis(root, KINETO_RUN)
    (kineto,) = analyze(load_trace(run_dir / "kineto.json.gz"))[:1]
    both = nsys.steps.merge(kineto.steps, on="step", suffixes=("_n", "_k"))
    same = int(((both["ops_n"] == both["ops_k"])
                & (both["op_records_n"] == both["op_records_k"])).sum())
    busy = (both["busy_ns_k"].astype(float) / both["busy_ns_n"].astype(float) - 1).abs().max()
    traced, bench = run.traced_ms_per_step(), run.untraced_ms_per_step()
    k_ms = run.info["kineto"]["timing"]["ms_per_step"]
    twin = nsys.summary["untraced"]["period_ns_median"] / 1e6
    f = floor(root, "eager")
    hta_idle = sum(shipped.values()) / sum(exact.values()) - 1
    host_wait = shipped["host_wait"] - exact["host_wait"]

    def vs(x: float, y: float) -> str:
        return between(x / y, f, f"{pct(x / y - 1, 0, sign=True)}")

    text = (
        f"HTA's host wait is gapscope's `sync` + `host` ({abs(exact['host_wait'] - causes['sync'] - causes['host']):.1f} µs "  # noqa: E501
        "apart: the gaps at the window's edges, which HTA counts over the whole trace), and "
        "its kernel wait is gapscope's `queued`; what HTA cannot say is that "
        f"{causes['sync'] / 1e3:.1f} ms of the host wait is the `.item()` sync and "
        f"{causes['host'] / 1e3:.1f} ms the host launching "
        f"{nsys.steps['op_records'].median():.0f} op records a step. Rounded, HTA reports "
        f"{pct(hta_idle)} more idle than unrounded ({host_wait:.1f} µs more host wait). The "
        f"nsys capture of the same loop (`{KINETO_RUN}`, another process) sees the same "
        f"launches and op records as the Kineto capture in {same} of {len(both)} steps and "
        f"each step's busy time within {pct(busy)} (`python -m scripts.kineto_crosscheck "
        f"{KINETO_RUN}`), with a window {pct(nsys.summary['window_ns'] / kineto.summary['window_ns'] - 1, 0)} "  # noqa: E501
        f"longer. Each in a process of its own ({BETWEEN_PROCESSES}): nsys's window ran "
        f"{traced:.2f} ms/step, "
        f"torch.profiler's {k_ms:.2f}, the untraced bench {bench:.2f} and the untraced twin's "
        f"median GPU period {twin:.2f} ms: nsys {vs(traced, bench)} over the bench and "
        f"{vs(traced, twin)} over the twin, torch.profiler {vs(k_ms, bench)} and "
        f"{vs(k_ms, twin)}")
    text += (f" ({floor_note([f])})." if "within noise" in text else ".")
    return "\n".join(lines) + "\n\n" + text
