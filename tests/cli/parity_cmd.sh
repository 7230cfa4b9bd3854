#!/usr/bin/env bash
# qhx parity: every qwen35-* fixture folder passes its own golden with --gate exact; a w8 bundle
# goes through the tolerant gate at tau 0.02 (the pass fractions measured in BENCHMARKS.md,
# "Quantization quality"); --against prints its summary; usage errors exit 2; a missing or broken
# fixture exits 1 with one line on stderr.
# Run as: bash parity_cmd.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1
DATA=$2
QHX=$BIN/qhx
FX=$DATA/fixtures/parity
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

[ -f "$FX/qwen35-tiny-f32/golden.json" ] || { echo "FAIL: parity_cmd: no fixtures under $FX (the test data is part of the tree, under tests/data)" >&2; exit 1; }

expect_rc() { # expected-rc message-substring cmd...
  local want=$1 needle=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  [ "$rc" = "$want" ] || bad "'$*' exited $rc, expected $want: $out"
  case "$out" in *"$needle"*) ;; *) bad "'$*' said '$out', expected '$needle'" ;; esac
}

# text prompts of a fixture (prompts without an "image" key)
n_text() {
  local all img
  all=$(grep -o '"name"' "$1/prompts.json" | wc -l)
  img=$(grep -o '"image"' "$1/prompts.json" | wc -l)
  echo $((all - img))
}

# ---- usage --------------------------------------------------------------------------------------
F32=$FX/qwen35-tiny-f32
expect_rc 2 "missing -m" "$QHX" parity
expect_rc 2 "missing --golden" "$QHX" parity -m "$F32"
expect_rc 2 "unknown option" "$QHX" parity -m "$F32" --golden "$F32" --bogus 1
expect_rc 2 "--gate" "$QHX" parity -m "$F32" --golden "$F32" --gate strict
expect_rc 2 "--tau" "$QHX" parity -m "$F32" --golden "$F32" --tau -1
expect_rc 2 "--tol" "$QHX" parity -m "$F32" --golden "$F32" --tol abc
expect_rc 2 "--threads" "$QHX" parity -m "$F32" --golden "$F32" --threads 0
expect_rc 2 "missing value" "$QHX" parity -m "$F32" --golden
expect_rc 2 "--min-agree needs --against" "$QHX" parity -m "$F32" --golden "$F32" --min-agree 0.5
expect_rc 2 "not to --against" "$QHX" parity -m "$F32" --golden "$F32" --against "$F32" --gate exact
expect_rc 0 "usage" "$QHX" parity --help

# ---- a missing or broken fixture: exit 1, one stderr line, nothing on stdout ----------------------
one_line_error() { # message-substring cmd...
  local needle=$1
  shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = 1 ] || bad "'$*' exited $rc, expected 1"
  [ "$(wc -l <"$tmp/err")" = 1 ] || bad "'$*' wrote $(wc -l <"$tmp/err") stderr lines: $(cat "$tmp/err")"
  grep -q -- "$needle" "$tmp/err" || bad "'$*' said '$(cat "$tmp/err")', expected '$needle'"
  [ -s "$tmp/out" ] && bad "'$*' printed on stdout: $(cat "$tmp/out")"
}
one_line_error "no-such-fixture" "$QHX" parity -m "$F32" --golden "$tmp/no-such-fixture"
mkdir "$tmp/broken"
cp "$F32/prompts.json" "$tmp/broken/"
echo '{"prompts": {}}' >"$tmp/broken/golden.json"
one_line_error "golden.json: prompts.p001: missing" "$QHX" parity -m "$F32" --golden "$tmp/broken"
one_line_error "no-such-model" "$QHX" parity -m "$tmp/no-such-model" --golden "$F32"
# a truncated logits file: found when that prompt is reached (earlier lines may be printed)
mkdir "$tmp/trunc"
cp "$F32"/*.json "$tmp/trunc/"
for f in "$F32"/*.logits.f32; do head -c 4096 "$f" >"$tmp/trunc/$(basename "$f")"; done
"$QHX" parity -m "$F32" --golden "$tmp/trunc" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "4096 bytes, expected" "$tmp/err" \
  || bad "truncated logits: exit $rc, stderr '$(cat "$tmp/err")'"

# ---- each fixture against its own golden, greedy-exact ---------------------------------------------
found=0
for fx in "$FX"/qwen35-*/; do
  fx=${fx%/}
  [ -f "$fx/golden.json" ] || continue
  found=1
  out=$("$QHX" parity -m "$fx" --golden "$fx" --gate exact 2>&1)
  rc=$?
  want="$(n_text "$fx") passed, 0 failed"
  [ "$rc" = 0 ] || bad "$(basename "$fx") --gate exact exited $rc: $out"
  [ "$(printf '%s\n' "$out" | tail -n 1)" = "$want" ] || bad "$(basename "$fx") --gate exact: expected '$want': $out"
