#!/usr/bin/env bash
# profile-tp.sh VARIANT TP [harness run options]: one Nsight Systems capture per rank of a
# tensor-parallel run (`--tp TP` under `torchrun --nproc-per-node TP`, NCCL, one GPU a rank), in
# one new run directory traces/<UTC time>-<variant>-tp<TP>/ (TRACES_DIR replaces traces/):
#   capture_<RANK>.nsys-rep  rank RANK's capture of the harness' window (cudaProfilerStart/Stop)
#   capture_<RANK>.sqlite    its SQLite export, by the same nsys
#   nsys.log                 everything torchrun, nsys and the ranks printed
#   run.json                 rank 0's record (its `tp` holds every rank's tokens), plus `nsys`
#   ranks.txt                the cross-rank table (python -m scripts.ranks), when analysis is importable
#
# One nsys per rank: torchrun --no-python starts TP copies of `nsys profile ... python -m harness
# run`, each with its own RANK, which nsys expands in `-o capture_%q{RANK}`. The flags are
# profile.sh's (lib.sh capture_flags, node-level graph trace). Each export counts its times from
# its own session start; `python -m scripts.ranks` aligns them (docs/METRICS.md, "Ranks").
#
# Exit status: 0 done; 2 bad usage; the run's status when torchrun fails; 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"
export PYTHONPATH="${here%/scripts}${PYTHONPATH:+:$PYTHONPATH}"

usage="usage: scripts/profile-tp.sh VARIANT TP [harness run options, e.g. --model llama --batch 1]"
{ [ $# -ge 2 ] && [[ $1 != -* ]]; } || die 2 "$usage"
variant=$1
tp=$2
shift 2
[[ $tp =~ ^[1-9][0-9]*$ ]] || die 2 "TP must be a whole number of ranks, got '$tp': $usage"
for arg in "$@"; do
  case $arg in
    --variant | --variant=* | --out | --out=* | --tp | --tp=* | --kineto | --kineto=*)
      die 2 "profile-tp.sh sets $arg itself (or does not take it): $usage" ;;
  esac
done
# Bad options are answered before nsys or a GPU is looked for.
why=$("$PY" -c 'import sys
from harness.config import ConfigError, RunConfig, validate
try:
    validate(RunConfig(variant=sys.argv[1], tp=int(sys.argv[2])))
except ConfigError as e:
    sys.exit(str(e))' "$variant" "$tp" 2>&1) || die 2 "$why: $usage"

found=$(usable_nsys) || exit $?
nsys_ver=${found%%$'\n'*} nsys=${found#*$'\n'}
require_gpu "$@"

run=$(new_run_dir "${TRACES_DIR:-traces}" "$(utc_stamp)-${RUN_NAME:-$variant}-tp$tp")
note "run directory: $run"
mapfile -t flags < <(capture_flags cuda,nvtx node)
cmd=("$PY" -m torch.distributed.run --standalone --nproc-per-node "$tp" --no-python
  "$nsys" profile "${flags[@]}" -o "$run/capture_%q{RANK}"
  "$PY" -m harness run --variant "$variant" --tp "$tp" --out "$run" "$@")
note "capturing: ${cmd[*]}"
rc=0
"${cmd[@]}" 2>&1 | tee "$run/nsys.log" || rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || die "$rc" "the ranks under nsys failed with exit code $rc: $(last_message "$run/nsys.log") (all of it in $run/nsys.log)"
[ -f "$run/run.json" ] || die 1 "rank 0 wrote no $run/run.json: see $run/nsys.log"

for ((r = 0; r < tp; r++)); do
  rep=$run/capture_$r.nsys-rep
  [ -f "$rep" ] || die 1 "rank $r left no $rep: its window never opened (see $run/nsys.log)"
  rc=0
  "$nsys" export --type sqlite -o "$run/capture_$r.sqlite" "$rep" 2>&1 | tee -a "$run/nsys.log" ||
    rc=${PIPESTATUS[0]}
  { [ "$rc" = 0 ] && [ -f "$run/capture_$r.sqlite" ]; } ||
    die 1 "nsys $nsys_ver could not export $rep to SQLite (exit $rc): see $run/nsys.log"
done
json_merge "$run/run.json" nsys "$(nsys_json "$nsys_ver" "$nsys" "${cmd[@]}")"

if why=$(analysis_missing); then
  note "no cross-rank table: analysis.cli is not importable ($why); the captures are in $run"
else
  "$PY" -m scripts.ranks "$run" | tee "$run/ranks.txt" ||
    die 1 "the cross-rank analysis failed on $run (its message is above)"
fi
note "done: $run"
