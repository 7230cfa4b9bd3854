#!/usr/bin/env bash
# qhx logits / generate: usage errors exit 2, runtime errors exit 1, each with one stderr line.
# Run as: bash model_errors.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FX=$2/fixtures/parity/qwen35-tiny-f32
[ -d "$FX" ] || { echo "FAIL: model_errors: $FX is missing (the test data is part of the tree, under tests/data)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# expect CODE ARGS...: exit code CODE and exactly one line on stderr
expect() {
  local want=$1
  shift
  "$QHX" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$got" != "$want" ] || { [ "$want" != 0 ] && [ "$lines" != 1 ]; }; then
    echo "FAIL: qhx $* -> exit $got (want $want), $lines stderr lines:"
    cat "$tmp/err"
    fail=1
  fi
}

expect 2 logits --ids 1,2 --out "$tmp/x"
expect 2 logits -m "$FX" --out "$tmp/x"
expect 2 logits -m "$FX" --ids 1,2
expect 2 logits -m "$FX" --ids 1,,2 --out "$tmp/x"
expect 2 logits -m "$FX" --ids 1,-2 --out "$tmp/x"
expect 2 logits -m "$FX" --ids 1,2 --prefill 3 --out "$tmp/x"
expect 2 logits -m "$FX" --ids 1,2 --threads 0 --out "$tmp/x"
expect 2 logits -m "$FX" --ids 1,2 --out "$tmp/x" --bogus 1
expect 1 logits -m "$tmp/none" --ids 1,2 --out "$tmp/x"
expect 1 logits -m "$FX" --ids 1,5000 --out "$tmp/x"
expect 1 logits -m "$FX" --ids 1,2 --out "$tmp/no/such/dir/x"
expect 0 logits -m "$FX" --ids 1,2,3 --prefill 2 --threads 2 --out "$tmp/x"
[ "$(stat -c %s "$tmp/x")" = $((3 * 1024 * 4)) ] || { echo "FAIL: logits file size"; fail=1; }

expect 0 generate -m "$FX" --ids 1,2 -n 4 --quiet
expect 0 generate -m "$FX" --ids 1,2 -n 4 --greedy --quiet
expect 0 generate -m "$FX" --ids 1,2 --greedy --print-ids --quiet
expect 2 generate -m "$FX" -n 4 --greedy --print-ids
expect 2 generate -m "$FX" -p hi --ids 1 -n 4
expect 2 generate -m "$FX" -p hi -n -2
expect 2 generate -m "$FX" -p hi --top-p 2
expect 2 generate -m "$FX" -p hi --temp -1
expect 2 generate -m "$FX" -p hi --system s
# -n past the context stops at its end (stop: context); a prompt that fills it is an error
expect 0 generate -m "$FX" --ids 1,2,3 -n 5 --ctx 4 --greedy --json
grep -q '"stop": *"context"' "$tmp/out" && [ "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["ids"]))' "$tmp/out")" = 1 ] \
  || { echo "FAIL: -n past --ctx 4: $(cat "$tmp/out")"; fail=1; }
expect 1 generate -m "$FX" --ids 1,2,3 -n 5 --ctx 3 --quiet
expect 2 generate -m "$FX" --ids 1,2 -n x --greedy --print-ids
expect 1 generate -m "$FX" --ids 99999 -n 4 --greedy --print-ids
expect 0 generate -m "$FX" --ids 1,2 -n 4 --greedy --ignore-eos --print-ids --quiet
[ "$(wc -w <"$tmp/out")" = 4 ] || { echo "FAIL: generate printed: $(cat "$tmp/out")"; fail=1; }
expect 2 generate -m "$FX" --ids 1,2 -n 0 --greedy --print-ids
exit $fail
