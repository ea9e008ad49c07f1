#!/usr/bin/env bash
# profile-all.sh [--osrt] [harness run options]: scripts/profile.sh on every decode variant, one
# after another (never at once: they would share the GPU and each other's timings), then one
# comparison across the runs that worked.
#
# Each variant gets its own run directory traces/<UTC time>-<variant>/ exactly as profile.sh makes
# it; the comparison report goes to traces/<UTC time>-all/. A failing variant does not stop the
# others; the failures are listed at the end and make the exit status 1.
# VARIANTS="static pipelined" replaces the list; the options go to every run unchanged.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"
export PYTHONPATH="${here%/scripts}${PYTHONPATH:+:$PYTHONPATH}"

read -r -a variants <<<"${VARIANTS:-naive kv kv-expandable static compiled pipelined pipelined-seed deferred check-every-k graphed nocheck}"
[ "${#variants[@]}" -gt 0 ] || die 2 "VARIANTS is empty: name at least one variant"
traces=${TRACES_DIR:-traces}
stamp=$(utc_stamp)
# Eleven runs that would all fail the same way: say it once, before the first.
found=$(usable_nsys) || exit $?
nsys=${found#*$'\n'}

runs=()
failed=()
started=$SECONDS
dir_file=$(mktemp)
trap 'rm -f "$dir_file"' EXIT
for i in "${!variants[@]}"; do
  variant=${variants[$i]}
  tag="[$((i + 1))/${#variants[@]}] $variant"
  note "$tag ..."
  t0=$SECONDS
  : >"$dir_file"
  rc=0
  GAPSCOPE_RUN_DIR_FILE=$dir_file NSYS=$nsys bash "$here/profile.sh" "$variant" "$@" || rc=$?
  if [ "$rc" = 0 ]; then
    runs+=("$(cat "$dir_file")")
    note "$tag ok in $((SECONDS - t0)) s (total $((SECONDS - started)) s)"
  else
    where=$(cat "$dir_file")
    failed+=("$variant (exit $rc${where:+, $where})")
    note "$tag FAILED with exit $rc in $((SECONDS - t0)) s (total $((SECONDS - started)) s)"
  fi
done

[ "${#runs[@]}" -gt 0 ] || die 1 "every variant failed: ${failed[*]}"
if why=$(analysis_missing); then
  note "no comparison: analysis.cli is not importable ($why); the runs are ${runs[*]}"
else
  "$PY" -m analysis.cli compare "${runs[@]}" || die 1 "the comparison of ${runs[*]} failed (its message is above)"
  report=$(new_run_dir "$traces" "$stamp-all")
  "$PY" -m analysis.cli report "${runs[@]}" -o "$report" || die 1 "the report into $report failed (its message is above)"
  note "report: $report"
fi
if [ "${#failed[@]}" -gt 0 ]; then
  list=$(printf '%s; ' "${failed[@]}")
  die 1 "${#failed[@]} of ${#variants[@]} variants failed: ${list%; }"
fi
note "all ${#variants[@]} variants captured in $((SECONDS - started)) s"
