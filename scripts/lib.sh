# Shared helpers for the capture scripts; sourced, never run. Callers set `set -euo pipefail`.
# Finds nsys, checks its version, names run directories, and edits run.json with the stdlib only.
# shellcheck shell=bash

PY=${GAPSCOPE_PYTHON:-python3}

# The checkout these scripts belong to: its analysis answers every question about nsys.
GAPSCOPE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

note() { printf 'gapscope: %s\n' "$*" >&2; }

die() {  # CODE MESSAGE...: the one error style of every gapscope command
  local code=$1
  shift
  note "error: $*"
  exit "$code"
}

# Finding nsys, its version and the capture flags are defined once, in analysis/capture/nsys.py
# (`gapscope profile` and `gapscope doctor` use the same code); it says on stderr which nsys and
# why, and fails with one `gapscope: error:` line and exit 2, as die does.
# GAPSCOPE_NSYS_PLACES (where to look besides PATH) and GAPSCOPE_NSYS_MIN (the oldest nsys taken,
# 2024.2 by default) reach it through the environment.
capture_nsys() {  # COMMAND ARGS...: python -m analysis.capture.nsys, from this checkout
  PYTHONPATH="$GAPSCOPE_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m analysis.capture.nsys "$@"
}
nsys_version() { capture_nsys version "$1"; }  # NSYS: e.g. 2025.3.2.0; fails when it says none
find_nsys() { capture_nsys find; }             # prints the nsys to use: $NSYS, else the newest
# find_nsys, then whether it is new enough, nsys asked its version once: prints its version, then
# its path (a line each); `found=$(usable_nsys) || exit $?`.
usable_nsys() { capture_nsys usable; }
capture_flags() { capture_nsys capture-flags "$@"; }   # TRACE [GRAPH_TRACE [FUNCTIONS_JSON]]
metrics_flags() { capture_nsys metrics-flags "$@"; }   # DEVICE HZ: NVTX and GPU metrics only

wants_cpu() {  # HARNESS_OPTIONS...: true when they ask for --device cpu
  local prev=""
  for arg in "$@"; do
    if [ "$arg" = --device=cpu ] || { [ "$prev" = --device ] && [ "$arg" = cpu ]; }; then
      return 0
    fi
    prev=$arg
  done
  return 1
}

