#!/usr/bin/env bash
# The host table's captures on a GPU machine, in one batch (issue 28; docs/METRICS.md, "Host
# time"): each program under `gapscope profile` as a user runs it, its untraced twin, and what
# the means cost. Run from the repository root with nsys at hand (on the lent H200:
# `source .carry/env.sh` first); it writes everything under $OUT, at most 8 files:
#
#   gen.tar        generate() on a Llama shape, dynamic cache, sampling (top-k, top-p,
#                  temperature, repetition penalty), batch 2, with no flags at all (the program
#                  opens no capture range: gapscope captures it again with --range all, as on a
#                  user's first run), its twin; GPT-2 generate() greedy, dynamic cache, batch 8;
#                  the Llama one again without the host functions (the wrapper's traced cost)
#   loop.tar       examples/decode_loop.py (toy_lm, bf16, top-p sampling), eager: its step
#                  function named (toy_lm:decode_one_token), with its twin; and with no flags
#   harness.tar    the harness' static and kv rungs under `gapscope profile` (their own Step N
#                  ranges and window, the twin) at the committed observer captures' configuration
#                  (batch 8, 50 tokens, steps 31-50): RESULTS.md's part `host` sets their bounds
#                  beside those captures' graphed, graphed-sync and compiled
#   sampling.tar   the Llama generate() under nsys's Python sampling (exported with
#                  --include-blobs=true) and without it, the same function trace in both
#   overhead.jsonl a call's cost: bare, through the hook's wrapper (its clock; its NVTX ranges,
#                  untraced and under nsys) and through nsys's own function-trace wrapper
#   batch.log      all it printed
#
# Each run directory in a tar keeps run.json, untraced_steps.json, report.md, summary.json,
# nsys.log, functions.json, host_functions.txt and capture.sqlite.xz. The stages run in the order
# below, most needed first; one that would start after HOST_BATCH_BUDGET_S (default 480 s) is
# skipped, said in the log, and the packing always runs. Expected time on the H200: about 6 to 7
# minutes (python and transformers start about 15 times; small models, 32-50 tokens).
# HOST_BATCH_DRY=1: a dry run on a CPU with the stand-in nsys (tests/fake_nsys), tiny models.
set -uo pipefail

OUT=${OUT:?set OUT to the directory to write into}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
PY=${GAPSCOPE_PYTHON:-python3}
NSYS_BIN=${NSYS:-nsys}
BUDGET_S=${HOST_BATCH_BUDGET_S:-480}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
WORK=$(mktemp -d)
T=$WORK/traces
mkdir -p "$T" "$OUT"
exec > >(tee -a "$OUT/batch.log") 2>&1
START=$SECONDS

step() { echo "== $(date -u +%H:%M:%S) +$((SECONDS - START))s $*"; }
# stage NAME: false (and said) once the budget is spent, so the caller skips it.
stage() {
  if (( SECONDS - START > BUDGET_S )); then
    step "skipped: $1 (past the ${BUDGET_S} s budget)"
    return 1
  fi
  step "$1"
}
gs() { "$PY" -m analysis.cli "$@"; }
FORWARD='^transformers\.models\.[\w.]+\.\w+(?:ForCausalLM|LMHeadModel)\.forward$'
LLAMA=(examples/generate.py --model llama --cache dynamic --sample --batch 2 --new-tokens 32
       --warmup 0)
GPT2=(examples/generate.py --model gpt2 --cache dynamic --batch 8 --new-tokens 32 --warmup 0)
LOOP=(examples/decode_loop.py --top-p 0.9 --runs 2 --new-tokens 48)
RUNG=(--batch 8 --new-tokens 50 --window 30:50)
CPU=()
if [ "${HOST_BATCH_DRY:-0}" = 1 ]; then
  LLAMA+=(--device cpu --size tiny); GPT2+=(--device cpu --size tiny)
  LOOP+=(--device cpu --tiny); RUNG+=(--device cpu --model tiny); CPU=(--device cpu)
fi

step "start: $(git rev-parse --short HEAD 2>/dev/null) on $(nvidia-smi --query-gpu=name \
  --format=csv,noheader 2>/dev/null | head -1), nsys $("$NSYS_BIN" --version 2>&1 | tail -1)"

stage "generate(), Llama shape, sampling, no flags: the host table traced and untraced" &&
  gs profile --name gen-llama-sampled --twin-runs 2 --traces-dir "$T" -- "$PY" "${LLAMA[@]}"

stage "an eager loop, its step function named, traced and untraced" &&
  gs profile --name loop-eager-fn --range all --twin-runs 2 \
    --step-function toy_lm:decode_one_token --traces-dir "$T" -- "$PY" "${LOOP[@]}"

