#!/usr/bin/env bash
# export.sh CAPTURE.nsys-rep [OUT.sqlite]: re-export an existing capture to the SQLite file the
# analysis reads (default: next to it, same name). Use the nsys that captured it: an older one
# cannot read a newer .nsys-rep (2024.2 fails on 2025.3 captures), and `nsys export` never
# overwrites, so remove a stale .sqlite first.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

{ [ $# -ge 1 ] && [ $# -le 2 ]; } || die 2 "usage: scripts/export.sh CAPTURE.nsys-rep [OUT.sqlite]"
rep=$1
[ -f "$rep" ] || die 2 "no such capture: $rep"
[[ $rep == *.nsys-rep ]] || die 2 "$rep is not a .nsys-rep (a .qdstrm must be imported first: QdstrmImporter -i FILE.qdstrm)"
out=${2:-${rep%.nsys-rep}.sqlite}
[ ! -e "$out" ] || die 2 "$out exists: remove it or name another output"

found=$(usable_nsys) || exit $?
nsys_ver=${found%%$'\n'*} nsys=${found#*$'\n'}
"$nsys" export --type sqlite -o "$out" "$rep" ||
  die 1 "nsys $nsys_ver could not export $rep (message above): export it with the nsys version that captured it"
[ -f "$out" ] || die 1 "nsys export exited 0 but wrote no $out"
note "exported: $out"