done
[ "$found" = 1 ] || bad "no qwen35-* fixture found under $FX"

# ---- Qwen3.5 with images: the folder opens with its tower, every prompt runs, the image prompts
# through the image gate (tau 5e-3, logits 5e-3) with their embeddings compared --------------------
VLF=$FX/qwen35vl-tiny-f32
if [ -f "$VLF/golden.json" ]; then
  out=$("$QHX" parity -m "$VLF" --golden "$VLF" 2>&1)
  rc=$?
  [ "$rc" = 0 ] || bad "qwen35vl-tiny-f32 exited $rc: $out"
  [ "$(printf '%s\n' "$out" | tail -n 1)" = "8 passed, 0 failed" ] || bad "qwen35vl-tiny-f32: expected all 8 to pass: $out"
  [ "$(printf '%s\n' "$out" | grep -c 'image_embd max|d|')" = 2 ] || bad "qwen35vl-tiny-f32: the image prompts did not run: $out"
  printf '%s\n' "$out" | grep -q "^image prompts: tau 0.005, logits tol 0.005, image_embd tol 0.003" || bad "qwen35vl-tiny-f32: image gate: $out"
  # an impossible embedding tolerance fails the image prompts only
  out=$("$QHX" parity -m "$VLF" --golden "$VLF" --tol-embd 1e-9 2>&1)
  [ "$(printf '%s\n' "$out" | tail -n 1)" = "6 passed, 2 failed" ] || bad "qwen35vl-tiny-f32 --tol-embd 1e-9: $out"
else
  bad "qwen35vl-tiny-f32 missing under $FX"
fi

# ---- a w8 bundle through the tolerant gate at tau 0.02, and --against its source ---------------------
# Measured (BENCHMARKS.md, "Quantization quality"): the w8 bundles of qwen35-tiny-bf16 and
# qwen35-tiny-vrep-f32 pass 5 of 6 prompts (>= 80%, asserted here for the bf16 one); that of
# qwen35-tiny-f32 passes 3 of 6 (not run here: the w8 reference kernels make each run ~1 s).
BF=$FX/qwen35-tiny-bf16
W8=$tmp/bf16-w8
if [ -f "$BF/golden.json" ] && "$QHX" forge "$BF" "$W8" --precision w8 --quiet; then
  out=$("$QHX" parity -m "$W8" --golden "$BF" --gate tol --tau 0.02 2>&1)
  rc=$?
  last=$(printf '%s\n' "$out" | tail -n 1)
  case "$last" in
    [0-9]*" passed, "[0-9]*" failed")
      passed=${last%% passed*}
      failed=${last#*passed, }
      failed=${failed%% failed}
      [ $((passed * 5)) -ge $(((passed + failed) * 4)) ] || bad "w8 tolerant gate: $last is below 80%: $out"
      [ "$rc" = $((failed > 0)) ] || bad "w8 tolerant gate: exit $rc with '$last'"
      ;;
    *) bad "w8 tolerant gate: no summary line: $out" ;;
  esac
  printf '%s\n' "$out" | grep -q "decoder w8, lm-head w8 (quantized)" || bad "w8: precision not reported: $out"
  printf '%s\n' "$out" | grep -q "tau 0.02, logits tol not applied" || bad "w8: gate not reported: $out"

  out=$("$QHX" parity -m "$W8" --golden "$BF" --against "$BF" 2>&1)
  rc=$?
  { [ "$rc" = 0 ] || [ "$rc" = 1 ]; } || bad "--against exited $rc: $out"
  printf '%s\n' "$out" | grep -q "^mean over $(n_text "$BF") prompts: top-1 agreement [0-9.]*, KL [0-9.e+-]* nats" \
    || bad "--against: no summary of means: $out"
  printf '%s\n' "$out" | grep -q "KL mean [0-9.e+-]* p99 <= [0-9.e+-]* p99.9 <= [0-9.e+-]* max" \
    || bad "--against: no KL quantiles: $out"
  printf '%s\n' "$out" | tail -n 1 | grep -q "^[0-9]* passed, [0-9]* failed$" || bad "--against: no last line: $out"
else
  bad "qhx forge $BF w8 failed"
fi

exit $fail
