"""The figures README.md and docs/*.md may hold outside a generated block (figures.py): each a
constant of a definition, not a measurement, listed by a phrase of its file that holds it (on
one line) and why it is one. A phrase no longer in its file fails `publish --check`.

Kinds of constant: a threshold or an option's default (the code's: say which), a model's shape
or size from its config, a datasheet's figure, the arithmetic of a definition, a worked example
on a synthetic trace that a test asserts, a count a test asserts of the code. A measured figure
(a time, a share, a count of what a capture holds, a ratio of runs) is never one: it goes in a
generated block (blocks.py), made from the committed file it was measured in.
"""

OPTION = "an option's default or a threshold of the code"
SPEC = "a model's size from its config (harness/model.py), not a measurement"
DESIGN = "a count of the step as written (tests/test_llama_steps.py and the kernels' code)"
EXAMPLE = "a worked example on a synthetic trace, asserted by the test it names"
MATH = "the arithmetic of the definition"
DATASHEET = "NVIDIA's datasheet peak (readers/gpu_metrics.py's table)"
CONFIG = "the configuration the committed capture was made with (its run.json)"

CONSTANTS = {
    "README.md": [
        ("`gpt2` (124M, the default)", SPEC),
        ("(each ~125–150M and", SPEC),
        ("8 ops a layer on GPT-2, 5 on the Llama family", DESIGN),
    ],
    "docs/ANALYSIS.md": [
        ("from 8 runs on.", OPTION + " (sweep.PROGRESS_FROM)"),
        ("(8 ops either side,", OPTION + " (render/plots_timeline.py)"),
        ("at most 15% of a period", OPTION + " (render/plots_timeline.py)"),
        ("(medians with 95% bootstrap intervals, 2000 resamples", OPTION),
        ("- From 8 runs on (a sweep)", OPTION),
        ("medians, 95% CIs, against the", OPTION),
        ("from 200,000 ops on: Robustness", OPTION + " (readers/nsys_ops.py)"),
        ("in chunks of 200,000 rows", OPTION + " (render/records.py)"),
        ("more than 1,000 rows", OPTION + " (store/scratch.py)"),
        ("gets 64 KiB", OPTION + " (store/db.py)"),
        ("from 200,000 ops on, reads", OPTION + " (readers/nsys_ops.py)"),
        ("a chunk of 250,000 rows", OPTION + " (readers/nsys_ops.py)"),
        ("`nsys --version` 60 s", OPTION + ": a timeout"),
        ("`gapscope profile` 1800 s", OPTION + ": a timeout"),
        ("probe capture and export 300 s", OPTION + ": a timeout"),
        ("the metrics listing 60 s", OPTION + ": a timeout"),
        ("`nsys stats` 1800 s", OPTION + ": a timeout"),
        ("a float64 step is 0.25 µs", MATH + ": float64's resolution at 16 digits of µs"),
        ("gaps of 30 µs or more", OPTION + " (HTA's consecutive_kernel_delay default)"),
        ("every op shrinks by up to 2 µs,", MATH + " (HTA's rounding of a start and an end)"),
        ("30 µs), other 0", EXAMPLE + " (tests/test_analysis_kineto.py)"),
        ("every op shrinks by up to 2 µs and", MATH + " (HTA's rounding of a start and an end)"),
        ("float64's 0.25 µs step", MATH + ": float64's resolution at 16 digits of µs"),
    ],
    "docs/METRICS.md": [
        ("it qualifies with at least 3 calls", OPTION + " (measures/step_function.py MIN_CALLS)"),
        ("GRAPH_LAUNCH_NS = 10 µs", OPTION + " (measures/host_bound.py: the bound's graph launch)"),
        ("names for 95% of the ops at least", OPTION + " (measures/infer_loop.py LOOP_AGREEMENT)"),
        ("so it can pass 100%", MATH + ": a read-only GEMV moves half a copy's bytes"),
        ("a gap is known to ±1 µs at each edge, gaps under 1 µs vanish or read 1 µs", MATH
         + " (whole-µs timestamps)"),
        ("lasts 0 or 1 µs: busy, idle and the cause split move by up to about 1 µs per op",
         MATH + " (whole-µs timestamps)"),
        ("90% of its positions (`MIN_AGREEMENT`)", OPTION),
        ("cover 25% of the thread's launches (`MIN_COVER`)", OPTION),
        ("in 80% of", OPTION + " (MIN_BLOCKED_SHARE)"),
        ("longest stretch is 90% (`COVER_SHARE`)", OPTION),
        ("(`ANCHOR_GAIN` 1.5)", OPTION + " (measures/infer.py)"),
        ("is at least 75% (`MIN_ALIKE`)", OPTION + " (measures/infer_anchor.py)"),
        ("each holds 2 launches", OPTION + " (MIN_UNIT)"),
        ("at least 25% of the thread's (`MIN_COVER`)", OPTION),
        ("groupings within 5% of the thread's launches", OPTION + " (TIE_SHARE)"),
        ("of the 24 ops (`CANDIDATE_OPS`)", OPTION + " (measures/infer_anchor.py)"),
        ("(80% of them at least, `MIN_KEYED`)", OPTION + " (measures/twin_keys.py)"),
        ("to one source line (80% of them)", OPTION + " (measures/twin_keys.py MIN_KEYED)"),
        ("runs of 20 and 60 steps compare", "an example of the definition, no measurement"),
        ("95% bootstrap CIs (steps resampled)", OPTION),
        ("traced 8.0 ms", EXAMPLE + " (tests/test_order_flip.py)"),
        ("[7.9, 8.1] against 9.0 [8.9, 9.1], untraced 6.0 (runs 5.9–6.1) against 5.0 (4.9–5.1)",
         EXAMPLE + " (tests/test_order_flip.py)"),
        ("reaching 6.2 ms, within noise", EXAMPLE + " (tests/test_order_flip.py)"),
        ("(GPT-2 124M, fp32, eager, batch 16, steps 31–50 captured", CONFIG),
        ("= % / 100 × the peak", MATH),
        ("(H200 4.8 TB/s, H100 SXM 3.35 TB/s,", DATASHEET),
        ("H100 PCIe 2.0 TB/s, A100 80GB SXM 2.039 TB/s, A100 40GB 1.555 TB/s", DATASHEET),
        ("((heads + 2 × KV heads) × head dim), 5 × hidden", MATH + " (floor_bytes)"),
        ("2 × intermediate", MATH + " (floor_bytes)"),
        ("a device-to-device copy of 1 GiB", OPTION + " (harness/floor.py)"),
        ("the 2.5/97.5", OPTION + " (harness/processes.py)"),
        ("does not hold 95%", MATH + ": the bootstrap's nominal level"),
        ("that reaches 95%; for 4", MATH + " (the sign test's level)"),
        ("at 87.5%; none under 3", MATH + ": 1 − 2/2^4, the sign test's exact level"),
        ("the 95% bootstrap CI over runs", OPTION),
        ("all-reduce at 30 ns", EXAMPLE + " (tests/test_analysis_ranks.py)"),
    ],
    "docs/PROFILING.md": [
        ("3.12 or later in the program", "a Python version: sys.monitoring is new in 3.12"),
        ("on a Python older than 3.12", "a Python version: sys.monitoring is new in 3.12"),
        ("(FAIL under 1 GiB, WARN under 5 GiB)", OPTION + " (capture/doctor.py)"),
        ("busy time (within 5%)", OPTION + " (scripts/kineto_crosscheck.py --busy-tolerance)"),
    ],
    "docs/VARIANTS.md": [
        ("(GPT-2 124M by default", SPEC),
        ("std 0.2, 0.05 for phi", OPTION + " (harness/model.py's tiny initialisation)"),
        ("| 124.4M |", SPEC),
        ("| 124.7M |", SPEC),
        ("| 137.6M |", SPEC),
        ("| 143.5M |", SPEC),
        ("partial rotary 0.5", SPEC),
        ("| 149.6M |", SPEC),
        ("| 1235.8M |", SPEC),
        ("| 8030.3M |", SPEC),
        ("expandable segments: 1.0 when", MATH + ": the share's bounds"),
        ("0.0 when off", MATH + ": the share's bounds"),
        ("the 124M model for 100 steps", SPEC + "; the steps checked by hand once"),
        ("in 13 ops a layer", DESIGN),
        ("a step of 8 ops a layer", DESIGN),
        ("up to 16 rows", OPTION + " (harness/llama_ops.py: the GEMV path's limit)"),
        ("5 L + 3 kernels a step", DESIGN),
        ("8 kernels a layer (101 a step)", DESIGN),
        ("100 new tokens, 3 processes", CONFIG.replace("capture", "peer run") + " (peer.json)"),
        ("5 copies of 1 GiB; 64 MiB on the CPU", OPTION + " (harness/floor.py)"),
    ],
}
