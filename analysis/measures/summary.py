"""The whole analysis of one trace, device by device (METRICS.md), and its summary numbers."""

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..measures.analysis import METRICS, Analysis
from ..measures.calls import call_name, call_ranges, calls_summary, step_calls
from ..measures.draft import draft_named, draft_summary, speculative_steps, tokens_summary
from ..measures.gaps import (
    CAUSES,
    LEDGER,
    LEDGER_COLUMNS,
    find_gaps,
    gaps_by_step,
    split_gaps,
)
from ..measures.gpu_metrics import with_step_metrics
from ..measures.host_steps import host_analysis
from ..measures.infer_loop import with_loop_launches
from ..measures.intervals import Coverage
from ..measures.stats import median, p90
from ..measures.steps import (
    DEFAULT_CHECK_PATTERN,
    DEFAULT_STEP_PATTERN,
    all_thread_labels,
    assign_steps,
    compile_pattern,
    host_steps,
    match_ranges,
    step_ranges,
    step_table,
)
from ..measures.streams import check_cover, stream_table, window_busy_ns
from ..measures.syncs import sync_table
from ..readers.trace import GRAPH, OP_KIND_NAMES, Trace, op_names


@dataclass(frozen=True)
class Options:
    """What to analyse: the NVTX patterns for steps and stop checks, and which device."""

    step_pattern: str = DEFAULT_STEP_PATTERN
    check_pattern: str = DEFAULT_CHECK_PATTERN
    device: int | None = None


def by_thread(steps: pd.DataFrame) -> pd.DataFrame:
    """Per thread (where several threads have steps): steps, median period and bubble, in
    order of the thread's first step."""
    if "thread" not in steps.columns or steps["thread"].nunique() < 2:
        return pd.DataFrame()
    grouped = steps.groupby("thread", sort=False)
    return pd.DataFrame({
        "steps": grouped.size(),
        "period_ns_median": grouped["period_ns"].agg(median),
        "bubble_ns_median": grouped["bubble_ns"].agg(median),
    })


def analyze(trace: Trace, options: Options = Options()) -> list:
    """One Analysis per device that ran ops of the steps (or the one asked for)."""
    steps, origin = speculative_steps(trace, *step_ranges(trace, options.step_pattern))
    checks = match_ranges(trace.ranges, compile_pattern(options.check_pattern, "--check"))
    ops = with_loop_launches(trace.ops.assign(step=assign_steps(trace.ops, steps)), steps)
    devices = sorted(int(d) for d in ops.loc[ops["step"] >= 0, "device"].unique())
    if not devices:
        raise TraceError(
            f"{trace.path}: no GPU op was launched inside a step range "
            f"({len(steps)} steps match '{options.step_pattern}'); check the steps pattern "
            "(--steps / steps=)"
        )
    if options.device is not None:
        if options.device not in devices:
            raise TraceError(f"device {options.device} (--device / device=): the steps ran "
                             f"on devices {devices}")
        devices = [options.device]
    origin = origin | {"check_pattern": options.check_pattern, "checks": len(checks)}
    return [
        analyze_device(d, _device_ops(ops, d), steps, checks, trace, origin)
        for d in devices
    ]


def _device_ops(ops: pd.DataFrame, device: int) -> pd.DataFrame:
    mine = ops["device"].to_numpy() == device
    return ops if mine.all() else ops[mine].reset_index(drop=True)