require_gpu() {  # HARNESS_OPTIONS...: dies unless torch sees a CUDA GPU (skipped for --device cpu)
  wants_cpu "$@" && return 0
  local why
  why=$("$PY" -c '
import sys
try:
    import torch
except ImportError:
    sys.exit(f"torch is not installed for {sys.executable}: run make install")
if not torch.cuda.is_available():
    sys.exit(f"no CUDA GPU visible to torch {torch.__version__} (CUDA build: {torch.version.cuda})")
' 2>&1) || die 2 "$why: profile on a machine with an NVIDIA GPU and driver (\`make doctor\` checks it)"
}

utc_stamp() { date -u +%Y%m%dT%H%M%SZ; }

new_run_dir() {  # BASE NAME: creates BASE/NAME, or NAME-2, NAME-3... if taken; prints its path
  local base=$1 name=$2 dir n=1
  mkdir -p "$base"
  dir="$base/$name"
  # mkdir without -p fails when the directory exists, so two runs in one second never share one.
  until mkdir "$dir" 2>/dev/null; do
    [ -d "$base" ] || die 1 "cannot create run directories under $base"
    n=$((n + 1))
    dir="$base/$name-$n"
  done
  printf '%s\n' "$dir"
}

json_merge() {  # FILE KEY JSON: sets FILE's top-level KEY to the JSON value, in place
  "$PY" - "$@" <<'PY'
import json, os, sys
path, key, value = sys.argv[1:4]
with open(path) as f:
    doc = json.load(f)
doc[key] = json.loads(value)
with open(path + ".tmp", "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
os.replace(path + ".tmp", path)
PY
}

nsys_json() {  # VERSION PATH COMMAND...: the `nsys` entry of run.json
  "$PY" -c 'import json, shlex, sys
print(json.dumps({"command": shlex.join(sys.argv[3:]), "version": sys.argv[1], "path": sys.argv[2]}))' "$@"
}

kineto_json() {  # RUN_JSON TRACE COMMAND...: the `kineto` entry of run.json (its run's timing)
  "$PY" -c 'import json, shlex, sys
run = json.load(open(sys.argv[1]))
print(json.dumps({"trace": sys.argv[2], "command": shlex.join(sys.argv[3:]),
                  "timing": run.get("timing"), "torch": run.get("versions", {}).get("torch")}))' "$@"
}

bench_entry() {  # BENCH_JSON VARIANT: prints that variant's entry of `harness bench --json`
  "$PY" -c 'import json, sys
entries = [r for r in json.load(open(sys.argv[1]))["results"] if r["variant"] == sys.argv[2]]
if not entries:
    sys.exit(f"no {sys.argv[2]} entry in {sys.argv[1]}")
print(json.dumps(entries[0]))' "$@"
}

capture_contents() {  # SQLITE: prints "<Step ranges> <CUDA kernels or graph executions> <GPU metric samples>"
  "$PY" - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
# nsys exports lazily: a table that would hold no rows is not created at all.
STEPS_SQL = """
    SELECT count(*) FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s ON s.id = e.textId
    WHERE coalesce(e.text, s.value) LIKE 'Step %' AND e.eventType IN (59, 60, 70, 71)"""
steps = db.execute(STEPS_SQL).fetchone()[0] if {"NVTX_EVENTS", "StringIds"} <= tables else 0
# A graph-level capture (--cuda-graph-trace=graph) records graph executions, not their kernels.
kernels = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
              if t in tables)
samples = 0
if "GPU_METRICS" in tables:
    samples = db.execute("SELECT count(*) FROM GPU_METRICS").fetchone()[0]
print(steps, kernels, samples)
PY
}

json_get() {  # FILE DOTTED.KEY: prints a value from a JSON file, or nothing when absent
  "$PY" -c 'import json, sys
value = json.load(open(sys.argv[1]))
for part in sys.argv[2].split("."):
    value = value.get(part) if isinstance(value, dict) else None
print("" if value is None else value)' "$@" 2>/dev/null || true
}

timing_summary() {  # RUN_JSON: "traced X ms/step, untraced Y (+Z% under nsys)" from a completed run.json
  "$PY" -c 'import json, sys
run = json.load(open(sys.argv[1]))
traced = (run.get("timing") or {}).get("ms_per_step")
untraced = (run.get("untraced") or {}).get("ms_per_step_median")
text = f"traced {traced:.2f} ms/step" if traced is not None else "traced ms/step unknown"
if traced is not None and untraced:
    text += f", untraced {untraced:.2f} ({100 * (traced / untraced - 1):+.0f}% under nsys)"
print(text)' "$@"
}

report_steps() {  # SUMMARY_JSON: "N steps (SOURCE)" of the report's summary.json, else nothing
  "$PY" -c 'import sys
from analysis.cli.profile import report_steps
from pathlib import Path
print(report_steps(Path(sys.argv[1])) or "")' "$1" 2>/dev/null || true
}

last_message() {  # LOG: the last line the program (not nsys' own progress) printed into LOG
  local line
  line=$(grep -vE '^[[:space:]]*$|^[[:space:]]+/|^(Generated|Generating|Collecting data|Capture range|Processing|\[[0-9]+/[0-9]+\])' "$1" | tail -n 1) || true
  [ -n "$line" ] || line=$(grep -v '^[[:space:]]*$' "$1" | tail -n 1) || true
  printf '%s\n' "${line:-(nothing)}"
}

analysis_missing() {  # prints why analysis.cli cannot be imported; false when it can
  local why
  why=$("$PY" -c 'import analysis.cli' 2>&1) && return 1
  printf '%s\n' "$why" | tail -n 1
}
