"""One word and one colour per quantity, for every table and figure (text, Markdown, PNG,
Perfetto), so that a word in the text is the word in the legend, in the colour of the figure.

A gap's cause (METRICS.md) is named as it is stored: `sync`, `host`, `queued`, `unknown`. The
ledger's three parts are said as what the host was doing, so that `host` names the cause only:

    blocked     idle_blocked_ns     the host sat in a blocking call (a sync) while the GPU idled
    pre-launch  idle_pre_launch_ns  the host was busy elsewhere and had not asked for the next op
    in launch   idle_in_launch_ns   the next op was asked for and had not started

Colours: one set for the GPU's time in every figure, busy and idle by cause (the timeline, the
zoom, the per-step bars, the histogram of where the idle time is); the ledger's parts are words
of the text and Markdown tables only. The twin and the metrics each get a colour no other
quantity has.
"""

from ..measures.gaps import CAUSES

BUSY = "busy"
BUSY_COLOUR = "#2ca02c"
CAUSE_COLOURS = {"sync": "#d62728", "host": "#ff7f0e", "queued": "#9467bd", "unknown": "#7f7f7f"}
assert tuple(CAUSE_COLOURS) == CAUSES

LEDGER_WORDS = {"blocked": "blocked", "pre_launch": "pre-launch", "in_launch": "in launch"}

# The figures of a capture as traced, and of its untraced twin (CUDA events, no profiler).
TRACED = "traced"
TRACED_COLOUR = "#1f77b4"
TRACED_GRAPH_COLOUR = "#aec7e8"  # traced graph by graph (nsys's default for CUDA graphs)
UNTRACED = "untraced"
UNTRACED_COLOUR = "#111111"
NVTX_COLOUR = "#c7c7c7"

METRIC_WORDS = {"sm_active_pct": "SMs active", "dram_read_pct": "DRAM read",
                "dram_write_pct": "DRAM write"}
METRIC_COLOURS = {"sm_active_pct": "#e377c2", "dram_read_pct": "#393b79",
                  "dram_write_pct": "#9c9ede"}
FLOOR = "bandwidth floor"
FLOOR_COLOUR = "#bd9e39"

# The host table's rows (render/plots_host.py): its largest HOST_ROWS_DRAWN rows each in the
# colour of its name (render/mpl.name_colour: the same in every figure, whatever its rank), the
# rest of them together, and the time no named code holds. The harness' own ranges have fixed
# colours; any other name one of HOST_ROW_COLOURS by the CRC-32 of its name (two names of one
# figure may share one: the legend names each band, in order). None of them a colour of the
# GPU's time (busy, a cause), the twin's or the metrics'.
HOST_ROWS_DRAWN = 8
HOST_FIXED_COLOURS = {"Model Forward": "#17becf", "Check Stop Condition": "#8c564b",
                      "Step N": "#e7cb94"}
HOST_ROW_COLOURS = ("#9edae5", "#bcbd22", "#dbdb8d", "#c49c94", "#637939", "#843c39",
                    "#7b4173", "#f7b6d2", "#8ca252", "#5254a3", "#de9ed6", "#b5cf6b")
HOST_REST_COLOUR = "#d9d9d9"
HOST_OTHER_COLOUR = "#525252"
