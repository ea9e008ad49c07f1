"""`gapscope profile` with no flags on the un-annotated programs of issue 27, with a real nsys on a
GPU (`make test-gpu`; scripts/user-programs.sh makes the committed captures of the same): the
steps found, and an untraced twin of the same steps beside them, for a program that opens its own
profiler window, an eager loop without a KV cache (a step a forward) and a compiled
graph-per-token loop (steps inferred at each replay; the twin marks each replay)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_scripts import real_nsys_env, run_dirs

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TINY = ["--size", "tiny"]


def profile(tmp_path: Path, *program: str) -> tuple:
    env = real_nsys_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run([PY, "-m", "analysis.cli", "profile", "--twin-runs", "2", "--", PY,
                             *program], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run,) = run_dirs(tmp_path)
    record = json.loads((run / "run.json").read_text())
    out = subprocess.run([PY, "-m", "analysis.cli", "analyze", str(run), "--format", "json"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return record, json.loads(out.stdout)["summary"], result


@pytest.mark.gpu
def test_the_programs_own_window_gets_its_steps_and_their_twin(tmp_path):
    record, summary, _ = profile(tmp_path, "examples/window_generate.py", *TINY,
                                 "--new-tokens", "12")
    assert record["capture"]["range"] == "cudaProfilerApi"  # its window, no second capture
    assert (record["analysis"]["steps_from"], record["captured"]["steps"]) == ("function", 12)
    assert record["hook"]["twin"]["written"] is True
    # Of the two twin runs the second also timed the host table's code: the first's steps alone.
    assert (summary["untraced"]["runs"], summary["untraced"]["steps"]) == (1, 12)


@pytest.mark.gpu
def test_a_loop_without_a_kv_cache_gets_a_step_a_forward_and_its_twin(tmp_path):
    """Its forwards are transformers' (traced in every capture): a step each, as on the H200
    (docs/user-programs-20261202); the same loop with no NVTX at all has its steps inferred
    (tests/test_h200_user_programs.py, the plain capture)."""
    record, summary, result = profile(tmp_path, "examples/nokv_loop.py", *TINY,
                                      "--new-tokens", "24")
    assert (summary["steps_from"], record["captured"]["steps"]) == ("function", 24)
    assert summary["untraced"]["runs"] == 1 and summary["untraced"]["steps"] == 24
    assert "  untraced       " in result.stdout


@pytest.mark.gpu
def test_a_compiled_graph_loop_gets_a_step_a_call_of_its_compiled_function_and_a_twin(tmp_path):
    """The loop compiles toy_lm.decode_one_token itself (one CUDA graph a token): the hook
    names the compiled function's calls (its range around the compiled callable), one a step of
    the steps inferred at each replay, so they are the steps and the twin marks them."""
    record, summary, result = profile(tmp_path, "examples/decode_loop.py", "--compile", "--tiny",
                                      "--new-tokens", "16")
    assert (summary["steps_from"], summary["step_functions"]) == (
        "function", ["toy_lm.decode_one_token"])
    assert record["analysis"]["step_functions"] == ["toy_lm:decode_one_token"]
    assert "gapscope: steps: the calls of toy_lm:decode_one_token" in result.stderr
    assert record["hook"]["twin"]["written"] is True
    assert summary["untraced"]["runs"] == 1 and summary["untraced"]["steps"] > 0
