# Shared helpers for the capture scripts; sourced, never run. Callers set `set -euo pipefail`.
# Finds nsys, checks its version, names run directories, and edits run.json with the stdlib only.
# shellcheck shell=bash

PY=${GAPSCOPE_PYTHON:-python3}

# Older nsys releases were not checked against these flags and this SQLite schema; 2024.2 (Debian's)
# has every flag profile.sh passes. GAPSCOPE_NSYS_MIN lowers the bar at your own risk.
NSYS_MIN_VERSION=${GAPSCOPE_NSYS_MIN:-2024.2}

# Where Nsight Systems lands when it is not on PATH; the last is the full copy Nsight Compute ships.
NSYS_PLACES=${GAPSCOPE_NSYS_PLACES:-"/opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys"}

note() { printf 'gapscope: %s\n' "$*" >&2; }

die() {  # CODE MESSAGE...: the one error style of every gapscope command
  local code=$1
  shift
  note "error: $*"
  exit "$code"
}

nsys_version() {  # NSYS: prints e.g. 2025.3.2.0 from "NVIDIA Nsight Systems version 2025.3.2.0-253..."
  local out
  out=$("$1" --version 2>/dev/null) || return 1
  grep -oE '[0-9]{4}\.[0-9]+(\.[0-9]+)*' <<<"$out" | head -n 1 | grep . || return 1
}

version_ge() {  # A B: true when version A >= version B
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]
}

find_nsys() {  # prints the nsys to use; says on stderr which one and why
  if [ -n "${NSYS:-}" ]; then
    [ -x "$NSYS" ] || die 2 "NSYS=$NSYS is not an executable file: unset NSYS or point it at nsys"
    note "using nsys $(nsys_version "$NSYS" || echo '(version unknown)') at $NSYS (from \$NSYS)"
    printf '%s\n' "$NSYS"
    return 0
  fi
  local candidates=() place best="" best_version="" version found=0 seen=" "
  mapfile -t candidates < <(type -ap nsys)
  # Unquoted on purpose: each place is a glob.
  for place in $NSYS_PLACES; do
    if [ -x "$place" ]; then candidates+=("$place"); fi
  done
  # Newest wins; on a tie the earlier place (PATH before install places) is kept.
  for place in "${candidates[@]}"; do
    # /usr/local/cuda is often a link to /usr/local/cuda-X.Y: count one nsys once.
    [[ $seen != *" $(readlink -f "$place") "* ]] || continue
    seen+="$(readlink -f "$place") "
    version=$(nsys_version "$place") || { note "skipping $place: \`nsys --version\` failed"; continue; }
    found=$((found + 1))
    if [ -z "$best" ] || ! version_ge "$best_version" "$version"; then
      best=$place
      best_version=$version
    fi
  done
  [ -n "$best" ] || die 2 "no nsys found (looked at \$NSYS, PATH, $NSYS_PLACES): install Nsight Systems or set NSYS=/path/to/nsys"
  note "using nsys $best_version at $best (newest of $found found)"
  printf '%s\n' "$best"
}

require_nsys_version() {  # NSYS
  local version
  version=$(nsys_version "$1") || die 2 "$1 --version failed: reinstall Nsight Systems or set NSYS to a working nsys"
  version_ge "$version" "$NSYS_MIN_VERSION" ||
    die 2 "nsys $version at $1 is too old (gapscope needs $NSYS_MIN_VERSION or newer to capture and export SQLite): install a newer Nsight Systems or set NSYS"
}

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

capture_flags() {  # TRACE [GRAPH_TRACE [FUNCTIONS_JSON]]: the nsys profile flags every capture
  # uses (profile.sh and doctor). The harness opens and closes the window with
  # cudaProfilerStart/Stop; without --capture-range-end=stop nsys ends the program when the range
  # closes (exit 143). FUNCTIONS_JSON: nsys's Python function trace, an NVTX range around each
  # call of the functions it names (gapscope profile --step-function).
  printf '%s\n' --capture-range=cudaProfilerApi --capture-range-end=stop "--trace=$1" \
    --sample=none --cpuctxsw=none "--cuda-graph-trace=${2:-node}" --force-overwrite=false
  [ -z "${3:-}" ] || printf '%s\n' "--python-functions-trace=$3"
}

metrics_flags() {  # DEVICE HZ: the flags of a GPU-metrics capture: NVTX and sampled metrics, no CUDA trace
  # The sampler reads the GPU's counters on its own clock: no CUPTI callbacks, no per-launch cost.
  # The window is the harness' NVTX range `gapscope window`, not cudaProfilerStart/Stop: a
  # cudaProfilerApi capture range makes nsys turn CUDA tracing on (seen with nsys 2025.3 on the
  # H200: "CUDA tracing is required for cudaProfilerStart/Stop API support").
  printf '%s\n' --capture-range=nvtx "--nvtx-capture=gapscope window" --capture-range-end=stop \
    --trace=nvtx --sample=none --cpuctxsw=none --force-overwrite=false \
    "--gpu-metrics-devices=$1" "--gpu-metrics-frequency=$2"
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
