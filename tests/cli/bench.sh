#!/usr/bin/env bash
# qhx bench -m MODEL, end to end on a parity fixture: the table and the --json object (every key
# the docs promise, positive rates), the tokenizer sub-mode still dispatches, bad arguments give
# exit 2 with one line.
# usage: bench.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN="$1/qhx"
FIX="$2/fixtures/parity"
[ -x "$BIN" ] || { echo "no $BIN"; exit 1; }
[ -d "$FIX/qwen35-tiny-f32" ] || { echo "FAIL: no fixtures at $FIX (the test data is part of the tree, under tests/data)" >&2; exit 1; }
T=$(mktemp -d /tmp/qhx_cli_bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

M="$FIX/qwen35-tiny-f32"
"$BIN" bench -m "$M" --pp 16 --tg 4 --reps 1 --bw-passes 0 >"$T/out" 2>"$T/err" || fail "bench table: $(cat "$T/err")"
grep -q "prefill (pp 16)" "$T/out" || fail "table lacks the prefill line: $(cat "$T/out")"
for w in mmap read; do
  "$BIN" bench -m "$M" --pp 16 --tg 4 --reps 2 --threads 2 --weights $w --bw-passes 0 --json >"$T/json" 2>"$T/err" ||
    fail "bench --json --weights $w: $(cat "$T/err")"
  for k in load_ms prefill_tok_s decode_tok_s bandwidth_gbs roofline_ratio peak_rss_mb decode_bytes_per_token; do
    grep -q "\"$k\": " "$T/json" || fail "--json lacks $k: $(cat "$T/json")"
  done
  grep -q "\"weights\": \"$w\"" "$T/json" || fail "--json weights mode: $(cat "$T/json")"
  grep -q '"threads": 2,' "$T/json" || fail "--json threads: $(cat "$T/json")"
  grep -Eq '"decode_tok_s": [1-9]' "$T/json" || fail "decode rate not positive: $(cat "$T/json")"
  [ "$(wc -l <"$T/json")" = 1 ] || fail "--json is not one line"
done
"$BIN" bench -m "$M" --pp 0 --ctx 40 --tg 2 --reps 1 --bw-passes 0 --isa ref --json >"$T/json" 2>"$T/err" ||
  fail "bench --ctx: $(cat "$T/err")"
grep -q '"ctx": 40,' "$T/json" && grep -q '"isa": "ref"' "$T/json" || fail "--ctx/--isa: $(cat "$T/json")"

# --isa A,B: one JSON object per instruction set, in the order given; a bad name in the list is refused
"$BIN" bench -m "$M" --pp 4 --tg 2 --reps 1 --bw-passes 0 --isa ref,best --json >"$T/json" 2>"$T/err" ||
  fail "bench --isa ref,best: $(cat "$T/err")"
[ "$(wc -l <"$T/json")" = 2 ] && head -1 "$T/json" | grep -q '"isa": "ref"' || fail "--isa list: $(cat "$T/json")"
"$BIN" bench -m "$M" --pp 1 --tg 1 --reps 1 --bw-passes 0 --isa ref,z80 >/dev/null 2>"$T/err"; [ $? = 2 ] ||
  fail "bad name in an --isa list"

"$BIN" bench -m "$M" --ctx-compare 8,300 --tg 8 --reps 1 --bw-passes 0 --json >"$T/json" 2>"$T/err" ||
  fail "bench --ctx-compare: $(cat "$T/err")"
grep -q '"ratio_b_over_a": ' "$T/json" && [ "$(wc -l <"$T/json")" = 1 ] || fail "--ctx-compare json: $(cat "$T/json")"

# --profile: the per-op table of the decode step, and in --json the ops (linear among them)
"$BIN" bench -m "$M" --pp 4 --tg 4 --reps 1 --bw-passes 0 --profile >"$T/out" 2>"$T/err" || fail "bench --profile: $(cat "$T/err")"
grep -q '^    linear ' "$T/out" && grep -q '^    attention ' "$T/out" && grep -q 'outside ops' "$T/out" ||
  fail "--profile table: $(cat "$T/out")"
"$BIN" bench -m "$M" --pp 4 --tg 4 --reps 1 --bw-passes 0 --profile --json >"$T/json" 2>"$T/err" || fail "bench --profile --json"
grep -q '"profile": \[{"op": "linear", "calls_per_token": [1-9]' "$T/json" || fail "--profile json: $(cat "$T/json")"
"$BIN" bench -m "$M" --ctx-compare 8,30 --tg 4 --profile >/dev/null 2>"$T/err"; [ $? = 2 ] || fail "--profile with --ctx-compare"

# --streams: one line per count, aggregate = count x per stream; the profile of the batched step
"$BIN" bench -m "$M" --streams 1,3 --pp 4 --tg 6 --reps 2 --profile >"$T/out" 2>"$T/err" || fail "bench --streams: $(cat "$T/err")"
awk '$1 == 3 && $2 > 0 { d = $2 - 3 * $3; ok = d < 0.05 && d > -0.05 } END { exit !ok }' "$T/out" &&
  grep -q '^    linears_multi ' "$T/out" || fail "--streams table: $(cat "$T/out")"
"$BIN" bench -m "$M" --streams 1,2 --pp 4 --tg 2 --reps 1 --json >"$T/json" 2>"$T/err" &&
  grep -q '"streams": \[{"n": 1, "aggregate_tok_s": [0-9.]*}, {"n": 2, ' "$T/json" || fail "--streams json: $(cat "$T/json")"
for bad in 0 1,,2 65 1,2,3,4,5,6,7,8,9 x; do
  "$BIN" bench -m "$M" --streams "$bad" >/dev/null 2>"$T/err"; [ $? = 2 ] && grep -q -- "--streams" "$T/err" || fail "--streams $bad: $(cat "$T/err")"
done

# --image on the Qwen3-VL fixture: 64x96 px -> 4 x 6 patches of 16 -> 6 tokens after the 2x2 merge
# (preprocessor_config.json of the fixture); on a text-only model it is refused with exit 1
VL="$FIX/qwen3vl-tiny-f32"
"$BIN" bench -m "$VL" --image "$VL/image-64x96.png" --pp 4 --tg 2 --reps 2 --bw-passes 0 --json >"$T/json" 2>"$T/err" ||
  fail "bench --image: $(cat "$T/err")"
grep -Eq '"vision_ms": [0-9]' "$T/json" && grep -q '"vision_tokens": ' "$T/json" || fail "--image json: $(cat "$T/json")"
"$BIN" bench -m "$M" --image "$VL/image-64x96.png" --pp 1 --tg 1 --reps 1 --bw-passes 0 >/dev/null 2>"$T/err"
[ $? = 1 ] && grep -q "takes no images" "$T/err" || fail "--image on a text model: $(cat "$T/err")"

"$BIN" bench tokenizer --help >/dev/null 2>&1 || fail "bench tokenizer --help"
"$BIN" bench --pp 4 >/dev/null 2>"$T/err"; [ $? = 2 ] && grep -q "MODEL is required" "$T/err" || fail "missing -m"
"$BIN" bench -m "$M" --weights bogus >/dev/null 2>"$T/err"; [ $? = 2 ] || fail "bad --weights"
"$BIN" bench -m "$M" --isa z80 >/dev/null 2>"$T/err"; [ $? = 2 ] || fail "bad --isa"
"$BIN" bench -m /nonexistent --pp 1 --tg 1 --bw-passes 0 >/dev/null 2>"$T/err"; [ $? = 1 ] || fail "missing model: exit 1"

[ "$fails" = 0 ] && echo "bench: all ok"
exit $((fails > 0))
