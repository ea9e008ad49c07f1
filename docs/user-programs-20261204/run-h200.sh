#!/usr/bin/env bash
# The device call that made this folder's run directories (issue 39): on the H200, from the
# repository's root, after `source .carry/env.sh`, with gpt-fast's and nanoGPT's checkouts (their
# commits in .carry/ext/*/COMMIT, copied there unchanged by `git archive`) under .carry/ext/.
# Two batches side by side on the one GPU (their timings share it): the compiled gpt-fast and
# assisted generate() in one, the other four in the other; then what naming a call costs
# (scripts/host_overhead.py: a module's function through the wrapper, the script's own through
# sys.monitoring; traced means an NVTX push and pop, untraced the host clock).
set -uo pipefail
out=${1:-${OUT:-out/user-programs-20261204}}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export GPT_FAST=$PWD/.carry/ext/gpt-fast NANOGPT=$PWD/.carry/ext/nanoGPT PROGRAM_TIMEOUT=${PROGRAM_TIMEOUT:-240}
mkdir -p "$out"
python3 -c 'import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__, torch.cuda.get_device_name())' >"$out/versions.txt" 2>&1
a=${BATCH_A-gptfast-compiled assisted}
b=${BATCH_B-gptfast-eager nanogpt main-loop main-loop-compiled}
# shellcheck disable=SC2086
bash scripts/user-programs.sh "$out/a" $a >"$out/a.log" 2>&1 &
# shellcheck disable=SC2086
[ -z "$b" ] || bash scripts/user-programs.sh "$out/b" $b >"$out/b.log" 2>&1
wait
[ -n "${SKIP_EXTRAS:-}" ] && exit 0
# A device loop (while-graph: the whole decode one graph launch): the last line's step count is
# the report's (inferred), not the capture's `Step N` ranges (none).
bash scripts/profile.sh while-graph --batch 1 --new-tokens 100 >"$out/while-graph.log" 2>&1
tail -n 2 "$out/while-graph.log" >>"$out/versions.txt"
rm "$out/while-graph.log"
for mode in bare clock ranges main-clock main-ranges; do
  python3 -m scripts.host_overhead --mode "$mode" --calls 100000 --json "$out/overhead.jsonl" >/dev/null 2>>"$out/versions.txt"
done
