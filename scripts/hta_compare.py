"""HTA's idle-time breakdown and gapscope's idle by cause on one torch.profiler trace, side by side.

    python -m scripts.hta_compare TRACE.json[.gz] [--delay-us 30] [--steps REGEX] [--json OUT]

Needs HolisticTraceAnalysis (`pip install holistictraceanalysis`, or `pip install -e .[compare]`);
the analysis never imports it. Three tables (docs/ANALYSIS.md, "gapscope and HTA"):
  1. HTA as its users get it: per stream, the whole trace, µs, its ns timestamps rounded to whole
     µs (start up, end down), and again with that rounding off (HTA_DISABLE_NS_ROUNDING=1);
  2. gapscope: the device's gaps inside the step window, by cause and by ledger part;
  3. gapscope's own gaps classed by HTA's rules (host_wait: the next op's launch call starts
     after the gap opens; kernel_wait: else, a gap under --delay-us; other: the rest), so a
     difference of rules shows apart from a difference of scope.
"""

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from analysis.errors import TraceError
from analysis.measures.steps import DEFAULT_STEP_PATTERN
from analysis.measures.summary import Options, analyze
from analysis.readers import load_trace

HTA_CATEGORIES = ("host_wait", "kernel_wait", "other")
HTA_DEFAULT_DELAY_US = 30  # TraceAnalysis.get_idle_time_breakdown's consecutive_kernel_delay


def hta_rules(gaps, delay_ns: float) -> dict:
    """gapscope's gaps (one device) in HTA's categories, ns: HTA's test is on the launch call's
    start against the previous op's end (`ts_runtime > prev_end_ts`), then the gap's length."""
    a = gaps["start_ns"].to_numpy()
    launch = gaps["launch_start_ns"].to_numpy()
    length = gaps["gap_ns"].to_numpy()
    host = (launch >= 0) & (launch > a)
    kernel = ~host & (length < delay_ns)
    return {"host_wait": int(length[host].sum()), "kernel_wait": int(length[kernel].sum()),
            "other": int(length[~host & ~kernel].sum())}


def run_hta(trace: Path, delay_us: float, rounding: bool) -> dict:
    """HTA's breakdown: {stream: {category: idle µs}}."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "0" if rounding else "1"
    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)  # its parse-progress lines

    with tempfile.TemporaryDirectory() as tmp:
        # HTA reads every trace of a directory: give it this one alone.
        link = Path(tmp) / ("trace.json.gz" if trace.name.endswith(".gz") else "trace.json")
        link.symlink_to(trace.resolve())
        analysis = TraceAnalysis(trace_dir=tmp)
        rank = analysis.t.get_ranks()[0]
        table, _ = analysis.get_idle_time_breakdown(
            ranks=[rank], visualize=False, consecutive_kernel_delay=delay_us)
    out = {}
    for row in table.to_dict("records"):
        out.setdefault(int(row["stream"]), {})[str(row["idle_category"])] = float(row["idle_time"])
    return out


def gapscope(trace: Path, steps: str) -> list:
    return analyze(load_trace(trace), Options(step_pattern=steps))


def lines(hta: dict, hta_exact: dict, analyses: list, delay_us: float) -> list:
    out = [f"HTA get_idle_time_breakdown (whole trace, per stream, consecutive_kernel_delay "
           f"{delay_us:g} us), us: rounded to whole us / exact ns"]
    out.append(f"  {'stream':>8} " + " ".join(f"{c:>23}" for c in HTA_CATEGORIES))
    for stream in sorted(hta):
        cells = [f"{hta[stream].get(c, 0):>11.1f} / {hta_exact.get(stream, {}).get(c, 0):>9.1f}"
                 for c in HTA_CATEGORIES]
        out.append(f"  {stream:>8} " + " ".join(cells))
    for a in analyses:
        s = a.summary
        idle = s["idle_ns"]
        out.append(f"gapscope device {a.device} (steps {s['steps']}, window "
                   f"{s['window_ns'] / 1e3:.1f} us, idle {idle / 1e3:.1f} us in {s['gaps']} gaps)")
        cause = s["idle_ns_by_cause"]
        out.append("  by cause   " + "  ".join(
            f"{c} {cause[c] / 1e3:.1f} us ({cause[c] / idle:.1%})" if idle else f"{c} 0"
            for c in cause))
        ledger = s["idle_ledger"]
        out.append("  ledger     " + "  ".join(
            f"{k} {v / 1e3:.1f} us" for k, v in ledger.items()))
        rules = hta_rules(a.gaps, delay_us * 1e3)
        out.append("  HTA rules  " + "  ".join(
            f"{c} {rules[c] / 1e3:.1f} us" for c in HTA_CATEGORIES))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", type=Path)
    p.add_argument("--delay-us", type=float, default=HTA_DEFAULT_DELAY_US,
                   help="HTA's consecutive_kernel_delay, in the trace's unit (us)")
    p.add_argument("--steps", default=DEFAULT_STEP_PATTERN, help="gapscope's step pattern")
    p.add_argument("--json", type=Path, default=None, help="also write every number here")
    args = p.parse_args(argv)
    try:
        analyses = gapscope(args.trace, args.steps)
    except TraceError as e:
        sys.stderr.write(f"hta_compare: error: {e}\n")
        return 2
    try:
        hta = run_hta(args.trace, args.delay_us, rounding=True)
        hta_exact = run_hta(args.trace, args.delay_us, rounding=False)
    except ImportError:
        sys.stderr.write("hta_compare: error: HolisticTraceAnalysis is not installed: "
                         "pip install holistictraceanalysis\n")
        return 2
    print("\n".join(lines(hta, hta_exact, analyses, args.delay_us)))
    if args.json is not None:
        doc = {"hta_us": hta, "hta_exact_us": hta_exact, "delay_us": args.delay_us,
               "gapscope": {str(a.device): {
                   "idle_ns_by_cause": a.summary["idle_ns_by_cause"],
                   "idle_ledger": a.summary["idle_ledger"], "window_ns": a.summary["window_ns"],
                   "idle_ns": a.summary["idle_ns"],
                   "hta_rules_ns": hta_rules(a.gaps, args.delay_us * 1e3)} for a in analyses}}
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
