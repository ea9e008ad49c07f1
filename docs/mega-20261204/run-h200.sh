#!/usr/bin/env bash
# The device call that made this folder's bench files (issue 42), on the H200 from the repository's
# root after `source .carry/env.sh`, in one call of a few minutes: the mega GPU tests, then bench
# processes (fused, while-fused, mega and while-mega side by side in each; bf16, 100 tokens, 5
# repeats) at the small Llama, Llama-3.2-1B's and Llama-3-8B's shapes, batch 1 and 8. Each piece runs under what is left of
# DEADLINE_S; everything lands in one archive, rewritten after each piece (the device returns 8
# files at most, and a call cut short returns what it had).
set -uo pipefail
out=${1:-${OUT:-out/mega-20261204}}
deadline=$(( $(date +%s) + ${DEADLINE_S:-270} ))
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
work=$(mktemp -d)
pack() { tar czf "$out/mega.tgz" -C "$work" . ; }
left() { echo $(( deadline - $(date +%s) )); }
mkdir -p "$out"
python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__, torch.cuda.get_device_name())' >"$work/versions.txt" 2>&1
timeout 110 python3 -m pytest -q -m gpu tests/test_gpu_mega.py >"$work/gpu-mega.log" 2>&1
pack
# The goal shapes at batch 1 first (both processes), then 8B, then batch 8.
for job in small:1:1 1b:1:1 small:1:2 1b:1:2 8b:1:1 8b:1:2 small:8:1 1b:8:1 8b:8:1 small:8:2 \
           1b:8:2 8b:8:2; do
  IFS=: read -r size b p <<<"$job"
  [ "$(left)" -gt 20 ] || { echo "deadline: stopped before $size b$b p$p" >>"$work/versions.txt"; pack; exit 0; }
  echo "gapscope: bench llama:$size batch $b, process $p of 2 ($(left) s left)" >&2
  timeout "$(left)" python3 -m harness bench --variants fused,while-fused,mega,while-mega \
    --model "llama:$size" --dtype bf16 --batch "$b" --new-tokens 100 --repeats 5 \
    --json "$work/bench-mega-$size-b$b-p$p.json" >"$work/bench-mega-$size-b$b-p$p.log" 2>&1
  pack
done