for variant in static kv; do
  # The harness writes its run.json (its config) into the run directory: the ladder part's
  # pairs. bash's own arguments after the script (the dry run's --device cpu) are unused.
  stage "the harness' $variant rung under gapscope profile" &&
    gs profile --name "$variant" --twin-runs 1 --traces-dir "$T" -- bash -c \
      "exec $PY -m harness run --variant $variant ${RUNG[*]} --out \"\$GAPSCOPE_RUN_DIR\"" \
      "${CPU[@]}"
done

stage "generate(), GPT-2, greedy" &&
  gs profile --name gen-gpt2-greedy --range all --no-twin --traces-dir "$T" -- \
    "$PY" "${GPT2[@]}"

if stage "a call's cost: bare, the hook's wrapper, nsys's wrapper"; then
  for mode in bare clock ranges; do
    "$PY" -m scripts.host_overhead --mode "$mode" --calls 100000 --json "$OUT/overhead.jsonl"
  done
  echo '[{"module": "scripts.host_overhead", "functions": ["target"]}]' > "$WORK/target.json"
  "$NSYS_BIN" profile --trace=nvtx --sample=none --cpuctxsw=none --force-overwrite=true \
    -o "$WORK/ranges" "$PY" -m scripts.host_overhead --mode ranges --calls 100000 \
    --json "$OUT/overhead.jsonl"
  "$NSYS_BIN" profile --trace=nvtx --sample=none --cpuctxsw=none --force-overwrite=true \
    --python-functions-trace="$WORK/target.json" -o "$WORK/nsys" \
    "$PY" -m scripts.host_overhead --mode nsys --calls 100000 --json "$OUT/overhead.jsonl"
fi

S=$WORK/sampling
mkdir -p "$S"
FUNCTIONS=$(ls -d "$T"/*-gen-llama-sampled 2>/dev/null | head -1)/functions.json
for mode in plain sampled; do
  [ -f "$FUNCTIONS" ] || break
  stage "the Llama generate() under nsys, $mode (Python sampling's cost, its frames)" || break
  cp "$FUNCTIONS" "$S/functions.json"
  extra=()
  [ "$mode" = sampled ] && extra=(--python-sampling=true --python-sampling-frequency=1000)
  "$NSYS_BIN" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite=true \
    --python-functions-trace="$S/functions.json" "${extra[@]}" -o "$S/$mode" \
    "$PY" "${LLAMA[@]}" > "$S/$mode.log" 2>&1
  "$NSYS_BIN" export --type sqlite --include-blobs=true --force-overwrite=true \
    -o "$S/$mode.sqlite" "$S/$mode.nsys-rep" >> "$S/$mode.log" 2>&1
  gs analyze "$S/$mode.sqlite" --steps "$FORWARD" > "$S/$mode.txt" 2>&1
  xz -6 -T0 "$S/$mode.sqlite"
  rm -f "$S/$mode.nsys-rep"
done

stage "the same loop with no flags (steps inferred)" &&
  gs profile --name loop-eager --traces-dir "$T" -- "$PY" "${LOOP[@]}"

stage "the Llama generate() without the host functions (the wrapper's traced cost)" &&
  gs profile --name gen-llama-sampled-nohost --range all --no-twin --no-host-functions \
    --traces-dir "$T" -- "$PY" "${LLAMA[@]}"

step "packing"
KEEP=(run.json untraced_steps.json report.md summary.json nsys.log functions.json
      host_functions.txt capture.sqlite.xz)
pack() {  # pack NAME DIR...: each run directory's small files and its capture, xz'd
  local name=$1; shift
  local staging=$WORK/pack/$name
  mkdir -p "$staging"
  for d in "$@"; do
    [ -d "$d" ] || continue
    [ -f "$d/capture.sqlite" ] && xz -6 -T0 -k "$d/capture.sqlite"
    mkdir -p "$staging/$(basename "$d")"
    for f in "${KEEP[@]}"; do
      [ -f "$d/$f" ] && cp "$d/$f" "$staging/$(basename "$d")/"
    done
  done
  tar -C "$WORK/pack" -cf "$OUT/$name.tar" "$name"
}
pack gen "$T"/*-gen-llama-sampled "$T"/*-gen-gpt2-greedy "$T"/*-gen-llama-sampled-nohost
pack loop "$T"/*-loop-eager-fn "$T"/*-loop-eager
pack harness "$T"/*-static "$T"/*-kv
tar -C "$WORK" -cf "$OUT/sampling.tar" sampling
step "done: $(ls "$OUT" | tr '\n' ' ')"
