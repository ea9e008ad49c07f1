#!/usr/bin/env bash
# profile.sh VARIANT [--osrt] [--cuda-graph-trace node|graph] [--metrics[=HZ]] [--kineto]
#            [--no-sync-lines] [harness run options]: one Nsight Systems capture of one decode
#            variant (and, with --kineto, its torch.profiler twin).
#
# What it captures: CUDA API calls, GPU kernels/copies and the harness' NVTX ranges (`Step N`
# holding `Model Forward` and `Check Stop Condition`) for the steps of the harness' profiler window
# only (--window S:E, default 30:50), after the harness' full warm-up run. Everything lands in a new
# run directory traces/<UTC time>-<variant>/ (TRACES_DIR replaces traces/, RUN_NAME the variant
# in the name; never overwritten):
#   untraced.json     the same configuration timed without nsys, so a report can show the
#                     profiler's own overhead (GAPSCOPE_UNTRACED_REPEATS=5 repeats; 0 skips it)
#   untraced_steps.json  the untraced twin: every step's GPU start and end from CUDA events, in
#                     3 more runs of the same process (read back after each run: no added sync)
#   capture.nsys-rep  the capture (opens in the Nsight Systems GUI)
#   capture.sqlite    its SQLite export, made here by the same nsys: older ones cannot read it
#   nsys.log          everything nsys and the harness printed
#   run.json          the harness' record, plus `nsys` {command, version, path} and `untraced`
#   kineto.json.gz    --kineto: the same window captured by torch.profiler (CPU and CUDA activity)
#                     in a second run without nsys; kineto/run.json is that run's own record, its
#                     timing is run.json's `kineto`; `gapscope compare` of the pair is printed
#   the analysis report, when analysis.cli is importable
#
# Why the unusual nsys flags:
#   --capture-range=cudaProfilerApi  record only between the harness' cudaProfilerStart/Stop,
#                                    not model loading, warm-up or compilation
#   --capture-range-end=stop         let the program finish once the range closes; without it
#                                    nsys ends the program there (exit 143)
#   --sample=none --cpuctxsw=none    no CPU sampling or context-switch trace: with them a capture
#                                    took over two minutes and wrote 2.2 GB on the H200 machine
#   --cuda-graph-trace=graph|node    graph: each graph replay is one GPU op (the default for the
#                                    graph-replayed variants: cheap); node: its kernels one by
#                                    one (the default otherwise; `--cuda-graph-trace node` to see
#                                    the gaps inside a graph, at 8-33% overhead on the H200)
#   --force-overwrite=false          an existing capture is never replaced
#   --trace=cuda,nvtx                --osrt or GAPSCOPE_OSRT=1 adds osrt (OS runtime calls: the
#                                    futex and poll waits behind a blocking sync)
#
# The sync's source line: the capture runs with gapscope's hook first on PYTHONPATH
# (harness/inject/sitecustomize.py, GAPSCOPE_SYNC_MARKS=1): torch's sync debug mode warns at each
# synchronizing CUDA call (the harness' `.item()` stop check among them) and the hook turns each
# warning into an NVTX mark `gapscope.sync FILE:LINE FUNCTION` (docs/PROFILING.md);
# --no-sync-lines (or GAPSCOPE_SYNC_LINES=0) captures without it. Not with --metrics.
#
# --metrics[=HZ] makes the cheap observer instead: --trace=nvtx (no CUDA trace, so no per-launch
# cost) with GPU metrics sampled on GPU $GAPSCOPE_METRICS_DEVICE (0) at HZ (GAPSCOPE_METRICS_HZ,
# 20000) samples a second; the run directory is named <time>-<variant>-metrics and the analysis is
# per-step GR/SM/tensor activity and DRAM bandwidth over the NVTX steps (no gaps without CUDA).
#
# Exit status: 0 done; 2 bad usage; the run's own status when the harness fails under nsys; 1 for
# the other failures. Each failure is one line on stderr naming the cause and the option to change.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"
# `-m harness` resolves to this checkout from any working directory.
export PYTHONPATH="${here%/scripts}${PYTHONPATH:+:$PYTHONPATH}"

