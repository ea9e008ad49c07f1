"""A comparison of runs, as one object: what `gapscope compare` and `report` print.

    c = analysis.compare(analysis.open(a)[:1] + analysis.open(b)[:1])
    c.table          # one row a traced run: medians, 95% CIs, vs the first, idle by cause ...
    c.between_runs   # one row a configuration run several times, else None
    c.hardware       # one row a run with GPU metrics, else None
    c.order_flips    # pairs the traced and the untraced figure order differently
    print(c.to_text())
"""

from dataclasses import dataclass

import pandas as pd

from ..measures import compare as measures
from ..render import compare as render
from ..render import hardware as hardware_mod
from ..render import host_compare
from ..render.report import records


@dataclass(frozen=True, eq=False)
class Comparison:
    """Runs side by side, the first the baseline (docs/METRICS.md, "Comparing runs").

    labels:       each run's label, in order (the runs with GPU metrics alone too)
    analyses:     each run's Analysis (one device a run)
    table:        one row a traced run (None when none is): label, device, steps, steps_from,
                  threads, period_ns_median, step_cpu_ns_median, bubble_ns_median and for each
                  `_ci`, `_vs_first_ci`, `_within_noise`; busy_share_of_window, bubble_ns_p90,
                  sync_idle_share_of_window, idle_<cause>_ns and _ns_per_step,
                  traced_/untraced_ms_per_step,
                  profiler_overhead, untraced_* (the twin's), traced_rank, untraced_rank,
                  work (what differs in the step computed: `batch=32`; None where nothing)
    between_runs: one row a configuration with several runs: label, runs, period_ns_median,
                  period_ns_ci, untraced_ms_per_step_median, vs_first_ci, within_noise; or None
    hardware:     one row a run with GPU metrics: label, steps, untraced_ms_per_step,
                  speed_vs_first, floor_ms_per_step, floor_pct, sm_active_pct, dram_read_pct,
                  dram_read_gbps, gr_active_pct, tensor_active_pct ...; or None
    host:         the host tables side by side: one line a figure or row of named code, one
                  column a run (render/host_compare.py); or None
    """

    labels: list
    analyses: list
    table: pd.DataFrame | None
    between_runs: pd.DataFrame | None
    hardware: pd.DataFrame | None
    host: pd.DataFrame | None = None
    # How the baseline (the first run) was chosen, said under the table.
    baseline_rule: str = "the first run"

    @property
    def order_flips(self) -> list:
        """One line per pair of runs the traced and untraced figures order differently."""
        return [] if self.table is None else render.order_flips(self.table)

    def to_text(self, wide: bool = False) -> str:
        """The tables there are, a blank line between them, in 100 columns (`wide`: the runs
        in one table however wide); one row a run from ROWS_FROM runs on."""
        texts = []
        if self.table is not None and len(self.table) >= render.ROWS_FROM and not wide:
            texts.append(render.to_text_rows(self.table, self.baseline_rule))
        elif self.table is not None:
            texts.append(render.to_text(self.table, width=None if wide else render.TEXT_WIDTH,
                                        rule=self.baseline_rule))
        return self._join(texts, hardware_mod.to_text, host_compare.to_text)

    def to_markdown(self) -> str:
        texts = [] if self.table is None else [
            render.to_markdown(self.table, rule=self.baseline_rule).rstrip("\n")]
        return self._join(texts, hardware_mod.to_markdown, host_compare.to_markdown)

    def _join(self, texts: list, hardware, host) -> str:
        if self.between_runs is not None:
            texts.append(render.between_runs_text(self.between_runs))
        if self.host is not None:
            texts.append(host(self.host))
        if self.hardware is not None:
            texts.append(hardware(self.hardware).rstrip("\n"))
        return "\n\n".join(texts)

    def to_csv(self) -> str:
        """`gapscope compare --format csv`: one row a traced run, the table's every column
        (intervals as two columns, `_lo` and `_hi`); empty where no run is traced."""
        if self.table is None:
            return ""
        return render.csv_table(self.table)

    def to_records(self):
        """JSON-ready: the runs' records; an object with `runs` and `between_runs`/`hardware`
        when either is (`gapscope compare --format json`)."""
        out = [] if self.table is None else records(self.table)
        if self.between_runs is None and self.hardware is None:
            return out
        out = {"runs": out}
        if self.between_runs is not None:
            out["between_runs"] = records(self.between_runs)
        if self.hardware is not None:
            out["hardware"] = records(self.hardware)
        return out


def comparison(labels: list, analyses: list, spread: bool = True,
               baseline_rule: str = "the first run") -> Comparison:
    """The Comparison of one Analysis a run (each with its run), labelled. Captures of GPU
    metrics alone have no gaps: they go to the hardware table only. `spread`: also the spread
    between runs of one configuration (compare has it, report not)."""
    runs = [a.run for a in analyses]
    hardware = (hardware_mod.hardware_table(labels, analyses, runs)
                if hardware_mod.has_metrics(analyses) else None)
    kept = [i for i, a in enumerate(analyses) if a.traced]
    table = between = None
    if kept:
        picked = [analyses[i] for i in kept]
        table = measures.compare([labels[i] for i in kept], picked, [runs[i] for i in kept])
        between = measures.between_runs(picked, [runs[i] for i in kept]) if spread else None
    host = (host_compare.host_comparison([labels[i] for i in kept],
                                         [analyses[i] for i in kept]) if kept else None)
    return Comparison(list(labels), list(analyses), table, between, hardware, host,
                      baseline_rule)