def analyze_device(device: int, ops: pd.DataFrame, steps: pd.DataFrame, checks: pd.DataFrame,
                   trace: Trace, origin: dict) -> Analysis:
    """One device's analysis; `origin`: where the steps came from (steps.step_ranges)."""
    busy = Coverage(ops["start"].to_numpy(), ops["end"].to_numpy())
    table = step_table(steps, ops, busy)
    on_device = steps[table["op_records"].to_numpy() > 0]
    table = table[table["op_records"] > 0].reset_index(drop=True)
    window = (int(table["gpu_start_ns"].min()), int(table["gpu_end_ns"].max()))
    gaps = split_gaps(find_gaps(ops, window), trace.blocking)
    position = gaps_by_step(gaps, table, dict(zip(steps["tid"], steps["thread"], strict=True)))
    table = with_idle_by_step(table, gaps, position)
    labels = all_thread_labels(steps, np.concatenate([ops["tid"].to_numpy(), gaps["tid"]]),
                               trace.thread_names)
    gaps = gap_table(gaps, table["step"].to_numpy()[position], trace.strings, labels)
    table = with_idle_by_cause(table, gaps, position)
    per_stream, pairs, concurrent = stream_table(ops, window)
    cover = check_cover(checks, busy, window)
    summary = summarize(device, table, gaps, window, window_busy_ns(ops, window), concurrent,
                        cover, ops, origin)
    summary |= tokens_summary(table)
    summary |= graph_trace(ops[ops["step"].to_numpy() >= 0], trace.graph_launches)
    ranges = call_ranges(trace.ranges)
    calls = calls_summary(table, ranges, step_calls(ranges, table["cpu_start_ns"].to_numpy(),
                                                    on_device["tid"].to_numpy()),
                          call_name(ranges))
    if calls:
        summary["calls"] = calls
    table, summary["gpu_metrics"] = with_step_metrics(
        table, trace.gpu_metrics, device, "gpu_start_ns", "gpu_end_ns", window,
        _peak(trace, device), "gpu span")
    syncs = sync_table(trace.blocking, trace.marks, on_device, gaps, window)
    draft = origin.get("draft")
    # The draft's forwards are a host row of their own (draft.DRAFT_ROW).
    host_trace = trace if draft is None else replace(
        trace, ranges=draft_named(trace.ranges, draft["ranges"]))
    host_steps, host_rows, summary["host"] = host_analysis(host_trace, steps, on_device.index,
                                                           ops, origin)
    if draft is not None:
        summary["draft"] = draft_summary(draft, ops, on_device.index, table, summary["host"])
    return Analysis(device, summary, table, gaps=gaps, streams=per_stream, syncs=syncs,
                    pairs=pairs, checks=cover,
                    ops=public_ops(numbered(ops, steps), trace.strings, labels), host=host_rows,
                    host_steps=host_steps)