usage="usage: scripts/profile.sh VARIANT [--osrt] [--cuda-graph-trace node|graph] [--metrics[=HZ]] [--kineto] [--no-sync-lines] [harness run options, e.g. --batch 1 --window 30:50]"
{ [ $# -ge 1 ] && [[ $1 != -* ]]; } || die 2 "$usage"
variant=$1
shift
trace=cuda,nvtx
[ "${GAPSCOPE_OSRT:-0}" = 1 ] && trace=cuda,nvtx,osrt
opts=()
metrics_hz=""
kineto=0
sync_lines=${GAPSCOPE_SYNC_LINES:-1}
window=30:50
# The graph-replayed variants are captured graph by graph unless asked: node-level tracing
# cost them 8-33% on the H200, graph-level 0.5-3% (graphed-sync: 7-14%); docs/PROFILING.md.
# The loops of one launch (while-graph, while-fused) have no host steps: node by node, so that
# the analysis finds their steps in the repeats of the one execution (graph by graph nsys records
# the execution whole: docs/PROFILING.md).
loop=0
case $variant in
  graphed | graphed-sync | fused | mega) graph_trace=${GAPSCOPE_CUDA_GRAPH_TRACE:-graph} ;;
  while-graph | while-fused | while-mega) graph_trace=${GAPSCOPE_CUDA_GRAPH_TRACE:-node} loop=1 ;;
  *) graph_trace=${GAPSCOPE_CUDA_GRAPH_TRACE:-node} ;;
esac
prev=""
while [ $# -gt 0 ]; do
  arg=$1
  shift
  case $arg in
    --osrt) trace=cuda,nvtx,osrt ;;
    --cuda-graph-trace) graph_trace=${1:-}; shift || true ;;
    --cuda-graph-trace=*) graph_trace=${arg#--cuda-graph-trace=} ;;
    --metrics) metrics_hz=${GAPSCOPE_METRICS_HZ:-20000} ;;
    --metrics=*) metrics_hz=${arg#--metrics=} ;;
    --kineto) kineto=1 ;;
    --no-sync-lines) sync_lines=0 ;;
    --kineto=*) die 2 "profile.sh names the trace itself (kineto.json.gz): $usage" ;;
    --variant | --variant=* | --variants | --variants=* | --out | --out=*)
      die 2 "profile.sh sets $arg itself: $usage" ;;
    *) opts+=("$arg") ;;
  esac
  [ "$prev" = --window ] && window=$arg
  [[ $arg == --window=* ]] && window=${arg#--window=}
  prev=$arg
done
case $graph_trace in
  node | graph) ;;
  *) die 2 "--cuda-graph-trace must be node or graph, got '$graph_trace': $usage" ;;
esac

[ -z "$metrics_hz" ] || [[ $metrics_hz =~ ^[1-9][0-9]*$ ]] ||
  die 2 "--metrics=HZ needs a whole number of samples a second, got '$metrics_hz': $usage"

# A wrong name is a usage error, found before anything else is looked for (nsys, a GPU).
# hf-generate runs its loop inside model.generate: no `Step N` ranges to capture step by step.
[ "$variant" != hf-generate ] ||
  die 2 "hf-generate cannot be profiled step by step: model.generate runs the loop inside transformers, with no \`Step N\` NVTX ranges; time it untraced with \`python -m harness bench --variants hf-generate\`, or profile a variant of the ladder"
"$PY" - "$variant" <<'PYCHECK' || die 2 "unknown variant '$variant': $usage"
import sys
from harness.config import VARIANT_NAMES
sys.exit(0 if sys.argv[1] in VARIANT_NAMES else 1)
PYCHECK

