"""Start-up: `gapscope --help`, `--version` and `doctor` import no pandas, `ranges` and `analyze`
no matplotlib and no sqlite-utils (only --db needs it), and the command list `--help` shows
without importing the commands is the commands' own."""

import re
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from analysis.cli import LAZY_COMMANDS, main

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "tests/data/h200-eager-static-bs16.sqlite.xz"

# One fresh process: what each step has imported by then.
PROBE = """
import sys
from analysis.cli import LAZY_COMMANDS, main

def heavy():
    return sorted({m.split(".")[0] for m in sys.modules}
                  & {"pandas", "numpy", "matplotlib", "sqlite_utils"})

def run(*args):
    try:
        main(list(args), prog_name="gapscope")
    except SystemExit:
        pass

run("--help"); run("--version")
print("help", heavy(), file=sys.stderr)
main.get_command(None, "doctor")
print("doctor", heavy(), file=sys.stderr)
run("ranges", sys.argv[1])
print("ranges", heavy(), file=sys.stderr)
run("analyze", sys.argv[1])
print("analyze", heavy(), file=sys.stderr)
"""


def test_help_version_and_doctor_import_no_pandas_and_ranges_and_analyze_no_matplotlib():
    done = subprocess.run([sys.executable, "-c", PROBE, str(STATIC)], cwd=ROOT, check=True,
                          capture_output=True, text=True)
    assert done.stdout.startswith("Usage: gapscope [OPTIONS] COMMAND [ARGS]...")
    assert "\ngapscope 0.1.0" in done.stdout
    assert done.stderr.splitlines() == ["help []", "doctor []", "ranges ['numpy', 'pandas']",
                                        "analyze ['numpy', 'pandas']"]


def test_help_lists_each_command_by_the_first_sentence_of_its_own_help():
    ctx = click.Context(main)
    assert sorted(LAZY_COMMANDS) == main.list_commands(ctx)
    for name, (_, summary) in LAZY_COMMANDS.items():
        real = main.get_command(ctx, name)
        for limit in (45, 300):
            assert (click.Command(name, help=summary).get_short_help_str(limit)
                    == real.get_short_help_str(limit)), name
    listed = CliRunner().invoke(main, ["--help"], prog_name="gapscope").output
    rows = listed.split("Commands:\n", 1)[1].splitlines()
    assert [row.split()[0] for row in rows] == sorted(LAZY_COMMANDS)
    assert rows[0].startswith("  analyze  Analyse one TRACE: an nsys .sqlite export (as it is,")
    assert rows[0].endswith("...")


def test_version_is_the_projects():
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(),
                        re.M).group(1)
    result = CliRunner().invoke(main, ["--version"], prog_name="gapscope")
    assert result.exit_code == 0 and result.output.startswith(f"gapscope {version}")
