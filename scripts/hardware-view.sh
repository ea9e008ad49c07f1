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
# After every stage DIR/results.md and DIR/hardware-view.png are rebuilt from all the runs so far
# by `gapscope compare DIR/runs --format md --hardware-plot` (its hardware table: untraced
# ms/step, the floor and the share of it reached, SMs active, DRAM read, GR active; METRICS.md),
# and DIR/hardware-view.tgz packs everything but the .nsys-rep files (a few MB).
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

results() {  # DIR/results.md and DIR/hardware-view.png from the runs so far: gapscope compare
  compgen -G "$dir/runs/*/capture.sqlite" >/dev/null || { note "hardware-view: no runs yet"; return 0; }
  # --force: each stage draws the figure again over the last stage's.
  "$PY" -m analysis.cli compare "$dir/runs" --format md --force \
    --hardware-plot "$dir/hardware-view.png" >"$dir/results.md"
  cat "$dir/results.md"
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
      rm -rf "$made"  # 4 steps: not a row of the results table
      ;;
    graphed) sweep graphed ;;
    fused) sweep fused ;;
    fused-bf16) sweep fused --dtype bf16 ;;
    aa-static) aa static ;;
    aa-fused) aa fused ;;
    results) ;;
  esac
  results >/dev/null
  tar -czf "$dir.tgz.tmp" -C "$dir" --exclude='*.nsys-rep' --exclude='*.tgz' .
  mv "$dir.tgz.tmp" "$dir/hardware-view.tgz"
  note "hardware-view: stage $s done; $dir/results.md and $dir/hardware-view.tgz updated"
done
