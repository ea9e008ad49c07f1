#!/usr/bin/env bash
# The whole study on a GPU machine (issue 5): the article's ladder checked, then finished.
#
#   scripts/study.sh [--budget quick|full]
#                    [--parts ladder,scale,batch,finish,processes,capture,observer,family,results]
#                    [--captures "static graphed ..."] [--dir DIR] [--model ARCH[:SIZE]]
#                    [--family-batches "1 32"] [--sizes "small 1b 8b"] [--sizes-batches "1"]
#                    [--sizes-variants naive,kv,...,nocheck: every rung but the compiled]
#
# What it runs, all GPT-2 124M fp32, TF32 "high" as the article, untraced unless said:
#   bench-ladder        naive kv kv-expandable static compiled pipelined hf-generate (bs 32, 100 tokens)
#   bench-ladder-compile pipelined and pipelined-seed with --compile default (the article's last rung)
#   bench-scale-N       naive vs kv at N new tokens (quadratic vs linear)
#   bench-batch-B       compiled vs pipelined+compile at batch B (the article's batch claim)
#   bench-finish        the finished ladder with a stop schedule that really stops (uniform 50-100)
#   bench-lt-off        graphed with DISABLE_ADDMM_CUDA_LT=1: its biased GEMMs off cuBLASLt
#   bench-branches-N    fused with its batch cut into N micro-batches on N streams
#   processes-*.json    the eager rungs, each in 5 processes interleaved (bench --processes): CIs
#                       between processes, which eager timings need (not in the default parts:
#                       --parts processes)
#   capture/            one nsys capture per rung (scripts/profile.sh), each with its analysis
#   bench-ladder-bB     part `family` (with --model, not in the default parts): the ladder at
#                       each batch of --family-batches (default "1 32"), one process a batch,
#                       our own step's rungs (graphed-sync, graphed, fused) included where they
#                       run, and captures capture/<UTC>-<rung>-bB of --captures (default static,
#                       compiled, pipelined+compile, graphed-sync: graph by graph, with its
#                       untraced twin; "none" for none); `python -m study
#                       DIR -o docs --part family` makes its RESULTS part
#   bench-sizes-S-bB    part `sizes` (not in the default parts: --parts sizes; issue 33): the ladder
#                       at each size of --sizes (llama = small 125M, llama:1b, llama:8b, the large
#                       ones drawn on the GPU) and batch of --sizes-batches, bf16, 100 tokens, one
#                       process a configuration (--sizes-variants: every rung but compiled and
#                       hf-generate, ~2 min of compile each at 8B), then capture/<UTC>-sizes-S-
#                       graphed-sync-bB, graph by graph with its untraced twin; `python -m
#                       study DIR -o docs --part sizes` makes its RESULTS part (4
#                       minutes on an H200 for the three sizes at batch 1 with 5 rungs)
#   observer/           scripts/overhead.sh: static, deferred, compiled, pipelined+compile,
#                       graphed-sync, graphed and fused at batch 1, 8 and 32, untraced (eager
#                       ones in 2 processes) with their untraced twin, captured node-level and
#                       graph-level: how much of each bubble is the profiler's (not in the
#                       default parts: --parts observer; about 25 minutes on an H200)
# Then `python -m study DIR -o DIR/results` writes RESULTS.md and its plots from those
# runs (it needs no GPU: it can also be run later, elsewhere, on the same directory).
# quick: 3 repeats, fewer sizes and captures, a few minutes; full: what docs/RESULTS.md shows.
# --parts and --captures split one study over several GPUs or sessions (same --dir): each part
# writes its own files, and a part already done in DIR is kept, not run again.
# --model runs every bench and capture on another family (harness/model.py: llama, qwen2, ...);
# our own step's variants (graphed, graphed-sync, fused) run on gpt2, llama, qwen2 and mistral
# and are left out for the others (phi); fused's micro-batches (fused+bN) are GPT-2's only.
set -euo pipefail

budget=full
parts=ladder,scale,batch,finish,capture,results
dir=""
only_captures=""
model=gpt2
family_batches="1 32"
sizes="small 1b 8b"
sizes_batches="1"
sizes_variants=naive,kv,kv-expandable,static,pipelined,pipelined-seed,deferred,check-every-k,graphed-sync,graphed,fused,while-graph,while-fused,nocheck
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --captures) only_captures=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --family-batches) family_batches=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --sizes-batches) sizes_batches=$2; shift 2 ;;
    --sizes-variants) sizes_variants=$2; shift 2 ;;
    *) echo "study.sh: unknown option '$1' (use --budget, --parts, --captures, --dir, --model, --family-batches, --sizes, --sizes-batches, --sizes-variants)" >&2; exit 2 ;;
  esac
