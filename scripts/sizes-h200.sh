#!/usr/bin/env bash
# sizes-h200.sh peer|rest|all: issue 33's runs on the lent H200, in two stages of one device call
# each (a call may run 10 minutes; each stage takes about 8):
#
#   peer  scripts/peer_gptfast.py --model llama-3-8b: gpt-fast's own compiled decode against
#         `fused`, batch 1 and 8, bf16, 100 tokens, 2 processes a side and batch, interleaved
#         (gpt-fast compiles cold once a batch, about 2 minutes at 8B; the later process loads
#         its kernels from the shared cache) -> peer.json, peer.log, the table printed
#   rest  the GPU tests of the new sizes (tests/test_gpu_sizes.py: every rung against kv on
#         reduced-layer copies at fp32, every rung at 8B in bf16), then the study part `sizes`
#         (scripts/study.sh --parts sizes: llama, llama:1b, llama:8b at batch 1, one bench process
#         each and graphed-sync captured graph by graph with its twin), then the GEMV sweep at 8B
#         (scripts/gemv_sweep.py: is GEMV_TUNED still the fastest launch, and the head's)
#
# Run from the repository root or from a copy of it under .wt/NAME (the lead's .carry and
# .peer/gpt-fast are found in either place; GPT_FAST=DIR names another checkout). Everything it
# makes goes to $OUT as one tarball a stage (the device tool brings back 8 files at most):
#   $OUT/sizes-peer.tgz   peer/ (peer.json, peer.log)
#   $OUT/sizes-rest.tgz   tests.log, study/ (bench-sizes-*.json and .log, capture/), gemv.json
# Commit them under docs/sizes-<date>/ (peer.json and the study directory), then
#   python scripts/peer_gptfast.py --table docs/sizes-<date>/peer.json
#   python -m analysis.cli study docs/sizes-<date> -o docs --part sizes
set -euo pipefail

stage=${1:-}
case "$stage" in peer | rest | all) ;; *)
  echo "usage: scripts/sizes-h200.sh peer|rest|all" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The first of ROOT and ROOT/../.. (a copy under .wt/NAME) that holds $1, or nothing.
find_up() {
  local d
  for d in "$root" "$root/../.."; do
    if [ -e "$d/$1" ]; then (cd "$d" && pwd); return 0; fi
  done
  return 0
}
if [ -z "${NSYS:-}" ]; then
  base=$(find_up .carry/env.sh)
  if [ -n "$base" ]; then
    cd "$base"  # env.sh finds .carry/ from the working directory
    # shellcheck disable=SC1091
    source .carry/env.sh >/dev/null
    cd "$root"
  fi
fi
export PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}
PY=${GAPSCOPE_PYTHON:-python3}
out=${OUT:-$root/out/sizes}
work=${SIZES_WORK:-/tmp/sizes-h200}
mkdir -p "$out" "$work"
say() { printf '[sizes %4ds] %s\n' "$SECONDS" "$*"; }

if [ "$stage" = peer ] || [ "$stage" = all ]; then
  gpt_fast=${GPT_FAST:-$(find_up .peer/gpt-fast/generate.py)/.peer/gpt-fast}
  mkdir -p "$work/peer"
  say "peer: gpt-fast at $gpt_fast"
  "$PY" scripts/peer_gptfast.py --gpt-fast "$gpt_fast" --model llama-3-8b --batches 1,8 \
    --variants fused --processes 2 --repeats 5 --workdir "$work/peer-cache" \
    --json "$work/peer/peer.json" 2>&1 | tee "$work/peer/peer.log" || say "peer FAILED; going on"
  tar czf "$out/sizes-peer.tgz" -C "$work" peer
fi

if [ "$stage" = rest ] || [ "$stage" = all ]; then
  say "rest: the GPU tests of the new sizes"
  "$PY" -m pytest -m gpu tests/test_gpu_sizes.py -q -p no:cacheprovider 2>&1 \
    | tee "$work/tests.log" | tail -n 5 || true
  say "rest: study part sizes"
  GAPSCOPE_PYTHON=$PY bash scripts/study.sh --parts sizes --budget quick --dir "$work/study" \
    || say "study FAILED; going on"
  say "rest: the GEMV sweep at 8B"
  timeout 150 "$PY" scripts/gemv_sweep.py --model llama:8b --json "$work/gemv.json" \
    || say "sweep FAILED or cut short; going on"
  tar czf "$out/sizes-rest.tgz" -C "$work" tests.log study $( [ -f "$work/gemv.json" ] && echo gemv.json)
fi
say "done: $(ls "$out")"
