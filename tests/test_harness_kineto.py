"""--kineto's options, answered before torch loads (the capture itself runs in test_scripts'
profile.sh --kineto fixture, on the CPU)."""

import subprocess
import sys

from test_scripts import CPU_RUN, ROOT


def harness(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_kineto_needs_a_json_name_and_a_directory(tmp_path):
    bad_name = tmp_path / "trace.txt"
    proc = harness("run", "--variant", "static", "--out", tmp_path, "--kineto", bad_name, *CPU_RUN)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        f"gapscope: error: --kineto {bad_name}: the trace's name must end in .json or .json.gz"]
    nowhere = tmp_path / "no" / "k.json"
    proc = harness("run", "--variant", "static", "--out", tmp_path, "--kineto", nowhere, *CPU_RUN)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        f"gapscope: error: --kineto {nowhere}: no directory {tmp_path / 'no'}"]
