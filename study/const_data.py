"""The constants of tests/data/README.md, scripts/README.md and the device runs' READMEs under
docs/ (doc_constants.py)."""

from .const_kinds import CONTRACT, FIXTURE, MATH, OPTION, SPEC, TOOL, VERSION, pinned

USER_TEST = "tests/test_analysis_user_captures.py"

CONSTANTS = {
    "tests/data/README.md": [
        ("GPT-2 124M fp32 eager, HF StaticCache, batch 16, steps 31–50", SPEC + "; the batch in "
         "its name (bs16), its twenty steps asserted by tests/test_analysis_captures.py",
         pinned("tests/test_analysis_captures.py", 'assert s["steps"] == 20')),
        ("with Debian's nsys 2024.2", VERSION + " (the oldest it takes; Debian's, the host's)",
         pinned("analysis/capture/nsys.py", 'DEFAULT_MIN_VERSION = "2024.2"')),
        ("2024.2 names the ranges `Step 31` (2025.3 writes `:Step 31`", TOOL + " (the expected "
         "CSVs' test says so)", pinned("tests/test_analysis_captures.py",
                                       "domain first; 2024.2, which made these, `Step N`")),
        ("with correlation id 0 (no launch call named)", TOOL + " (how nsys records a WHILE "
         "body's nodes)", pinned("analysis/measures/infer_loop.py", "correlation id 0")),
        ("busy within 5%", OPTION + " (scripts/kineto_crosscheck.py --busy-tolerance)",
         pinned("scripts/kineto_crosscheck.py", "[--busy-tolerance 0.05]")),
        ("200 ranges (a prefill", FIXTURE, pinned(USER_TEST, '"gen-static-fn": (FORWARD, 200,')),
        ("(graph launches (exec 5, exec 8))", FIXTURE,
         pinned(USER_TEST, '"graph launches (exec 5, exec 8)"')),
        ("eager: 100 forward ranges", FIXTURE,
         pinned(USER_TEST, '"gen-dynamic-fn": (FORWARD, 100,')),
        ("`toy_lm.decode_one_token` (99 ranges)", FIXTURE,
         pinned(USER_TEST, '(r"toy_lm\\.decode_one_token$", 99,')),
        ("(118 ranges, numbers shared)", FIXTURE, pinned(USER_TEST, '== ("nvtx", 2, 118)')),
        ("left 389 NVTX", FIXTURE, pinned("tests/test_syncs.py", "len(marks) == 389")),
    ],
    "scripts/README.md": [
        ("rank 0's run.json", OPTION + " (profile-tp.sh keeps the first rank's record)",
         pinned("scripts/profile-tp.sh", "rank 0's record")),
        ("busy (within 5%)", OPTION + " (scripts/kineto_crosscheck.py --busy-tolerance)",
         pinned("scripts/kineto_crosscheck.py", "[--busy-tolerance 0.05]")),
        ("min-max and 95% CI", OPTION + " (harness/processes.py's bootstrap)",
         pinned("harness/processes.py", "[2.5, 97.5]")),
        ("at most 8 files", OPTION, pinned("scripts/host_batch.sh", "at most 8 files")),
        ("at batch 1/8/32", OPTION + " (the batches it runs)",
         pinned("scripts/hardware-view.sh", "for batch in 1 8 32")),
        ("(two runs in one second) gets `-2`, `-3`…", MATH + ": the suffixes new_run_dir adds",
         pinned("scripts/lib.sh", "NAME-2, NAME-3")),
        ("(default 5; 0 skips it)", OPTION + " (profile.sh)",
         pinned("scripts/profile.sh", "repeats=${GAPSCOPE_UNTRACED_REPEATS:-5}")),
        ("(default 2024.2)", VERSION, pinned("analysis/capture/nsys.py",
                                             'DEFAULT_MIN_VERSION = "2024.2"')),
        ("0 done; 2 bad usage", CONTRACT),
        ("(nsys passes it on: 2 is a bad harness option); 1 for", CONTRACT),
    ],
}
