#!/usr/bin/env bash
# The device call that made this folder (issue 42), on the H200 from the repository's root after
# `source .carry/env.sh`: two bench processes a configuration (batch 1 and 8 at the small
# Llama, Llama-3.2-1B's and Llama-3-8B's shapes, bf16, 100 tokens; fused, while-fused, mega and
# while-mega side by side in each), the first process of every configuration before the second;
# then what gapscope sees of mega: a node-level capture at 1B's shape (with its untraced twin),
# and the GPU-metrics observer over mega and fused there (DRAM read rate and SMs active a step).
set -uo pipefail
out=${1:-${OUT:-out/mega-20261204}}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$out"
python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__, torch.cuda.get_device_name())' >"$out/versions.txt" 2>&1
for p in 1 2; do
  for size in small 1b 8b; do
    for b in 1 8; do
      echo "gapscope: bench llama:$size batch $b, process $p of 2" >&2
      python3 -m harness bench --variants fused,while-fused,mega,while-mega --model "llama:$size" \
        --dtype bf16 --batch "$b" --new-tokens 100 --repeats 5 \
        --json "$out/bench-mega-$size-b$b-p$p.json" >"$out/bench-mega-$size-b$b-p$p.log" 2>&1
    done
  done
done
export TRACES_DIR="$out/capture"
bash scripts/profile.sh mega --cuda-graph-trace node --model llama:1b --dtype bf16 --batch 1 --new-tokens 100 >"$out/capture-mega.log" 2>&1
for v in mega fused; do
  bash scripts/profile.sh "$v" --metrics=50000 --model llama:1b --dtype bf16 --batch 1 --new-tokens 100 >"$out/metrics-$v.log" 2>&1
done
find "$out/capture" -name '*.qdstrm' -delete
du -sh "$out"/capture/* >>"$out/versions.txt"
