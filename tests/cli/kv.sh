#!/usr/bin/env bash
# --kv f32|f16|q8 (the KV cache element type) on generate, chat, logits, bench and parity: a bad
# value is a usage error (exit 2); f16 is the default and really runs (its logits differ from
# f32's, within the documented bound, and the greedy tokens do not); a bundle's "kv_cache" is
# its default and --kv overrides it; qhx parity gates f32 unless told, and an f16 cache passes
# the exact greedy gate on both families.
# Run as: bash kv.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1
DATA=$2
QHX=$BIN/qhx
FX=$DATA/fixtures/parity
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

[ -f "$FX/qwen35-tiny-f32/golden.json" ] || { echo "FAIL: kv: no fixtures under $FX (the test data is part of the tree, under tests/data)" >&2; exit 1; }

expect_rc() { # expected-rc message-substring cmd...
  local want=$1 needle=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  [ "$rc" = "$want" ] || bad "'$*' exited $rc, expected $want: $out"
  case "$out" in *"$needle"*) ;; *) bad "'$*' said '$out', expected '$needle'" ;; esac
}

F32=$FX/qwen35-tiny-f32
VL=$FX/qwen3vl-tiny-f32
IDS=961,204,30,198,500,962,198,17,4,999,12,40,77

# ---- usage ----------------------------------------------------------------------------------------
for v in q4 F16 ""; do
  expect_rc 2 "--kv: '$v' is not f32, f16 or q8" "$QHX" generate -m "$F32" --ids 1,2 -n 1 --kv "$v"
  expect_rc 2 "--kv: '$v' is not f32, f16 or q8" "$QHX" chat -m "$F32" --kv "$v"
  expect_rc 2 "--kv: '$v' is not f32, f16 or q8" "$QHX" logits -m "$F32" --ids 1,2 --out "$tmp/x" --kv "$v"
  expect_rc 2 "--kv: '$v' is not f32, f16 or q8" "$QHX" bench -m "$F32" --kv "$v"
  expect_rc 2 "--kv: '$v' is not f32, f16 or q8" "$QHX" parity -m "$F32" --golden "$F32" --kv "$v"
done
expect_rc 2 "--kv" "$QHX" generate -m "$F32" --ids 1,2 -n 1 --kv
expect_rc 2 "--kv" "$QHX" logits -m "$F32" --ids 1,2 --out "$tmp/x" --kv
[ -e "$tmp/x" ] && bad "logits wrote an output file after a usage error"
for c in generate chat logits "bench -m x" parity; do
  help=$($QHX $c --help 2>&1) # taken whole: with pipefail, `qhx | grep -q` fails when grep exits first
  grep -q -- "--kv" <<<"$help" || bad "qhx $c --help does not mention --kv"
done

# ---- logits: f16 by default, different from f32 ------------------------------------------------
"$QHX" logits -m "$F32" --ids "$IDS" --prefill 7 --out "$tmp/def" || bad "logits (default)"
"$QHX" logits -m "$F32" --ids "$IDS" --prefill 7 --kv f16 --out "$tmp/f16" || bad "logits --kv f16"
"$QHX" logits -m "$F32" --ids "$IDS" --prefill 7 --kv f32 --out "$tmp/f32" || bad "logits --kv f32"
cmp -s "$tmp/def" "$tmp/f16" || bad "the default KV cache is not f16"
cmp -s "$tmp/f32" "$tmp/f16" && bad "--kv f16 and --kv f32 gave identical logits"

# ---- a bundle's kv_cache is its default; --kv overrides it ---------------------------------------
"$QHX" forge "$F32" "$tmp/b" --precision bf16 >/dev/null 2>&1 || bad "forge"
man=$(ls "$tmp"/b/*.json | grep -v -e config -e tokenizer -e index | head -1)
sed -i 's/^  "max_context": \([0-9]*\),$/  "max_context": \1,\n  "kv_cache": "f32",/' "$man"
grep -q '"kv_cache": "f32"' "$man" || bad "could not set kv_cache in $man"
"$QHX" logits -m "$man" --ids "$IDS" --out "$tmp/b_def" || bad "logits on the bundle"
"$QHX" logits -m "$man" --ids "$IDS" --kv f32 --out "$tmp/b_f32" || bad "logits on the bundle --kv f32"
"$QHX" logits -m "$man" --ids "$IDS" --kv f16 --out "$tmp/b_f16" || bad "logits on the bundle --kv f16"
cmp -s "$tmp/b_def" "$tmp/b_f32" || bad "the bundle's kv_cache f32 is not its default"
cmp -s "$tmp/b_f16" "$tmp/b_f32" && bad "--kv f16 does not override the bundle's kv_cache"
sed -i 's/"kv_cache": "f32"/"kv_cache": "q4"/' "$man"
expect_rc 1 "kv_cache: unknown KV cache type 'q4'" "$QHX" logits -m "$man" --ids "$IDS" --out "$tmp/y"

# ---- generate: the same greedy tokens either way ---------------------------------------------------
for m in "$F32" "$VL"; do
  a=$("$QHX" generate -m "$m" --ids "$IDS" -n 24 --greedy --ignore-eos --print-ids --kv f32 2>/dev/null) || bad "generate --kv f32 $m"
  b=$("$QHX" generate -m "$m" --ids "$IDS" -n 24 --greedy --ignore-eos --print-ids --kv f16 2>/dev/null) || bad "generate --kv f16 $m"
  [ -n "$a" ] && [ "$a" = "$b" ] || bad "greedy tokens differ between --kv f32 and f16 on $m: '$a' vs '$b'"
done

# ---- q8: runs, and differs from f16 ----------------------------------------------------------------
"$QHX" logits -m "$F32" --ids "$IDS" --prefill 7 --kv q8 --out "$tmp/q8" || bad "logits --kv q8"
cmp -s "$tmp/q8" "$tmp/f16" && bad "--kv q8 and --kv f16 gave identical logits"
expect_rc 0 "top-1 agreement" "$QHX" parity -m "$F32" --golden "$F32" --kv q8 --against "$F32"

# ---- parity: f32 unless told; f16 passes the exact greedy gate, not the 2e-4 logit tolerance ------
for m in "$F32" "$VL"; do
  expect_rc 0 "0 failed" "$QHX" parity -m "$m" --golden "$m"
  expect_rc 0 "0 failed" "$QHX" parity -m "$m" --golden "$m" --kv f16 --gate exact
  expect_rc 1 "over tol" "$QHX" parity -m "$m" --golden "$m" --kv f16
  expect_rc 0 "top-1 agreement 1.0000" "$QHX" parity -m "$m" --golden "$m" --kv f16 --against "$m"
done

exit $fail
