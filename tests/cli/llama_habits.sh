#!/usr/bin/env bash
# llama.cpp's everyday command-line habits in qhx generate and chat: --seed -1 (a random seed,
# printed, that gives the same text again), -ngl / --n-gpu-layers (accepted, one line on how
# devices are chosen), --no-mmap (= --weights read), --color (only on a terminal, never with
# NO_COLOR or into a pipe), the prompt as the last argument without -p, and --json's numbers
# rounded as a person reads them.
# Run as: bash llama_habits.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FX=$2/fixtures/parity/qwen35-tiny-f32
[ -d "$FX" ] || { echo "FAIL: llama_habits: $FX missing (the test data is part of the tree)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_llama_habits.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
run() { timeout 120 "$QHX" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"; }

# --seed -1: sampling with a random seed, printed; that seed given back gives the same text
run generate -m "$FX" -p Hello -n 12 --temp 0.9 --seed -1 || bad "--seed -1 failed: $(cat "$tmp/err")"
seed=$(sed -n 's/^qhx: seed \([0-9]*\) (--seed -1.*/\1/p' "$tmp/err")
[ -n "$seed" ] || bad "--seed -1 printed no seed: $(cat "$tmp/err")"
cp "$tmp/out" "$tmp/first"
if [ -n "$seed" ]; then
  run generate -m "$FX" -p Hello -n 12 --temp 0.9 --seed "$seed" || bad "--seed $seed failed"
  cmp -s "$tmp/out" "$tmp/first" || bad "--seed $seed (printed by --seed -1) gave another text"
  ! grep -q "^qhx: seed" "$tmp/err" || bad "a chosen seed is printed as a random one"
fi
# two random seeds differ (2^63 values)
run generate -m "$FX" -p Hello -n 2 --temp 0.9 -s -1 || bad "-s -1 failed"
seed2=$(sed -n 's/^qhx: seed \([0-9]*\) .*/\1/p' "$tmp/err")
[ -n "$seed2" ] && [ "$seed2" != "$seed" ] || bad "-s -1 twice gave seeds '$seed' and '$seed2'"
# the last --seed wins; -2 and 1.5 are refused
run generate -m "$FX" -p Hello -n 4 --temp 0.9 --seed -1 --seed 5 --json || bad "--seed -1 --seed 5 failed"
grep -q '"seed":5,' "$tmp/out" || bad "--seed -1 --seed 5: $(cat "$tmp/out")"
for v in -2 1.5 "" -1x; do
  run generate -m "$FX" -p Hello -n 1 --seed "$v"; rc=$?
  [ $rc = 2 ] && grep -q -- "--seed" "$tmp/err" || bad "--seed '$v': exit $rc, $(cat "$tmp/err")"
done

# -ngl / --n-gpu-layers: the same text, one line naming --device
run generate -m "$FX" -p Hello -n 6 --greedy || bad "plain run failed"
cp "$tmp/out" "$tmp/plain"
for o in "-ngl 99" "--n-gpu-layers 0" "-ngl -1" "--n-gpu-layers=33"; do
  run generate -m "$FX" -p Hello -n 6 --greedy $o || { bad "$o failed: $(cat "$tmp/err")"; continue; }
  cmp -s "$tmp/out" "$tmp/plain" || bad "$o changed the text"
  [ "$(grep -c -- '-ngl: .*--device' "$tmp/err")" = 1 ] || bad "$o: no single line about --device: $(cat "$tmp/err")"
done
for v in x -5 ""; do
  run generate -m "$FX" -p Hello -n 1 -ngl "$v"; rc=$?
  [ $rc = 2 ] || bad "-ngl '$v': exit $rc"
done

# --no-mmap is --weights read: same text
run generate -m "$FX" -p Hello -n 6 --greedy --no-mmap || bad "--no-mmap failed: $(cat "$tmp/err")"
cmp -s "$tmp/out" "$tmp/plain" || bad "--no-mmap changed the text"
run generate -m "$FX" -p Hello -n 6 --greedy --weights mmap --no-mmap || bad "--weights mmap --no-mmap failed"

# --color: nothing into a pipe; on a terminal the text is coloured, and NO_COLOR turns it off
run generate -m "$FX" -p Hello -n 6 --greedy --color || bad "--color failed"
cmp -s "$tmp/out" "$tmp/plain" || bad "--color into a pipe wrote escapes: $(od -c "$tmp/out" | head -3)"
if command -v script >/dev/null; then
  TERM=xterm script -qec "$QHX generate -m $FX -p Hello -n 6 --greedy --color --quiet" /dev/null >"$tmp/tty" 2>&1 </dev/null
  grep -q $'\033\\[33m' "$tmp/tty" || bad "--color on a terminal: no colour: $(od -c "$tmp/tty" | head -3)"
  grep -q $'\033\\[0m' "$tmp/tty" || bad "--color on a terminal: the colour is not turned off"
  NO_COLOR=1 TERM=xterm script -qec "$QHX generate -m $FX -p Hello -n 6 --greedy --color --quiet" /dev/null >"$tmp/tty" 2>&1 </dev/null
  ! grep -q $'\033\\[' "$tmp/tty" || bad "--color with NO_COLOR=1 still coloured"
  TERM=xterm script -qec "$QHX generate -m $FX -p Hello -n 6 --greedy --quiet" /dev/null >"$tmp/tty" 2>&1 </dev/null
  ! grep -q $'\033\\[33m' "$tmp/tty" || bad "colour without --color"
fi

# the prompt as the last argument (or anywhere), without -p
run generate -m "$FX" -n 6 --greedy Hello || bad "a prompt without -p failed: $(cat "$tmp/err")"
cmp -s "$tmp/out" "$tmp/plain" || bad "a prompt without -p gave another text"
run generate Hello -m "$FX" -n 6 --greedy || bad "a prompt without -p, first"
cmp -s "$tmp/out" "$tmp/plain" || bad "a prompt without -p (first) gave another text"
run generate -m "$FX" -n 6 --greedy "Hello world, two words"
[ $? = 0 ] || bad "a prompt with spaces without -p failed"
for extra in "-p Hello Hi" "Hi Hello" "--ids 1,2 Hi" "-f /dev/null Hi"; do
  run generate -m "$FX" -n 1 $extra; rc=$?
  [ $rc = 2 ] && grep -q "prompt" "$tmp/err" || bad "two prompts ($extra): exit $rc, $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] || bad "two prompts ($extra) printed output"
done
run generate -m "$FX" -n 1 --bogus Hello; rc=$?
[ $rc = 2 ] && grep -q -- "--bogus" "$tmp/err" || bad "an unknown option before a prompt: exit $rc"

# --json: every number as a person reads it (no 12.998857000000001), and a real JSON object
run generate -m "$FX" -p Hello -n 8 --greedy --json || bad "--json failed"
python3 - "$tmp/out" <<'PY' || bad "--json numbers: $(cat "$tmp/out")"
import json, re, sys
raw = open(sys.argv[1]).read()
d = json.loads(raw)
for k in ("load_ms", "first_token_ms", "prompt_ms", "generate_ms"):
    assert isinstance(d[k], (int, float)) and d[k] >= 0, k
for num in re.findall(r'[-+]?\d+\.\d+(?:[eE][-+]?\d+)?', raw):
    assert len(num.split(".")[1]) <= 3, "over-long number " + num
PY

# -n's default: one figure per command in every help text, and the one the command uses
for cmd in generate chat; do
  "$QHX" $cmd --help >"$tmp/help" 2>&1
  [ "$(grep -c -w "128" "$tmp/help")" -le 1 ] && [ "$(grep -c -w "512" "$tmp/help")" -le 1 ] ||
    bad "$cmd --help states -n's default more than once: $(grep -n -w "128\|512" "$tmp/help")"
  grep -q "128 in generate, 512 per answer" "$tmp/help" || bad "$cmd --help: -n's defaults: $(grep -n -- "-n" "$tmp/help" | head -3)"
done
run generate -m "$FX" -p Hello --greedy --ignore-eos --json || bad "generate without -n failed"
grep -q '"n_generated":128,' "$tmp/out" || bad "generate's default -n is not 128: $(head -c 300 "$tmp/out")"
printf 'hi\n' | timeout 120 "$QHX" chat -m "$FX" --greedy --ignore-eos --verbose >/dev/null 2>"$tmp/err" || bad "chat without -n failed"
grep -q "generated 512 tokens" "$tmp/err" || bad "chat's default -n is not 512: $(cat "$tmp/err")"

[ $fail = 0 ] && echo "llama_habits: ok"
exit $fail
