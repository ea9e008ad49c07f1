"""The hook on a GPU (`make test-gpu`): torch's sync warnings become marks naming the program's
lines; the twin's CUDA events, eager and under torch.compile(mode="reduce-overhead"); and
`gapscope profile` of an un-annotated generate() loop with a real nsys: the forwards as steps,
the twin, the sync marks in the capture."""

import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_scripts import real_nsys_env, run_dirs

ROOT = Path(__file__).resolve().parent.parent
INJECT = ROOT / "harness" / "inject"
PY = sys.executable
MARK = re.compile(r"^gapscope\.sync (.+):(\d+) (\S+)$")


def run_python(tmp_path: Path, source: str, **env: str) -> subprocess.CompletedProcess:
    program = tmp_path / "prog.py"
    program.write_text(textwrap.dedent(source))
    base = {k: v for k, v in os.environ.items() if not k.startswith("GAPSCOPE_")}
    base["PYTHONPATH"] = os.pathsep.join([str(INJECT), str(tmp_path), str(ROOT)])
    return subprocess.run([PY, str(program)], env=base | env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.gpu
def test_each_sync_becomes_a_mark_naming_the_program_line(tmp_path):
    # .item() and nonzero through torch's sync warning; torch.cuda.synchronize() and
    # Event.synchronize(), which torch does not warn about, through the hook's wrappers.
    result = run_python(tmp_path, """
        import json
        import torch
        marks = []
        torch.cuda.nvtx.mark = marks.append     # what nsys would record
        x = torch.ones(1024, device="cuda")
        v = x.sum().item()                      # the item line
        torch.cuda.synchronize()                # the synchronize line
        y = (x > 0).nonzero()                   # the nonzero line
        event = torch.cuda.Event()
        event.record()
        event.synchronize()                     # the event line
        print(json.dumps(marks))
    """, GAPSCOPE_SYNC_MARKS="1")
    assert result.returncode == 0, result.stderr
    assert "synchronizing" not in result.stderr   # shown as marks, not printed
    program = tmp_path / "prog.py"
    marks = json.loads(result.stdout.splitlines()[-1])
    lines = [line_of(program, f"the {what} line")
             for what in ("item", "synchronize", "nonzero", "event")]
    assert [m for m in marks if m.startswith("gapscope.sync ")] == marks
    seen = [int(MARK.match(m).group(2)) for m in marks]
    assert [n for n in lines if n in seen] == lines and set(seen) <= set(lines)
    assert all(MARK.match(m).group(1) == str(program) for m in marks)


STEPS = """
    import torch
    import steps_mod

    net = steps_mod.Net().cuda()
    step = torch.compile(net, mode="reduce-overhead") if COMPILED else net
    x = torch.randn(8, 256, device="cuda")
    with torch.no_grad():
        for _ in range(12):
            y = step(x)
    torch.cuda.synchronize()
    print("ok", float(y.sum()))
"""
STEPS_MOD = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)])

    def forward(self, x):
        return self.layers(x).relu()
"""


@pytest.mark.gpu
@pytest.mark.parametrize("compiled", [False, True])
def test_the_twin_times_each_call_with_cuda_events(tmp_path, compiled):
    (tmp_path / "steps_mod.py").write_text(STEPS_MOD)
    out = tmp_path / "twin"
    out.mkdir()
    result = run_python(tmp_path, f"COMPILED = {compiled}\n" + textwrap.dedent(STEPS),
                        GAPSCOPE_TWIN_DIR=str(out), GAPSCOPE_STEP_FUNCTIONS="steps_mod:Net.forward")
    assert result.returncode == 0, result.stderr
    (path,) = out.iterdir()
    (run,) = json.loads(path.read_text())["runs"]
    assert run["clock"] == "cuda-events" and run["step"] == list(range(1, 13))
    spans = [e - s for s, e in zip(run["start_ns"], run["end_ns"], strict=True)]
    assert all(s > 0 for s in spans)
    assert all(b >= a for a, b in zip(run["start_ns"], run["start_ns"][1:], strict=False))


GENERATE = """
import torch
import transformers

torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1024,
                                 bos_token_id=1023, eos_token_id=1023)
model = transformers.GPT2LMHeadModel(config).cuda().eval()
prompt = torch.randint(0, 1000, (4, 8), device="cuda")
out = model.generate(prompt, max_new_tokens=20, min_new_tokens=20, do_sample=False,
                     pad_token_id=1023)
print("generated", tuple(out.shape))
"""


@pytest.mark.gpu
def test_profile_of_a_generate_loop_as_it_is(tmp_path):
    env = real_nsys_env(tmp_path)
    # Extended, not replaced: nsys's function trace needs the program's nvtx (carried there).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    (tmp_path / "gen.py").write_text(GENERATE)
    result = subprocess.run([PY, "-m", "analysis.cli", "profile", "--twin-runs", "2", "--",
                             PY, str(tmp_path / "gen.py")], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run,) = run_dirs(tmp_path)
    record = json.loads((run / "run.json").read_text())
    assert record["capture"]["range"] == "all"           # no cudaProfilerStart: all of it
    assert record["analysis"]["steps_from"] == "function"
    assert record["analysis"]["step_functions"] == [
        "transformers.models.gpt2.modeling_gpt2:GPT2LMHeadModel.forward"]
    assert record["captured"]["steps"] == 20              # the prefill and 19 decode forwards
    twin = json.loads((run / "untraced_steps.json").read_text())
    assert [len(r["step"]) for r in twin["runs"]] == [20]  # the second run timed the host table
    assert twin["clock"] == "cuda-events"
    with sqlite3.connect(run / "capture.sqlite") as db:
        marks = [m for (m,) in db.execute(
            "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s "
            "ON s.id = e.textId WHERE e.eventType = 34") if m and m.startswith("gapscope.sync ")]
    assert marks, "no sync marks in the capture"
    for mark in marks:
        found = MARK.match(mark)
        # The first frame outside torch's own package (a venv may itself live under /opt/torch/).
        assert found and Path(found.group(1)).is_file()
        assert "/site-packages/torch/" not in found.group(1)
    assert "untraced" in result.stdout
