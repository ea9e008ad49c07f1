#!/usr/bin/env bash
# overhead.sh [--out DIR] [--batches "1 32"] [--variants "static graphed ..."] [--flagsets "node graph"]
#             [--processes N] [--graphed-processes N] [--export "node graph"]
#             [--capture-variants "static graphed"] [harness run options]
#
# The profiler's own cost, variant by variant: each variant is timed untraced (`harness bench`,
# then its per-step CUDA-event timeline) in N processes, then captured once per nsys flag set
# with the harness' window; overhead = traced ms/step (run.json, host clock over the window) ÷
# untraced ms/step (median of the processes; the graph-replayed variants vary little between
# processes and get --graphed-processes, default 1). A `name+compile` variant runs NAME with
# --compile default. Flag sets (all with --capture-range=cudaProfilerApi, no CPU sampling):
#   node      --trace=cuda,nvtx --cuda-graph-trace=node   (what profile.sh captured before)
#   graph     --trace=cuda,nvtx --cuda-graph-trace=graph  (nsys's default graph tracing)
#   graph-nonvtx  --trace=cuda --cuda-graph-trace=graph   (no NVTX: no steps, cost only)
#   noevents  graph, plus --cuda-event-trace=false        (CUDA event calls not traced)
#   metrics   lib.sh's metrics_flags: NVTX capture range, GPU metrics at 20 kHz, no CUDA trace
#   nvtx      --trace=nvtx                                (NVTX ranges alone)
# Graph flag sets are skipped for variants without CUDA graphs (they equal node there);
# --capture-variants limits the captures to those variants (the others are timed untraced only).
# Output: DIR/b<batch>/<variant>/{untraced-p<N>.json, untraced_steps.json, <flagset>/...}, each
# flag-set directory a run directory (run.json with nsys and untraced; capture.sqlite where
# --export names the set), and DIR/overhead.md, the table (python -m study.overhead DIR).
set -euo pipefail
# The metrics flag set captures by NVTX range, which nsys matches by its text.
export NSYS_NVTX_PROFILER_REGISTER_ONLY=0
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"
export PYTHONPATH="${here%/scripts}${PYTHONPATH:+:$PYTHONPATH}"

out="traces/overhead-$(utc_stamp)"
batches="1 32"
variants="static compiled pipelined+compile deferred graphed-sync graphed fused"
flagsets="node graph"
processes=2
graphed_processes=1
exports="node graph"
captured=""
opts=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --flagsets) flagsets=$2; shift 2 ;;
    --processes) processes=$2; shift 2 ;;
    --graphed-processes) graphed_processes=$2; shift 2 ;;
    --export) exports=$2; shift 2 ;;
    --capture-variants) captured=$2; shift 2 ;;
    --batch | --variant | --out=* | --batch=*) die 2 "overhead.sh sets $1 itself (use --batches)" ;;
    *) opts+=("$1"); shift ;;
  esac
done

found=$(usable_nsys) || exit $?
nsys_ver=${found%%$'\n'*} nsys=${found#*$'\n'}
require_gpu "${opts[@]}"
mkdir -p "$out"
"$nsys" profile --help >"$out/nsys-profile-help.txt" 2>&1 || true

flags_for() {  # FLAGSET: the nsys profile flags of one set
  local base=(--capture-range=cudaProfilerApi --capture-range-end=stop --sample=none
    --cpuctxsw=none --force-overwrite=false)
  case $1 in
    node) printf '%s\n' "${base[@]}" --trace=cuda,nvtx --cuda-graph-trace=node ;;
    graph) printf '%s\n' "${base[@]}" --trace=cuda,nvtx --cuda-graph-trace=graph ;;
    graph-nonvtx) printf '%s\n' "${base[@]}" --trace=cuda --cuda-graph-trace=graph ;;
    noevents) printf '%s\n' "${base[@]}" --trace=cuda,nvtx --cuda-graph-trace=graph \
      --cuda-event-trace=false ;;
    metrics) metrics_flags 0 20000 ;;
    nvtx) printf '%s\n' "${base[@]}" --trace=nvtx ;;
    *) die 2 "unknown flag set '$1' (node graph graph-nonvtx noevents metrics nvtx)" ;;
  esac
}

is_graphed() { case $1 in graphed | graphed-sync | fused | graphed+compile) return 0 ;; *) return 1 ;; esac; }

harness_args() {  # VARIANT: --variant NAME [--compile default]
  case $1 in
    *+compile) printf '%s\n' --variant "${1%+compile}" --compile default ;;
    *) printf '%s\n' --variant "$1" ;;
  esac
}

wanted() {  # VARIANT FLAGSET: true when that capture is to be made
  [ -z "$captured" ] || [[ " $captured " == *" $1 "* ]] || return 1
  [[ $2 != graph* && $2 != noevents ]] || is_graphed "$1"
}

total=0
for b in $batches; do for v in $variants; do for f in $flagsets; do
  if wanted "$v" "$f"; then total=$((total + 1)); fi
done; done; done
done_n=0
for b in $batches; do
  for v in $variants; do
    dir=$out/b$b/$v
    mkdir -p "$dir"
    mapfile -t hargs < <(harness_args "$v")
    n=$processes
    is_graphed "$v" && n=$graphed_processes
    for p in $(seq 1 "$n"); do
      note "[b$b $v] untraced, process $p of $n"
      "$PY" -m harness bench --variants "${hargs[1]}" "${hargs[@]:2}" --batch "$b" "${opts[@]}" \
        --repeats 5 --json "$dir/untraced-p$p.json" --timeline "$dir/untraced_steps-p$p.json" \
        >"$dir/untraced-p$p.log" 2>&1 || note "[b$b $v] untraced run failed: $(last_message "$dir/untraced-p$p.log")"
    done
    "$PY" -m study.overhead merge-untraced "$dir" || true
    for f in $flagsets; do
      wanted "$v" "$f" || continue
      done_n=$((done_n + 1))
      run=$dir/$f
      mkdir -p "$run"
      note "[$done_n/$total] b$b $v: capture with flag set $f"
      mapfile -t flags < <(flags_for "$f")
      cmd=("$nsys" profile "${flags[@]}" -o "$run/capture" "$PY" -m harness run "${hargs[@]}"
        --out "$run" --batch "$b" "${opts[@]}")
      rc=0
      "${cmd[@]}" >"$run/nsys.log" 2>&1 || rc=$?
      if [ "$rc" != 0 ] || [ ! -f "$run/run.json" ]; then
        note "[b$b $v $f] capture failed (exit $rc): $(last_message "$run/nsys.log")"
        continue
      fi
      json_merge "$run/run.json" nsys "$(nsys_json "$nsys_ver" "$nsys" "${cmd[@]}")"
      [ ! -f "$dir/untraced.json" ] || {
        cp "$dir/untraced.json" "$dir/untraced_steps.json" "$run/" 2>/dev/null || true
        json_merge "$run/run.json" untraced "$(bench_entry "$dir/untraced.json" "${hargs[1]}")"
      }
      if [[ " $exports " == *" $f "* ]] && [ -f "$run/capture.nsys-rep" ]; then
        "$nsys" export --type sqlite -o "$run/capture.sqlite" "$run/capture.nsys-rep" \
          >>"$run/nsys.log" 2>&1 || note "[b$b $v $f] export failed"
      fi
      rm -f "$run/capture.nsys-rep"
    done
  done
done
"$PY" -m study.overhead table "$out" | tee "$out/overhead.md"
note "done: $out"