done
case "$budget" in
  quick) repeats=3; tokens_list="100 200"; batches="1 32"
         captures="static pipelined-seed pipelined graphed-sync graphed fused" ;;
  full)  repeats=5; tokens_list="100 200 400"; batches="1 2 4 8 16 32 64 128"
         captures="naive kv static compiled pipelined-seed pipelined pipelined+compile deferred check-every-k graphed-sync graphed fused fused+b2 nocheck" ;;
  *) echo "study.sh: --budget takes quick or full, not '$budget'" >&2; exit 2 ;;
esac
captures=${only_captures:-$captures}

root=$(cd "$(dirname "$0")/.." && pwd)
PY=${GAPSCOPE_PYTHON:-python3}
dir=${dir:-"$root/traces/study-$(date -u +%Y%m%dT%H%M%SZ)"}
mkdir -p "$dir/capture"
cd "$root"
stop="uniform:50-100"
common=(--batch 32 --new-tokens 100 --dtype fp32 --matmul-precision high --repeats "$repeats"
  --model "$model")
gpt2=1
case $model in gpt2 | gpt2:* | tiny) ;; *) gpt2=0 ;; esac
own=$gpt2  # our own step runs here: harness/model.py's OWN_STEP_FAMILIES (a directory: its model_type)
case $model in llama | llama:* | qwen2 | qwen2:* | mistral | mistral:*) own=1 ;; esac
if [ -d "$model" ]; then
  own=$("$PY" -c 'import sys; from harness.model import OWN_STEP_FAMILIES as F, model_family as f; print(int(f(sys.argv[1]) in F))' "$model")
fi
# VARIANTS (comma-separated) without our own step's when the study's model has none.
generic() { if [ "$own" = 1 ]; then echo "$1"; else echo "$1" | tr , '\n' | grep -vE '^(graphed|graphed-sync|fused)$' | paste -sd, -; fi; }

want() { case ",$parts," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
say() { printf '[study %4ds] %s\n' "$SECONDS" "$*"; }
# One bench: its table on the terminal and in DIR/NAME.log, its figures in DIR/NAME.json.
bench() {
  local name=$1; shift
  if [ -s "$dir/$name.json" ]; then say "$name: done before, kept"; return 0; fi
  say "$name: $*"
  if ! "$PY" -m harness bench --json "$dir/$name.json" "$@" 2>&1 | tee "$dir/$name.log"; then
    say "$name FAILED (see $dir/$name.log); going on"
  fi
}

if want ladder; then
  bench bench-ladder --variants naive,kv,static,compiled,pipelined,hf-generate "${common[@]}"
  # Alone in its process: the allocator setting must be in place before CUDA starts.
  bench bench-ladder-expandable --variants kv-expandable "${common[@]}"
  bench bench-ladder-compile --variants pipelined,pipelined-seed --compile default "${common[@]}"
fi
if want scale; then
  for n in $tokens_list; do
    bench "bench-scale-$n" --variants naive,kv --batch 32 --new-tokens "$n" --repeats "$repeats" \
      --model "$model"
  done
fi
if want batch; then
  for b in $batches; do
    bench "bench-batch-$b" --variants compiled,pipelined --compile default --batch "$b" \
      --new-tokens 100 --repeats "$repeats" --model "$model"
  done
fi
if want finish; then
  bench bench-finish --variants "$(generic static,pipelined,deferred,check-every-k,graphed-sync,graphed,fused,nocheck,hf-generate)" \
    --stop "$stop" "${common[@]}"
  if [ "$gpt2" = 1 ]; then
    # torch sends a GEMM with a bias to cuBLASLt, whose split-K GEMMs come with memset nodes.
    (export DISABLE_ADDMM_CUDA_LT=1; bench bench-lt-off --variants graphed --stop "$stop" "${common[@]}")
    for n in 2 4; do
      bench "bench-branches-$n" --variants fused --branches "$n" --stop "$stop" "${common[@]}"
    done
  fi
fi

if want processes; then
  for set in "eager static,deferred,pipelined,nocheck" "compiled compiled,pipelined"; do
    name=processes-${set%% *}
    if [ -s "$dir/$name.json" ]; then say "$name: done before, kept"; continue; fi
    extra=()
    [ "${set%% *}" = compiled ] && extra=(--compile default)
    say "$name: bench --processes 5 --variants ${set#* }"
    "$PY" -m harness bench --variants "${set#* }" --processes 5 "${extra[@]}" "${common[@]}" \
      --json "$dir/$name.json" 2>&1 | tee "$dir/$name.log" || say "$name FAILED; going on"
  done
fi

if want capture; then
  read -r -a names <<<"$captures"
  i=0
  for c in "${names[@]}"; do
    i=$((i + 1))
    variant=${c%%+*}
    case "$variant" in graphed* | fused) [ "$own" = 1 ] || continue ;; esac
    case "$c" in fused+b*) [ "$gpt2" = 1 ] || continue ;; esac
    opts=(--batch 32 --new-tokens 100 --dtype fp32 --matmul-precision high --model "$model")
    case "$c" in
      *+compile) opts+=(--compile default) ;;
      *+b[0-9]*) opts+=(--branches "${c##*+b}") ;;  # fused+bN: N micro-batches
    esac
    case "$variant" in
      compiled) opts+=(--compile default) ;;
      deferred|check-every-k|graphed|graphed-sync|fused|nocheck) opts+=(--stop "$stop") ;;
    esac
    if ls -d "$dir/capture/"*"-$c" >/dev/null 2>&1; then say "capture $i/${#names[@]}: $c done before, kept"; continue; fi
    say "capture $i/${#names[@]}: $c"
    if ! TRACES_DIR="$dir/capture" RUN_NAME="$c" GAPSCOPE_UNTRACED_REPEATS="$repeats" \
        bash scripts/profile.sh "$variant" "${opts[@]}" > "$dir/capture/$c.log" 2>&1; then
      say "capture $c FAILED (see $dir/capture/$c.log); going on"
    fi
    tail -n 3 "$dir/capture/$c.log" | sed 's/^/    /'
  done
