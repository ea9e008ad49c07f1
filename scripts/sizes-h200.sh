#!/usr/bin/env bash
# sizes-h200.sh peer|study|suite|sweep: issue 33's runs on the lent H200, one device call a stage
# (a call may run 10 minutes; each stage stops itself before 9.5, keeping what it measured):
#
#   peer   (about 9 minutes) scripts/peer_gptfast.py --model llama-3-8b: gpt-fast's own compiled
#          decode against `fused`, batch 1 and 8, bf16, 100 tokens, 2 processes a side and batch,
#          interleaved (gpt-fast compiles cold once a batch, about 2 minutes at 8B; its second
#          process loads the kernels from the shared cache; PEER_PROCESSES=1: one process a side
#          and batch, about 6 minutes, no spread between processes) -> $OUT/peer.json
#          (rewritten after each process: a run cut short keeps what it measured), $OUT/peer.log
#   study  the study part `sizes` (scripts/study.sh --parts sizes: llama:8b, llama:1b and llama at
#          batch 1, one bench process each, every rung but the compiled ones; graphed-sync
#          captured graph by graph with its twin) -> $OUT/sizes-study.tgz. With 5 rungs it took
#          4 minutes (docs/sizes-20261202/study/study.log); the whole ladder is not timed yet
#   suite  (about 4.5 minutes) the whole GPU suite (pytest -m gpu -n 6), tests/test_gpu_sizes.py
#          among it (every rung against kv on reduced-layer copies at fp32, every rung at 8B in
#          bf16) -> $OUT/gpu-suite.log
#   sweep  (about 2 minutes) scripts/gemv_sweep.py at 8B: is GEMV_TUNED still the fastest launch
#          of each projection, and the head's -> $OUT/gemv.json, $OUT/gemv.log
#
# Run from the repository root or from a copy of it under .wt/NAME (the lead's .carry and
# .peer/gpt-fast are found in either place; GPT_FAST=DIR names another checkout). Then commit
# peer.json and the study directory under docs/sizes-<date>/ and
#   python scripts/peer_gptfast.py --table docs/sizes-<date>/peer.json
#   python -m study docs/sizes-<date> -o docs --part sizes
set -euo pipefail

stage=${1:-}
case "$stage" in peer | study | suite | sweep) ;; *)
  echo "usage: scripts/sizes-h200.sh peer|study|suite|sweep" >&2; exit 2 ;;
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

if [ "$stage" = peer ]; then
  gpt_fast=${GPT_FAST:-$(find_up .peer/gpt-fast/generate.py)/.peer/gpt-fast}
  say "peer: gpt-fast at $gpt_fast"
  timeout 560 "$PY" scripts/peer_gptfast.py --gpt-fast "$gpt_fast" --model llama-3-8b \
    --batches 1,8 --variants fused --processes "${PEER_PROCESSES:-2}" --repeats 5 \
    --workdir "$work/peer" --json "$out/peer.json" 2>&1 | tee "$out/peer.log" || say "peer FAILED or cut short"
fi

if [ "$stage" = study ]; then
  say "study: part sizes"
  GAPSCOPE_PYTHON=$PY timeout 560 bash scripts/study.sh --parts sizes --budget quick \
    --sizes "8b 1b small" --dir "$work/study" || say "study FAILED or cut short; going on"
  tar czf "$out/sizes-study.tgz" -C "$work" study
fi

if [ "$stage" = suite ]; then
  say "suite: the whole GPU suite"
  timeout 560 "$PY" -m pytest -m gpu -n 6 --dist loadfile -p no:cacheprovider -rfE \
    -W ignore::FutureWarning -W ignore::UserWarning tests >"$out/gpu-suite.log" 2>&1 \
    || say "suite FAILED or cut short (see gpu-suite.log)"
  tail -n 8 "$out/gpu-suite.log"
fi

if [ "$stage" = sweep ]; then
  timeout 170 "$PY" scripts/gemv_sweep.py --model llama:8b --json "$out/gemv.json" \
    2>&1 | tee "$out/gemv.log" || say "sweep FAILED or cut short"
fi
say "done: $(ls "$out")"
