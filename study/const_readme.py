"""The constants README.md holds outside its generated blocks (doc_constants.py)."""

from .const_kinds import DESIGN, FORMULA, OPTION, SPEC, VERSION, pinned

CONSTANTS = {
    "README.md": [
        ("Python 3.10+", VERSION, pinned("pyproject.toml", 'requires-python = ">=3.10"')),
        ("CPU torch 2.13.0", VERSION + " (the Makefile's TORCH)",
         pinned("Makefile", "TORCH  ?= torch==2.13.0")),
        ("comparison of seven captures in", OPTION + " (the Makefile's DEMO_TRACES, seven runs)",
         pinned("Makefile", "runs/,static pipelined compiled pipelined-compile graphed-sync "
                            "graphed fused)")),
        ("the seven runs to zoom", OPTION + " (the Makefile's DEMO_TRACES)",
         pinned("Makefile", "runs/,static pipelined compiled pipelined-compile graphed-sync "
                            "graphed fused)")),
        ("runs it 3 more times without nsys", OPTION + " (`--twin-runs`' default)",
         pinned("analysis/capture/profile_request.py", "DEFAULT_TWIN_RUNS = 3")),
        ("three lines of `harness.profiling`", DESIGN + ": the snippet's profiled_steps, "
         "prof.step and prof.check"),
        ("cudaProfilerStart/Stop: steps 31..50", FORMULA + ": window=(30, 50) captures the steps "
         "after 30 up to 50 (harness/profiling.py)"),
        ("on Python 3.12+, the script's own", VERSION + " (sys.monitoring)",
         pinned("analysis/capture/step_functions.py", "sys.version_info >= (3, 12)")),
        ("`gpt2` (124M, the default)", SPEC),
        ("(each ~125–150M and", SPEC),
        ("8 ops a layer on GPT-2, 5 on the Llama family", DESIGN),
    ],
}