def numbered(ops: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The ops with `step` the number of the step each belongs to (as in the steps and gaps
    tables, -1 for none), where the analysis counted them by their row in `steps`."""
    row = ops["step"].to_numpy()
    number = steps["index"].to_numpy(dtype=np.int64)
    return ops.assign(step=np.where(row >= 0, number[np.maximum(row, 0)], -1))


# An op's kind as a word (readers.trace's codes: KERNEL ... GRAPH).
KIND_WORDS = {k: v.strip("[]") for k, v in OP_KIND_NAMES.items()}


def public_ops(ops: pd.DataFrame, strings: dict, labels: dict) -> pd.DataFrame:
    """Analysis.ops: each op with its times on the capture's clock (start_ns, end_ns, and its
    launch call's, -1 without one), its name and kind as words (a kernel's name; `[memcpy]`,
    `[memset]`, `[graph]`; kernel, memcpy, memset, graph) beside the raw name_id, its launch
    thread's label beside the raw tid, and its step (-1: no step's)."""
    kind = ops["kind"].to_numpy()
    return pd.DataFrame({
        "start_ns": ops["start"].to_numpy(), "end_ns": ops["end"].to_numpy(),
        "device": ops["device"].to_numpy(), "stream": ops["stream"].to_numpy(),
        "corr": ops["corr"].to_numpy(),
        "kind": pd.Categorical.from_codes(kind, categories=[KIND_WORDS[k] for k in
                                                            sorted(KIND_WORDS)]),
        "name": op_names(kind, ops["name_id"].to_numpy(), strings),
        "name_id": ops["name_id"].to_numpy(),
        "call_start_ns": ops["call_start"].to_numpy(), "call_end_ns": ops["call_end"].to_numpy(),
        "tid": ops["tid"].to_numpy(),
        "thread": ops["tid"].map(labels).to_numpy(dtype=object),
        "step": ops["step"].to_numpy(),
    }, copy=False)


def graph_trace(ops: pd.DataFrame, graph_launches: pd.DataFrame) -> dict:
    """How the steps' CUDA graph work was recorded (METRICS.md, `cuda_graph_trace`): whole
    executions (GRAPH ops), or node by node (other ops launched by a graph launch call, which
    their kernels name through its correlation id)."""
    whole = ops["kind"].to_numpy() == GRAPH
    # Same correlation id and thread as a graph launch call; the ids first, a cheap filter
    # that leaves only a graphed capture's ops to match on both.
    nodes = (np.isin(ops["corr"].to_numpy(), graph_launches["corr"].to_numpy()) & ~whole
             & (ops["tid"].to_numpy() >= 0))
    if nodes.any():
        key = ["tid", "corr"]
        launched = ops.loc[nodes, key].merge(graph_launches[key].drop_duplicates(), how="left",
                                             indicator=True)
        nodes[nodes] = launched["_merge"].to_numpy() == "both"
    kind = {(True, True): "mixed", (True, False): "graph", (False, True): "node",
            (False, False): "none"}[(bool(whole.any()), bool(nodes.any()))]
    return {
        "cuda_graph_trace": kind,
        "graph_executions": int(whole.sum()),
        "graph_execs": int(ops.loc[whole, "name_id"].nunique()),
        "graph_node_ops": int(nodes.sum()),
    }


def gap_table(gaps: dict, step: np.ndarray, strings: dict, labels: dict) -> pd.DataFrame:
    """The gaps as a DataFrame: the step each falls in, the thread that launched the op ending
    it (`tid`, its label `thread`: steps.all_thread_labels), the cause by name, the next op's
    name."""
    out = {"step": step}
    out |= {k: v for k, v in gaps.items() if k not in ("next_kind", "next_name_id", "cause")}
    out["thread"] = pd.Series(gaps["tid"]).map(labels).to_numpy(dtype=object)
    out["cause"] = pd.Categorical.from_codes(gaps["cause"], categories=CAUSES)
    out["next_op"] = op_names(gaps["next_kind"], gaps["next_name_id"], strings)
    # The columns as they are (copy=False: not stacked into one block, 0.2 s a million gaps).
    return pd.DataFrame(out, copy=False)


def with_idle_by_step(table: pd.DataFrame, gaps: dict, position: np.ndarray) -> pd.DataFrame:
    """The table with the gaps inside each step's period (`position`: the table row of each gap),
    by ledger part, as idle_* columns: with the busy time, they fill the period."""
    return table.assign(**{
        column: pd.Series(gaps[column]).groupby(position).sum()
        .reindex(range(len(table)), fill_value=0).to_numpy()
        for column in LEDGER_COLUMNS})


def with_idle_by_cause(table: pd.DataFrame, gaps: pd.DataFrame,
                       position: np.ndarray) -> pd.DataFrame:
    """The table with the gaps inside each step's period by cause, as idle_cause_<cause>_ns
    columns (`position`: the table row of each gap): they fill the period with the busy time,
    as the ledger's parts do, split as the figures and compare split the idle time."""
    codes = gaps["cause"].cat.codes.to_numpy().astype(np.int64)
    sums = np.bincount(position * len(CAUSES) + codes, weights=gaps["gap_ns"].to_numpy(),
                       minlength=len(table) * len(CAUSES)).reshape(len(table), len(CAUSES))
    return table.assign(**{f"idle_cause_{c}_ns": sums[:, i].round().astype(np.int64)
                           for i, c in enumerate(CAUSES)})


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(f"gapscope bug: {what}")


