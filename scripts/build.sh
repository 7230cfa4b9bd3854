#!/usr/bin/env bash
# make, make demo, make install: builds the given targets of a configured build folder quietly.
# The compiler's lines go to DIR/build.log; what is shown is the warnings and errors in it and one
# closing line (a failure shows the log's last lines). The sub-make's "Entering directory" lines
# come from the outer make's MAKEFLAGS/MAKELEVEL, which are not passed on. VERBOSE=1 shows all.
#   scripts/build.sh DIR JOBS TARGET...
set -euo pipefail
dir=$1 jobs=$2
shift 2
unset MAKEFLAGS MFLAGS MAKELEVEL
if [ "${VERBOSE:-}" = 1 ]; then
  exec cmake --build "$dir" -j "$jobs" --target "$@"
fi
log=$dir/build.log
start=$(date +%s)
if ! cmake --build "$dir" -j "$jobs" --target "$@" >"$log" 2>&1; then
  grep -E '(warning|error):' "$log" | head -n 40 || true
  echo "----- the end of $log:"
  tail -n 25 "$log"
  echo "build: failed (the whole output: $log)" >&2
  exit 1
fi
grep -E -A3 ': warning:' "$log" || true
echo "build: $* ($(( $(date +%s) - start )) s; compiler output in $log)"
