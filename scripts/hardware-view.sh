#!/usr/bin/env bash
# hardware-view.sh [STAGE...]: the hardware view of issue 10 on a GPU machine, in one directory.
#
# Stages (default: all of them, in this order; each one fits a 10-minute call on the H200):
#   fixture     a small real metrics capture: fused, batch 32, 4 steps (window 30:34) at 20 kHz;
#               its run directory is copied to DIR/fused-metrics (for tests/data/runs/fused-metrics)
#   graphed     graphed at batch 1, 8, 32: profile.sh --metrics, steps 31-90 of 100 at 20 kHz
#   fused       fused at batch 1, 8, 32, the same way
#   fused-bf16  fused in bf16 at batch 1, 8, 32
#   aa-static   bench --processes 5 of static alone at batch 8: the A/A noise floor
#   aa-fused    the same for fused
#   results     only rebuild results.md and the archive (not part of the default run)
# After every stage DIR/results.md is rebuilt from all the metrics runs so far: ms/step untraced
# and under the metrics capture, the floor and the share of it reached, SMs active, DRAM read,
# GR active; and DIR/hardware-view.tgz packs everything but the .nsys-rep files (a few MB).
#
# DIR is $HARDWARE_VIEW_DIR, else traces/hardware-view. Progress goes to stderr, one line a step.
# Exit status: 0 done; 2 an unknown stage; the failing command's status otherwise.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"
export PYTHONPATH="${here%/scripts}${PYTHONPATH:+:$PYTHONPATH}"

dir=${HARDWARE_VIEW_DIR:-traces/hardware-view}
all=(fixture graphed fused fused-bf16 aa-static aa-fused)
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=("${all[@]}")
for s in "${stages[@]}"; do
  [[ " ${all[*]} results " == *" $s "* ]] || die 2 "unknown stage '$s': choose from ${all[*]} results"
done
mkdir -p "$dir/runs"
hz=${GAPSCOPE_METRICS_HZ:-20000}

metrics_run() {  # NAME VARIANT [harness options]: one profile.sh --metrics run into DIR/runs
  local name=$1 variant=$2
  shift 2
  note "hardware-view: $name: profile.sh $variant --metrics=$hz $*"
  RUN_NAME=$name TRACES_DIR=$dir/runs GAPSCOPE_UNTRACED_REPEATS=${GAPSCOPE_UNTRACED_REPEATS:-3} \
    bash "$here/profile.sh" "$variant" "--metrics=$hz" "$@"
}

sweep() {  # VARIANT [options]: batch 1, 8, 32, steps 31..90 of 100
  local variant=$1 tag=$1
  shift
  [[ " $* " != *" bf16 "* ]] || tag=$variant-bf16
  for batch in 1 8 32; do
    metrics_run "$tag-b$batch" "$variant" --batch "$batch" --new-tokens 100 --window 30:90 "$@"
  done
}

aa() {  # VARIANT: bench --processes 5 of it alone at batch 8
  note "hardware-view: A/A of $1: bench --processes 5 (10 processes, interleaved)"
  "$PY" -m harness bench --variants "$1" --processes 5 --repeats 5 --batch 8 \
    --json "$dir/aa-$1.json" | tee "$dir/aa-$1.txt"
}

results() {  # rebuilds DIR/results.md from the metrics runs' run.json and summary.json
  "$PY" - "$dir" <<'PY'
import json, sys
from pathlib import Path

root = Path(sys.argv[1])
head = ("| variant | batch | dtype | ms/step untraced | ms/step (metrics capture) | floor ms | "
        "% of floor | SMs active | DRAM read % | DRAM read GB/s | GR active |")
lines = [head, "|" + " --- |" * 11]
for run in sorted((root / "runs").glob("*/summary.json")):
    info = json.loads((run.parent / "run.json").read_text())
    s = json.loads(run.read_text())["summary"]
    m, f, c = s.get("gpu_metrics") or {}, s.get("floor") or {}, info["config"]
    # The twin's GPU period over the window's steps where there is one (the floor's steps),
    # else bench's ms/step over all the steps.
    twin = s.get("untraced") or {}
    untraced = (twin["period_ns_median"] / 1e6 if twin.get("period_ns_median")
                else (info.get("untraced") or {}).get("ms_per_step_median"))
    reached = f.get("floor_pct_of_untraced_period") or f.get("floor_pct_of_untraced")
    def num(v, fmt):
        return "n/a" if v is None else format(v, fmt)
    floor_ms = None if f.get("floor_ns_per_step") is None else f["floor_ns_per_step"] / 1e6
    lines.append(" | ".join([
        f"| {c['variant']}", str(c["batch"]), c["dtype"], num(untraced, ".3f"),
        num(info["timing"]["ms_per_step"], ".3f"), num(floor_ms, ".3f"),
        num(reached, ".1f") + "%", num(m.get("sm_active_pct"), ".1f") + "%",
        num(m.get("dram_read_pct"), ".1f") + "%", num(m.get("dram_read_gbps"), ".0f"),
        num(m.get("gr_active_pct"), ".1f") + "% |"]))
notes = ["", "ms/step untraced: the untraced twin's median GPU period over the window's steps "
         "(untraced_steps.json; bench's median where a run has no twin); floor: the window's "
         "bytes per step (run.json floor, harness/floor.py) over bench's copy rate; % of floor: "
         "the median over the steps of floor / untraced period; SMs active, DRAM read, GR "
         "active: time-weighted over the NVTX steps of the metrics capture (summary.json "
         "gpu_metrics)."]
(root / "results.md").write_text("\n".join(lines + notes) + "\n")
print("\n".join(lines))
PY
}

for s in "${stages[@]}"; do
  note "hardware-view: stage $s (${dir})"
  case $s in
    fixture)
      metrics_run fused-metrics fused --batch 32 --new-tokens 40 --window 30:34
      # Run directories are <UTC stamp>-<name>: the last in order is the one just made.
      made=$(find "$dir/runs" -maxdepth 1 -name '*-fused-metrics*' | sort | tail -n 1)
      rm -rf "$dir/fused-metrics"
      mkdir -p "$dir/fused-metrics"
      cp "$made"/{capture.sqlite,run.json,untraced.json} "$dir/fused-metrics/"
      rm -f "$made/summary.json"  # 4 steps: not a row of the results table
      ;;
    graphed) sweep graphed ;;
    fused) sweep fused ;;
    fused-bf16) sweep fused --dtype bf16 ;;
    aa-static) aa static ;;
    aa-fused) aa fused ;;
    results) ;;
  esac
  results >"$dir/results.txt"
  tar -czf "$dir.tgz.tmp" -C "$dir" --exclude='*.nsys-rep' --exclude='*.tgz' .
  mv "$dir.tgz.tmp" "$dir/hardware-view.tgz"
  note "hardware-view: stage $s done; $dir/results.md and $dir/hardware-view.tgz updated"
done
