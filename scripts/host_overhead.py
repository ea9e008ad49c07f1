"""What naming a function costs a call, for the host table's means (docs/PROFILING.md): a call of
a trivial function bare, through the hook's wrapper (traced: an NVTX push and pop; untraced: its
host clock), and through nsys's own function-trace wrapper where nsys runs it.

    python3 -m scripts.host_overhead --mode bare|ranges|clock [--calls N] [--json OUT]
    python3 -m scripts.host_overhead --mode main-ranges|main-clock    # the script's own (3.12+)
    nsys profile --trace=nvtx python3 -m scripts.host_overhead --mode ranges      # under nsys
    nsys profile --trace=nvtx --python-functions-trace=F.json \\
        python3 -m scripts.host_overhead --mode nsys                              # nsys's own

`main-ranges` and `main-clock` time `target` as a function of the script itself (`__main__`),
which the hook names through sys.monitoring (gapscope_hook/main_code.py) instead of a wrapper.
Prints one JSON line: the mode, the calls, ns a call (the median of 5 rounds) and the rounds.
Needs torch for the NVTX calls (`ranges`, `main-ranges`); the rest is the standard library.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "harness" / "inject"))

ROUNDS = 5


def target(x):
    return x + 1


def timed(fn, calls: int) -> list:
    out = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter_ns()
        for i in range(calls):
            fn(i)
        out.append((time.perf_counter_ns() - t0) / calls)
    return out


def main_watched(mode: str):
    """`__main__`, its functions named through sys.monitoring as the hook names a script's."""
    from gapscope_hook import host_times, main_code

    if mode == "main-clock":
        clock = host_times.HostClock()
        host_times.use(clock)
        clock.step_begin()
        enter, leave = clock.enter, clock.exit
    else:
        import torch  # noqa: F401  (the hook's NVTX calls are torch's)

        enter, leave = main_code.lazy_nvtx()
    why = main_code.watch(main_code.MainCalls(enter, leave))
    if why is not None:
        raise SystemExit(f"host_overhead: {why}")
    return sys.modules["__main__"]


def main(argv: list) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["bare", "ranges", "clock", "nsys", "main-ranges",
                                      "main-clock"], required=True)
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    # The module by its name, not __main__: nsys's function trace wraps `target` when
    # `scripts.host_overhead` is imported (it cannot wrap __main__'s).
    import importlib

    module = importlib.import_module("scripts.host_overhead")
    if args.mode in ("ranges", "clock"):
        import torch  # noqa: F401  (the hook's NVTX calls are torch's)
        from gapscope_hook import host_times

        if args.mode == "clock":
            clock = host_times.HostClock()
            host_times.use(clock)
            clock.step_begin()
        assert host_times.wrap_host_function(module, "target")
    if args.mode.startswith("main-"):
        module = main_watched(args.mode)
    # "nsys": nsys wrapped `target` at import (--python-functions-trace), or nothing did.
    rounds = timed(module.target, args.calls)
    line = json.dumps({"mode": args.mode, "calls": args.calls,
                       "ns_per_call": statistics.median(rounds), "rounds": rounds})
    print(line)
    if args.json:
        with open(args.json, "a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
