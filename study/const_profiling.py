"""The constants docs/PROFILING.md holds outside its generated blocks (doc_constants.py)."""

from .const_kinds import COMMAND, CONTRACT, DESIGN, FORMULA, OPTION, TOOL, VERSION, pinned

NSYS_PY = "analysis/capture/nsys.py"
MIN_NSYS = pinned(NSYS_PY, 'DEFAULT_MIN_VERSION = "2024.2"')
MONITORING = pinned("analysis/capture/step_functions.py", "sys.version_info >= (3, 12)")
TWIN_RUNS = pinned("analysis/capture/profile_request.py", "DEFAULT_TWIN_RUNS = 3")

CONSTANTS = {
    "docs/PROFILING.md": [
        ("(FAIL under 1 GiB, WARN under 5 GiB)", OPTION + " (capture/doctor.py)",
         pinned("analysis/capture/doctor.py", "MIN_FREE_BYTES = 1 << 30")),
        ("busy time (within 5%)", OPTION + " (scripts/kineto_crosscheck.py --busy-tolerance)",
         pinned("scripts/kineto_crosscheck.py", "[--busy-tolerance 0.05]")),
        ("RUNS=3                  # three captures of", COMMAND),
        ("at HZ (20000 by default)", OPTION, pinned(NSYS_PY, 'hz: str = "20000"')),
        ("`$GAPSCOPE_METRICS_DEVICE` (0)", OPTION, pinned(NSYS_PY, 'device: str = "0"')),
        ("at batch 1/8/32 and fused", OPTION + " (the batches hardware-view.sh runs)",
         pinned("scripts/hardware-view.sh", "for batch in 1 8 32")),
        ("harness bench`, 5 repeats,", OPTION + " (profile.sh's GAPSCOPE_UNTRACED_REPEATS)",
         pinned("scripts/profile.sh", "repeats=${GAPSCOPE_UNTRACED_REPEATS:-5}")),
        ("3 more times with two CUDA events", OPTION + " (harness bench --timeline-repeats)",
         pinned("harness/cli.py", '"--timeline-repeats", type=int, default=3')),
        ("before step S+1 and", FORMULA),
        ("30:50: steps 31–50 are captured", OPTION + ": `--window`'s default, the steps after "
         "30 up to 50", pinned("harness/cli.py", "profile steps START+1..STOP (30:50)")),
        ("around steps S+1..E", FORMULA),
        ("of over 400 Python", OPTION, pinned("analysis/capture/window_scan.py",
                                              "MAX_FILES = 400")),
        ("the program exited 0", CONTRACT),
        ("`--twin-runs N` (3)", OPTION, TWIN_RUNS),
        ("are profile.sh's: 0 done; 2 bad usage", CONTRACT),
        ("under nsys; 1 for no", CONTRACT),
        ("3.12 or later in the program", VERSION + " (sys.monitoring)", MONITORING),
        ("more times (3) without nsys", OPTION, TWIN_RUNS),
        ("(sys.monitoring: Python 3.12 or later)", VERSION, MONITORING),
        ("Three means were", DESIGN + ": the three bullets below"),
        ("`sys.audit`\", torch 2.13 on the CPU", VERSION + " (the CPU torch the tests run)",
         pinned("Makefile", "TORCH  ?= torch==2.13.0")),
        ("older than 3.12 (no", VERSION, MONITORING),
        ("adds, after step 4, a second", DESIGN + ": the fourth of profile.sh's steps above"),
        ("id 0: no launch call", TOOL + " (how nsys records a WHILE body's nodes)",
         pinned("analysis/measures/infer_loop.py", "correlation id 0")),
        ("accepted is 2024.2", VERSION, MIN_NSYS),
        ("older than 2024.2 |", VERSION, MIN_NSYS),
        ("(or `__main__:f` on Python 3.12+)", VERSION, MONITORING),
        ("in Python 3.12` (exit 2, before nsys)", VERSION, MONITORING),
        ("does all three:", DESIGN + ": the three stages it names"),
    ],
}
