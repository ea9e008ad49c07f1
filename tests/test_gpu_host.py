"""The host table on a GPU (`make test-gpu`, a real nsys): `gapscope profile` of a sampled
generate() on a Llama shape names generate()'s code (docs/METRICS.md, "Host time"), traced and in
its untraced twin, and the bound of its forward as one CUDA graph."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_scripts import real_nsys_env, run_dirs

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
NAMES = ("LlamaForCausalLM.forward", "LlamaModel.forward", "GenerationMixin._sample",
         "TopKLogitsWarper.__call__", "TopPLogitsWarper.__call__",
         "TemperatureLogitsWarper.__call__", "RepetitionPenaltyLogitsProcessor.__call__",
         "torch.multinomial", "prepare_inputs_for_generation")


@pytest.mark.gpu
def test_the_host_table_names_generate_code_traced_and_untraced(tmp_path):
    env = real_nsys_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [PY, "-m", "analysis.cli", "profile", "--range", "all", "--twin-runs", "1", "--", PY,
         str(ROOT / "examples" / "generate.py"), "--model", "llama", "--cache", "dynamic",
         "--sample", "--batch", "2", "--new-tokens", "24", "--warmup", "0"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run,) = run_dirs(tmp_path)
    out = subprocess.run([PY, "-m", "analysis.cli", "analyze", str(run), "--format", "json"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    h = json.loads(out.stdout)["summary"]["host"]
    rows = {r["name"]: r for r in h["rows"]}
    for name in NAMES:
        assert any(n.endswith(name) for n in rows), (name, sorted(rows))
    assert h["named_share"] >= 0.9 and h["named_share_min"] >= 0.9, h
    forward = next(r for n, r in rows.items() if n.endswith("LlamaModel.forward"))
    assert forward["cuda_ns"] > 0 and forward["untraced_ns"] is not None
    assert h["untraced"]["steps"] > 0 and h["bounds"][0]["scenario"] == "forward as one CUDA graph"