fi

if want family; then
  fam=(--new-tokens 100 --dtype fp32 --matmul-precision high --repeats "$repeats" --model "$model")
  for b in $family_batches; do
    bench "bench-ladder-b$b" \
      --variants "$(generic naive,kv,static,compiled,pipelined,hf-generate,graphed-sync,graphed,fused)" \
      --batch "$b" "${fam[@]}"
    for c in ${only_captures:-static compiled pipelined+compile graphed-sync}; do
      [ "$c" != none ] || continue
      case "$c" in graphed* | fused) [ "$own" = 1 ] || continue ;; esac
      variant=${c%%+*} opts=(--batch "$b" "${fam[@]:0:6}" --model "$model")
      case "$c" in compiled | *+compile) opts+=(--compile default) ;; esac
      if ls -d "$dir/capture/"*"-$c-b$b" >/dev/null 2>&1; then say "family capture $c-b$b: done before, kept"; continue; fi
      say "family capture $c at batch $b"
      TRACES_DIR="$dir/capture" RUN_NAME="$c-b$b" GAPSCOPE_UNTRACED_REPEATS="$repeats" \
        bash scripts/profile.sh "$variant" "${opts[@]}" >"$dir/capture/$c-b$b.log" 2>&1 ||
        say "family capture $c-b$b FAILED (see $dir/capture/$c-b$b.log); going on"
    done
  done
fi

if want sizes; then
  for size in $sizes; do
    m=llama:$size
    [ "$size" = small ] && m=llama
    for b in $sizes_batches; do
      bench "bench-sizes-$size-b$b" --variants "$sizes_variants" --batch "$b" --new-tokens 100 \
        --dtype bf16 --repeats "$repeats" --model "$m"
      name=sizes-$size-graphed-sync-b$b
      if ls -d "$dir/capture/"*"-$name" >/dev/null 2>&1; then say "capture $name: done before, kept"; continue; fi
      say "capture $name"
      TRACES_DIR="$dir/capture" RUN_NAME="$name" GAPSCOPE_UNTRACED_REPEATS="$repeats" \
        bash scripts/profile.sh graphed-sync --batch "$b" --new-tokens 100 --dtype bf16 \
        --model "$m" >"$dir/capture/$name.log" 2>&1 || say "capture $name FAILED (see $dir/capture/$name.log); going on"
      tail -n 3 "$dir/capture/$name.log" | sed 's/^/    /'
    done
  done
fi

if want observer; then
  if [ -f "$dir/observer/overhead.md" ]; then say "observer: done before, kept"; else
    say "observer: scripts/overhead.sh --out $dir/observer"
    bash scripts/overhead.sh --out "$dir/observer" --batches "1 8 32" \
      --variants "static deferred compiled pipelined+compile graphed-sync graphed fused" \
      --capture-variants "static compiled graphed-sync graphed fused" --flagsets "node graph" \
      --processes 2 --new-tokens 50 || say "observer FAILED; going on"
  fi
fi

if want results; then
  say "results: $PY -m study $dir -o $dir/results"
  "$PY" -m study "$dir" -o "$dir/results"
fi
say "study in $dir"
