#!/usr/bin/env bash
# user-programs.sh [OUT] [NAME...]: `gapscope profile` with no flags on the un-annotated example
# programs (issue 27), one after another, then one plain `nsys profile --trace=cuda` capture of an
# un-annotated program with no NVTX at all; what the fixtures need packed into one archive,
# OUT/user-programs.tar (OUT: the argument, else $OUT, else out/user-programs), and a log of the
# batch beside it. The work is done under $TMPDIR, so nothing else lands in OUT.
#
#   nokv      examples/nokv_loop.py: eager, no KV cache, torch.multinomial (steps inferred
#             between blocking calls; the twin marks the sync's line)
#   sample    examples/sample_generate.py: generate() sampling on a Llama config (a step a
#             forward; two calls)
#   window    examples/window_generate.py: the program's own torch.cuda.profiler window around
#             the timed generate() (the twin keeps the window's steps)
#   compiled  examples/decode_loop.py --compile: torch.compile(mode="reduce-overhead"), one CUDA
#             graph a token (steps inferred at each graph replay; the twin marks each replay)
#   plain     nsys profile --trace=cuda of examples/nokv_loop.py, exported, then analysed: no
#             NVTX_EVENTS table in the export
#
# The loops people write themselves (issue 39; docs/user-programs-20261204/programs/, drivers of
# someone else's code imported as a cloned repository is: its folder put on sys.path):
#   gptfast-eager, gptfast-compiled  gpt-fast's own generate() (GPT_FAST: its checkout),
#             eager and compiled as its main() does
#   nanogpt   nanoGPT's own GPT.generate (NANOGPT: its checkout)
#   main-loop, main-loop-compiled   a decode loop and its model written in the script (__main__)
#   assisted  transformers' generate() with an assistant model (speculative decoding)
#
# Each program is small (GPT-2/Llama-shaped ~125M, a few dozen tokens): each profile is one to
# two minutes on the H200, mostly process starts (a program whose files open no window is
# captured whole at once; one that opens it, in its window), the export and three untraced
# twin runs; the compiled loop compiles once cold, then from inductor's cache. Names pick a
# subset, to split the batch over two calls. A program that fails does not stop the others; its
# log still comes back. Run from the repository root, on the GPU machine after
# `source .carry/env.sh`.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=${here%/scripts}
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
out=${1:-${OUT:-out/user-programs}}
shift || true
names=("$@")
[ "${#names[@]}" -gt 0 ] || names=(nokv sample window compiled plain)
py=${PYTHON:-python3}
# PROGRAM_ARGS="--device cpu --size tiny" with NSYS=tests/fake_nsys/nsys: a dry run on a CPU.
read -r -a extra <<<"${PROGRAM_ARGS:-}"
# PROGRAM_TIMEOUT=S: each `gapscope profile` stopped after S seconds (what it wrote is packed).
limit=()
[ -n "${PROGRAM_TIMEOUT:-}" ] && limit=(timeout "$PROGRAM_TIMEOUT")
work=$(mktemp -d "${TMPDIR:-/tmp}/user-programs.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/traces"
batch_log="$out/user-programs.log"
log() { echo "user-programs: $*" | tee -a "$batch_log" >&2; }

mine=docs/user-programs-20261204/programs
declare -A programs=(
  [gptfast-eager]="$mine/gptfast_gen.py --gpt-fast ${GPT_FAST:-gpt-fast} --new-tokens 100 --calls 3"
  [gptfast-compiled]="$mine/gptfast_gen.py --gpt-fast ${GPT_FAST:-gpt-fast} --compile --new-tokens 100 --calls 3"
  [nanogpt]="$mine/nanogpt_gen.py --nanogpt ${NANOGPT:-nanoGPT} --new-tokens 100 --samples 2"
  [main-loop]="$mine/main_loop.py --new-tokens 100 --calls 3"
  [main-loop-compiled]="$mine/main_loop.py --compile --new-tokens 100 --calls 3"
  [assisted]="$mine/assisted.py --new-tokens 96 --calls 2"
  [nokv]="examples/nokv_loop.py --new-tokens 64"
  [sample]="examples/sample_generate.py --new-tokens 48"
  [window]="examples/window_generate.py --new-tokens 32"
  [compiled]="examples/decode_loop.py --compile --new-tokens 48"
)

started=$SECONDS
for name in "${names[@]}"; do
  t0=$SECONDS
  if [ "$name" = plain ]; then
    # No NVTX traced, none emitted: the export has no NVTX_EVENTS table.
    nsys_bin=${NSYS:-nsys}
    "$nsys_bin" profile --trace=cuda --sample=none --cpuctxsw=none --force-overwrite=true \
      -o "$work/plain" "$py" examples/nokv_loop.py --new-tokens 32 "${extra[@]}" \
      >"$work/plain.log" 2>&1
    "$nsys_bin" export --type sqlite --force-overwrite=true -o "$work/plain.sqlite" \
      "$work/plain.nsys-rep" >>"$work/plain.log" 2>&1
    "$py" -m analysis.cli analyze "$work/plain.sqlite" >"$work/plain-analyze.txt" 2>&1
    rc=$?
  else
    read -r -a cmd <<<"${programs[$name]}"
    ${limit[@]+"${limit[@]}"} "$py" -m analysis.cli profile --name "$name" --traces-dir "$work/traces" -- \
      "$py" "${cmd[@]}" "${extra[@]}" >"$work/$name.log" 2>&1
    rc=$?
  fi
  log "$name: exit $rc in $((SECONDS - t0)) s (total $((SECONDS - started)) s)"
  tail -n 4 "$work/$name.log" 2>/dev/null | tee -a "$batch_log" >&2
done

# What comes back: per run directory its capture (xz), run.json, untraced_steps.json, report.md
# and nsys.log; the plain capture (xz), the logs. One archive, two folders deep at most.
pack="$work/pack"
mkdir -p "$pack"
for run in "$work"/traces/*/; do
  [ -d "$run" ] || continue
  dest="$pack/$(basename "$run")"
  mkdir -p "$dest"
  for f in run.json untraced_steps.json report.md nsys.log host_functions.txt functions.json \
      "$run"/own_code-*.json; do
    f=$(basename "$f")
    [ -f "$run/$f" ] && cp "$run/$f" "$dest/"
  done
  # The whole `gapscope profile` output of the program the directory is named after.
  name=${dest##*Z-}
  [ -f "$work/$name.log" ] && cp "$work/$name.log" "$dest/profile.log"
  [ -f "$run/capture.sqlite" ] && xz -9 -T0 -c "$run/capture.sqlite" >"$dest/capture.sqlite.xz"
  for k in "$run"/twin/*/; do  # the twin runs' own files (their logs' last lines say enough)
    [ -d "$k" ] && tail -n 20 "$k/program.log" >"$dest/twin-$(basename "$k").log" 2>/dev/null
  done
done
[ -f "$work/plain.sqlite" ] && xz -9 -T0 -c "$work/plain.sqlite" >"$pack/plain.sqlite.xz"
cp "$work"/*.log "$work"/*.txt "$pack/" 2>/dev/null
tar -C "$pack" -cf "$out/user-programs.tar" .
log "done in $((SECONDS - started)) s: $out/user-programs.tar"
