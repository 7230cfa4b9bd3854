#!/usr/bin/env bash
# Constrained output (--grammar, --json-schema, --json-object) cut by -n or by the context before
# the grammar's end: the partial text stays printed (and in --json, with stop "length" or
# "context"), one stderr line says the output is incomplete (also under --quiet), and the exit
# status is 3; output that ends by the grammar within -n, and unconstrained output cut by -n,
# exit 0 without that line.
# Run as: bash structured_cut.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
A=$2/fixtures/parity/qwen35-tiny-f32
[ -d "$A" ] || { echo "FAIL: structured_cut: $A missing" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_structured_cut.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
printf 'root ::= answer "."\nanswer ::= "yes" | "no" | "maybe"\n' >"$tmp/yn.gbnf"
printf 'root ::= "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l"\n' >"$tmp/long.gbnf"

# cut CODE NEEDLE ARGS...: exit 3, one "incomplete" line naming NEEDLE, the partial text printed
cut() {
  local needle=$1; shift
  timeout 120 "$QHX" generate -m "$A" -p "Well?" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  [ $rc = 3 ] || bad "$*: exit $rc, want 3: $(cat "$tmp/err")"
  [ "$(grep -c "the output is incomplete" "$tmp/err")" = 1 ] || bad "$*: no single 'incomplete' line: $(cat "$tmp/err")"
  grep -q -- "$needle" "$tmp/err" || bad "$*: the line lacks '$needle': $(cat "$tmp/err")"
}
cut "before the end of the grammar; raise -n" -n 1 --grammar "$tmp/long.gbnf" --greedy
[ "$(tr -d '\n' <"$tmp/out")" = a ] || bad "-n 1 of 'abc...': printed '$(cat "$tmp/out")'"
cut "after 3 tokens" -n 3 --grammar "$tmp/long.gbnf" --greedy --quiet
[ "$(grep -c . "$tmp/err")" = 1 ] || bad "--quiet: more than the one line: $(cat "$tmp/err")"
cut "JSON object" -n 4 --json-object --greedy
cut "JSON the schema asks for" -n 2 --json-schema '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}' --temp 1 --seed 3
# --json: the object is printed, with stop length, then the same exit status
cut "JSON object" -n 5 --json-object --greedy --json
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["stop"] == "length" and j["n_generated"] == 5, j' "$tmp/out" || bad "--json of a cut output: $(cat "$tmp/out")"
# cut by the context: stop "context", and the line points at --ctx too
cut "or --ctx" --ctx 8 -n 100 --grammar "$tmp/long.gbnf" --greedy --json
grep -q '"stop":"context"' "$tmp/out" || bad "cut by the context: $(cat "$tmp/out")"

# complete within -n: exit 0, no line
for seed in 1 2; do
  timeout 120 "$QHX" generate -m "$A" -p "Well?" -n 20 --grammar "$tmp/yn.gbnf" --temp 1.5 --seed $seed >"$tmp/out" 2>"$tmp/err" ||
    bad "a complete grammar output exited $?: $(cat "$tmp/err")"
  ! grep -q "incomplete" "$tmp/err" || bad "a complete output called incomplete: $(cat "$tmp/out")"
done
timeout 120 "$QHX" generate -m "$A" -p "Well?" -n 12 --grammar "$tmp/long.gbnf" --greedy --quiet >"$tmp/out" 2>"$tmp/err" ||
  bad "a grammar ending exactly at -n exited $?: $(cat "$tmp/err")"
[ "$(tr -d '\n' <"$tmp/out")" = abcdefghijkl ] || bad "exactly -n: '$(cat "$tmp/out")'"
# unconstrained output cut by -n is no error
timeout 120 "$QHX" generate -m "$A" -p "Well?" -n 3 --greedy >"$tmp/out" 2>"$tmp/err" || bad "plain -n 3 exited $?"
! grep -q "incomplete" "$tmp/err" || bad "plain -n 3 called incomplete"

[ $fail = 0 ] && echo "structured_cut: ok"
exit $fail
