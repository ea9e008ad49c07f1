#!/usr/bin/env bash
# The device calls that make this folder's measurements (issue 42), on the GPU machine from the
# repository's root after `source .carry/env.sh`:
#   DEADLINE_S=270 PARTS="tests bench" bash docs/mega-20261204/run-h200.sh "$OUT"
# PARTS, in the order given (default "tests bench"):
#   tests    pytest -m gpu tests/test_gpu_mega.py (gpu-mega.log)
#   suite    the whole GPU suite, pytest -m gpu -n 8 (gpu-suite.log)
#   bench    bench processes: fused, while-fused, mega and while-mega side by side in each (bf16,
#            100 tokens, 5 repeats), one JOBS entry SIZE:BATCH:PROCESS a process; the default:
#            one row first at the small Llama, Llama-3.2-1B's and Llama-3-8B's shapes (the
#            issue's goals), both processes, then eight rows
#   capture  what gapscope sees of mega at Llama-3.2-1B's shape, one row: a node-level capture
#            with its untraced twin, and the GPU-metrics observer over mega and fused (DRAM read
#            rate, SMs active a step)
#   registers the kernel's registers and spills as the device's Triton compiles it
# Each piece runs under what is left of DEADLINE_S; everything lands in one archive, rewritten
# after each piece (the device returns 8 files at most, and a call cut short returns what it had).
set -uo pipefail
out=${1:-${OUT:-out/mega-20261204}}
deadline=$(( $(date +%s) + ${DEADLINE_S:-270} ))
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
work=$(mktemp -d)
pack() { tar czf "$out/mega.tgz" -C "$work" . ; }
left() { echo $(( deadline - $(date +%s) )); }
enough() { [ "$(left)" -gt "${1:-20}" ] || { echo "deadline: stopped before $2" >>"$work/versions.txt"; pack; exit 0; }; }
mkdir -p "$out"
python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__, torch.cuda.get_device_name())' >"$work/versions.txt" 2>&1
jobs=${JOBS:-"small:1:1 1b:1:1 small:1:2 1b:1:2 8b:1:1 8b:1:2 small:8:1 1b:8:1 8b:8:1 small:8:2 1b:8:2 8b:8:2"}
for part in ${PARTS:-tests bench}; do
  case $part in
    tests)
      enough 20 tests
      timeout "$(left)" python3 -m pytest -q -m gpu tests/test_gpu_mega.py >"$work/gpu-mega.log" 2>&1 ;;
    suite)
      enough 60 suite
      timeout "$(left)" python3 -m pytest -m gpu -n 8 -q >"$work/gpu-suite.log" 2>&1 ;;
    bench)
      for job in $jobs; do
        IFS=: read -r size b p <<<"$job"
        enough 20 "$size b$b p$p"
        echo "gapscope: bench llama:$size batch $b, process $p ($(left) s left)" >&2
        timeout "$(left)" python3 -m harness bench --variants fused,while-fused,mega,while-mega \
          --model "llama:$size" --dtype bf16 --batch "$b" --new-tokens 100 --repeats 5 \
          --json "$work/bench-mega-$size-b$b-p$p.json" >"$work/bench-mega-$size-b$b-p$p.log" 2>&1
        pack
      done ;;
    capture)
      enough 60 capture
      TRACES_DIR="$work/capture" timeout "$(left)" bash scripts/profile.sh mega \
        --cuda-graph-trace node --model llama:1b --dtype bf16 --batch 1 --new-tokens 100 \
        >"$work/capture-mega.log" 2>&1
      for v in mega fused; do
        enough 40 "metrics $v"
        TRACES_DIR="$work/capture" timeout "$(left)" bash scripts/profile.sh "$v" --metrics=50000 \
          --model llama:1b --dtype bf16 --batch 1 --new-tokens 100 >"$work/metrics-$v.log" 2>&1
      done
      find "$work/capture" -name '*.qdstrm' -delete ;;
    registers)
      enough 30 registers
      timeout "$(left)" python3 docs/mega-20261204/registers.py >"$work/registers-device.json" \
        2>"$work/registers-device.log" ;;
    *) echo "unknown part $part" >>"$work/versions.txt" ;;
  esac
  pack
done