def summarize(device: int, table: pd.DataFrame, gaps: pd.DataFrame, window: tuple, busy_ns: int,
              concurrent: int, cover: pd.DataFrame, ops: pd.DataFrame, origin: dict) -> dict:
    window_ns = window[1] - window[0]
    idle_ns = window_ns - busy_ns
    codes = gaps["cause"].cat.codes.to_numpy()
    gap_ns = gaps["gap_ns"].to_numpy()
    by_cause = {c: int(gap_ns[codes == i].sum()) for i, c in enumerate(CAUSES)}
    ledger = {part: int(gaps[column].sum()) for part, column in zip(LEDGER, LEDGER_COLUMNS,
                                                                     strict=True)}
    _check(int(gaps["gap_ns"].sum()) == idle_ns, "gaps do not add up to the idle time")
    _check(sum(by_cause.values()) == idle_ns, "idle by cause does not add up to the idle time")
    _check(sum(ledger.values()) == idle_ns, "the idle ledger does not add up to the idle time")
    _check(int(table[[f"idle_cause_{c}_ns" for c in CAUSES]].to_numpy().sum()) == idle_ns,
           "the steps' idle by cause does not add up to the idle time")
    _check(bool((gaps[list(LEDGER_COLUMNS)].to_numpy() >= 0).all()), "a negative ledger part")
    _check(not (table["period_ns"].dropna() < 0).any(), "a negative step period")
    return {
        "device": device,
        "steps": len(table),
        "steps_from": origin["steps_from"],
        "step_pattern": origin["step_pattern"],
        "step_numbers": origin["step_numbers"],
        "steps_inferred_by": origin["steps_inferred_by"],
        "step_functions": origin.get("step_functions"),
        "threads": int(table["thread"].nunique()),
        "window_ns": window_ns,
        "busy_ns": busy_ns,
        "idle_ns": idle_ns,
        "busy_share_of_window": busy_ns / window_ns if window_ns else None,
        "step_cpu_ns_median": median(table["cpu_ns"]),
        "period_ns_median": median(table["period_ns"]),
        "busy_ns_median": median(table["busy_ns"]),
        "bubble_ns_median": median(table["bubble_ns"]),
        "bubble_ns_p90": p90(table["bubble_ns"]),
        "intra_idle_ns_median": median(table["intra_idle_ns"]),
        "idle_ns_by_cause": by_cause,
        "idle_ledger": ledger,
        "gaps": len(gaps),
        "concurrent_ns": concurrent,
        "check_pattern": origin.get("check_pattern"),
        "checks": origin.get("checks"),
        "check_cover_median": median(cover["cover"]),
        # Only what the trace shows: the share of the window the GPU sat idle on a sync. Not
        # what hiding the sync would buy (METRICS.md: the untraced bubble and a measured pair).
        "sync_idle_share_of_window": by_cause["sync"] / window_ns if window_ns else None,
        "ops": int(table["ops"].sum()),
        "unattributed_ops": int((ops["step"] < 0).sum()),
        "ops_without_launch_call": int((ops["call_start"] < 0).sum()),
        "streams": int(ops["stream"].nunique()),
    }


def _peak(trace: Trace, device: int) -> tuple:
    return trace.dram_peaks.get(device, (None, "unknown: no peak DRAM bandwidth for the device"))


def analyze_metrics(trace: Trace, options: Options = Options()) -> list:
    """One metrics-only Analysis (kind "metrics": no ops, so no gaps, streams or stop-check
    cover) per device that sampled metrics (or the one asked for). A step is its
    NVTX range on the host clock: nsys samples on the same clock, and without a CUDA trace the
    GPU span of a step is unknown, so the metrics of a step include its launch latency."""
    steps, origin = speculative_steps(trace, *step_ranges(trace, options.step_pattern))
    devices = sorted(int(d) for d in trace.gpu_metrics["device"].unique())
    if options.device is not None:
        if options.device not in devices:
            raise TraceError(f"device {options.device} (--device / device=): GPU metrics "
                             f"were sampled on {devices}")
        devices = [options.device]
    out = []
    for device in devices:
        table = host_steps(steps)
        window = (int(table["cpu_start_ns"].min()), int(table["cpu_end_ns"].max()))
        table, metrics = with_step_metrics(table, trace.gpu_metrics, device, "cpu_start_ns",
                                           "cpu_end_ns", window, _peak(trace, device), "nvtx range")
        if metrics is None:
            raise TraceError(
                f"{trace.path}: device {device} sampled none of the GPU metrics gapscope reads "
                "(GR Active, SMs Active, DRAM Read Bandwidth ...): profile with "
                "`--gpu-metrics-devices=N` and the default metric set"
            )
        summary = {
            "device": device,
            "cuda_trace": False,
            "steps": len(table),
            "steps_from": origin["steps_from"],
            "step_pattern": origin["step_pattern"],
            "step_numbers": origin["step_numbers"],
            "threads": int(table["thread"].nunique()),
            "window_ns": window[1] - window[0],
            "step_cpu_ns_median": median(table["cpu_ns"]),
            "gpu_metrics": metrics,
        }
        out.append(Analysis(device, summary, table, kind=METRICS))
    return out