found=$(usable_nsys) || exit $?
nsys_ver=${found%%$'\n'*} nsys=${found#*$'\n'}
require_gpu "${opts[@]}"

name=${RUN_NAME:-$variant}
[ -z "$metrics_hz" ] || name=${RUN_NAME:-$variant-metrics}
run=$(new_run_dir "${TRACES_DIR:-traces}" "$(utc_stamp)-$name")
# profile-all.sh learns each run directory through this file.
[ -z "${GAPSCOPE_RUN_DIR_FILE:-}" ] || printf '%s\n' "$run" >"$GAPSCOPE_RUN_DIR_FILE"
note "run directory: $run"

repeats=${GAPSCOPE_UNTRACED_REPEATS:-5}
if [ "$repeats" != 0 ]; then
  rc=0
  "$PY" -m harness bench --variants "$variant" "${opts[@]}" --repeats "$repeats" \
    --json "$run/untraced.json" --timeline "$run/untraced_steps.json" || rc=$?
  [ "$rc" = 0 ] || die "$rc" "the untraced timing run failed (exit $rc, its message is above); nothing was captured"
fi

if [ -n "$metrics_hz" ]; then
  mapfile -t flags < <(metrics_flags "${GAPSCOPE_METRICS_DEVICE:-0}" "$metrics_hz")
  # The capture range is an NVTX range named by its text: let nsys match unregistered strings.
  export NSYS_NVTX_PROFILER_REGISTER_ONLY=0
else
  mapfile -t flags < <(capture_flags "$trace" "$graph_trace")
fi
cmd=("$nsys" profile "${flags[@]}" -o "$run/capture"
  "$PY" -m harness run --variant "$variant" --out "$run" "${opts[@]}")
# The hook names each sync's line (above); the harness' own run.json notes it (`hook`).
hook_env=()
if [ -z "$metrics_hz" ] && [ "$sync_lines" = 1 ]; then
  hook_env=(env "PYTHONPATH=${here%/scripts}/harness/inject:$PYTHONPATH" GAPSCOPE_SYNC_MARKS=1)
fi
note "capturing: ${cmd[*]}"
rc=0
${hook_env[@]+"${hook_env[@]}"} "${cmd[@]}" 2>&1 | tee "$run/nsys.log" || rc=${PIPESTATUS[0]}

# nsys exits with the status of the program it ran.
[ "$rc" = 0 ] || die "$rc" "the run under nsys failed with exit code $rc: $(last_message "$run/nsys.log") (all of it in $run/nsys.log)"

steps_run=$(json_get "$run/run.json" result.steps_run)
rep=$run/capture.nsys-rep
if [ ! -f "$rep" ]; then
  [ ! -f "$run/capture.qdstrm" ] ||
    die 1 "nsys $nsys_ver wrote $run/capture.qdstrm but no .nsys-rep: its importer is missing or broken here (see $run/nsys.log). The .qdstrm is kept: import it where Nsight Systems $nsys_ver works, with \`QdstrmImporter -i $run/capture.qdstrm\` from that same version, then \`scripts/export.sh capture.nsys-rep\`"
  die 1 "nsys wrote no capture: the profiler window --window $window never opened (the run made ${steps_run:-an unknown number of} steps, on --device cuda?): choose a --window inside the run or raise --new-tokens"
fi

sqlite=$run/capture.sqlite
rc=0
"$nsys" export --type sqlite -o "$sqlite" "$rep" 2>&1 | tee -a "$run/nsys.log" || rc=${PIPESTATUS[0]}
{ [ "$rc" = 0 ] && [ -f "$sqlite" ]; } ||
  die 1 "nsys $nsys_ver could not export $rep to SQLite (exit $rc): $(last_message "$run/nsys.log"). The .nsys-rep is kept: export it with the nsys that captured it, \`scripts/export.sh $rep\`"

contents=$(capture_contents "$sqlite") || die 1 "cannot read $sqlite as an nsys SQLite export"
read -r steps kernels samples <<<"$contents"
if [ -n "$metrics_hz" ]; then
  [ "$steps" != 0 ] ||
    die 1 "the metrics capture holds no \`Step N\` NVTX ranges: --window $window lies outside the run's steps (${steps_run:-unknown}) or NVTX was not recorded"
  [ "$samples" != 0 ] ||
    die 1 "the metrics capture holds no GPU metric samples: nsys could not sample GPU ${GAPSCOPE_METRICS_DEVICE:-0} (\`make doctor\` checks it; the driver may restrict profiling to admin users: NVreg_RestrictProfilingToAdminUsers=0)"
elif [ "$steps" = 0 ] && [ "$kernels" = 0 ]; then
  die 1 "the capture holds no steps and no CUDA kernels: --window $window lies outside the steps the run made (${steps_run:-unknown}): choose a --window inside the run or raise --new-tokens"
elif [ "$steps" = 0 ] && [ "$loop" = 1 ]; then
  note "no \`Step N\` ranges: $variant decodes every step in one graph launch; the analysis infers its steps from the launch's repeats"
elif [ "$steps" = 0 ]; then
  die 1 "the capture holds $kernels CUDA kernels but no \`Step N\` NVTX ranges: NVTX was not recorded: check that \`$PY -c 'import nvtx'\` works and that --trace has nvtx"
elif [ "$kernels" = 0 ]; then
  die 1 "the capture holds $steps steps but no CUDA kernels: the run did not use the GPU (pass --device cuda) or CUDA was not traced (--trace needs cuda)"
fi
if [ "$loop" = 0 ] && [[ $window =~ ^([0-9]+):([0-9]+)$ ]] && [ "$steps" -lt $((BASH_REMATCH[2] - BASH_REMATCH[1])) ]; then
  note "warning: the capture holds $steps steps, --window $window asked for $((BASH_REMATCH[2] - BASH_REMATCH[1])): the run ended at step ${steps_run:-?} (raise --new-tokens or check --stop)"
fi

[ -f "$run/run.json" ] || die 1 "the harness wrote no $run/run.json: see $run/nsys.log"
json_merge "$run/run.json" nsys "$(nsys_json "$nsys_ver" "$nsys" "${cmd[@]}")"
untraced=null
[ ! -f "$run/untraced.json" ] || untraced=$(bench_entry "$run/untraced.json" "$variant")
json_merge "$run/run.json" untraced "$untraced"
if [ ${#hook_env[@]} -gt 0 ]; then sync_marks=true; else sync_marks=false; fi
json_merge "$run/run.json" hook "{\"sync_marks\": $sync_marks}"
[ -z "$metrics_hz" ] || json_merge "$run/run.json" gpu_metrics \
  "{\"device\": ${GAPSCOPE_METRICS_DEVICE:-0}, \"frequency_hz\": $metrics_hz, \"samples\": $samples}"

if [ "$kineto" = 1 ]; then
  # A second run of the same loop, without nsys: the two profilers never see each other.
  kcmd=("$PY" -m harness run --variant "$variant" --out "$run/kineto" --kineto "$run/kineto.json.gz"
    "${opts[@]}")
  note "capturing with torch.profiler: ${kcmd[*]}"
  rc=0
  "${kcmd[@]}" 2>&1 | tee "$run/kineto.log" || rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || die "$rc" "the torch.profiler run failed with exit code $rc: $(last_message "$run/kineto.log") (all of it in $run/kineto.log); the nsys capture in $run is complete"
  json_merge "$run/run.json" kineto "$(kineto_json "$run/kineto/run.json" "$run/kineto.json.gz" "${kcmd[@]}")"
fi

if why=$(analysis_missing); then
  note "no report: analysis.cli is not importable ($why); the capture is in $run"
elif [ "$loop" = 1 ] && [ "$graph_trace" = graph ]; then
  note "no report: graph by graph, nsys records $variant's one launch as one op, with no steps in it (capture node by node for them; the untraced twin, untraced_steps.json, times every step)"
elif [ -n "$metrics_hz" ]; then
  # Without a CUDA trace there is no gap report: the per-step metrics, as JSON and a plot.
  "$PY" -m analysis.cli analyze "$run" --format json --plot "$run/metrics.png" >"$run/summary.json" ||
    die 1 "the analysis failed on $run (its message is above)"
else
  "$PY" -m analysis.cli report "$run" -o "$run" --show ||
    die 1 "the analysis report failed on $run (its message is above)"
  if [ "$kineto" = 1 ]; then
    "$PY" -m analysis.cli compare "$run/capture.sqlite" "$run/kineto.json.gz" ||
      note "warning: the torch.profiler trace could not be compared (its message is above)"
  fi
fi

if [ -n "$metrics_hz" ]; then
  note "done: $run ($steps steps, $samples GPU metric samples at $metrics_hz Hz; $(timing_summary "$run/run.json"))"
else
  # The report's count and where its steps came from (a device loop's are inferred), else the
  # capture's `Step N` ranges.
  said=$(report_steps "$run/summary.json")
  note "done: $run (${said:-$steps steps}, $kernels kernels captured; $(timing_summary "$run/run.json"))"
fi
