"""How long gapscope takes to answer, from the first keystroke: `gapscope --help`, `--version` and
`analyze` of a small real capture, each in a fresh process, as a user's shell starts them.

    python -m study.startup [--runs 7]

PYTHONDONTWRITEBYTECODE=1 is set for every run (this machine and CI set it): nothing the
commands compile is kept, so the figures are those of the installed bytecode alone (the Makefile
compiles each venv at set-up). The console script next to this Python is run where there is one
(a venv's bin/gapscope), else `python -m analysis.cli`. Prints each command's median against its
target; `study.benchmark` puts the same figures into its --json record.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests/data/h200-eager-static-bs16.sqlite.xz"
# command name -> (its arguments, the target wall time in seconds)
COMMANDS = {
    "gapscope --help": (["--help"], 0.3),
    "gapscope --version": (["--version"], 0.3),
    "gapscope analyze SMALL": (["analyze", str(SMALL)], 0.6),
}


def gapscope() -> list:
    """How a user starts gapscope here: the console script beside this Python, else -m."""
    script = Path(sys.executable).with_name("gapscope")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "analysis.cli"]


def time_once(args: list) -> float:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    t = time.perf_counter()
    subprocess.run([*gapscope(), *args], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def measure(runs: int) -> dict:
    """name -> {"wall_s": [each run], "median_s", "target_s"}, the commands interleaved."""
    walls = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, (args, _) in COMMANDS.items():
            walls[name].append(time_once(args))
    return {name: {"wall_s": w, "median_s": sorted(w)[len(w) // 2],
                   "target_s": COMMANDS[name][1]} for name, w in walls.items()}


def lines(record: dict) -> list:
    return [f"{name:<24} {r['median_s']:.2f} s (median of {len(r['wall_s'])}; "
            f"{min(r['wall_s']):.2f}-{max(r['wall_s']):.2f}), target <= {r['target_s']:.1f} s: "
            + ("met" if r["median_s"] <= r["target_s"] else "NOT met")
            for name, r in record.items()]


@click.command()
@click.option("--runs", default=7, show_default=True, help="Fresh processes a command.")
def main(runs):
    """Times gapscope's start-up with PYTHONDONTWRITEBYTECODE=1, each command in a fresh
    process."""
    load = os.getloadavg()[0]
    record = measure(runs)
    for line in lines(record):
        click.echo(line)
    click.echo(f"load average (1 min) {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the "
               f"end ({os.cpu_count()} cores); ran {' '.join(gapscope())}")


if __name__ == "__main__":
    main()
