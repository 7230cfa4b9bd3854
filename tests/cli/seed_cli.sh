#!/usr/bin/env bash
# The seed's positional qhx_generate, and qhx chat over a pipe.
# Run as: bash seed_cli.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1
FX=$2/fixtures/parity/qwen35-tiny-f32
VL=$2/fixtures/parity/qwen3vl-tiny-f32
[ -d "$FX" ] || { echo "FAIL: seed_cli: $FX is missing (the test data is part of the tree, under tests/data)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }

"$BIN/qhx" forge "$FX" "$tmp/b" --precision f16 --quiet || { echo "FAIL: forge"; exit 1; }
man=$(cd "$tmp/b" && ls *.json | grep -v -e config -e index | head -1)

# positional form: manifest found inside MODEL_DIR; cpu backend; text on stdout
"$BIN/qhx_generate" "$man" cpu - "$tmp/b" 16 'The capital of France is' >"$tmp/o1" 2>"$tmp/e1"
check '[ $? = 0 ]' "qhx_generate cpu exit"
check '[ -s "$tmp/o1" ]' "qhx_generate printed nothing"
check 'grep -q "tok/s" "$tmp/e1"' "qhx_generate speed line"
# the same greedy text as qhx generate over the manifest, decode-over-prompt
"$BIN/qhx" generate -m "$tmp/b/$man" -p 'The capital of France is' -n 16 --greedy --prefill decode --quiet >"$tmp/o2"
check 'cmp -s "$tmp/o1" "$tmp/o2"' "qhx_generate and qhx generate differ"
# --tokenizer takes the manifest or the bundle folder as well as tokenizer.json
for t in "$tmp/b/$man" "$tmp/b" "$FX/tokenizer.json" "$FX"; do
  printf 'Hello world' | "$BIN/qhx" tokenize --tokenizer "$t" >"$tmp/ids_$(basename "$t")" 2>&1
  check 'cmp -s "$tmp/ids_$(basename "$t")" "$tmp/ids_tokenizer.json" || [ ! -f "$tmp/ids_tokenizer.json" ]' "tokenize --tokenizer $t"
done
check '[ -s "$tmp/ids_tokenizer.json" ] && cmp -s "$tmp/ids_b" "$tmp/ids_tokenizer.json" && cmp -s "$tmp/ids_$man" "$tmp/ids_tokenizer.json"' "tokenize via manifest/bundle"
# a QNN library is refused with one line; bad arguments are usage errors
"$BIN/qhx_generate" "$man" libQnnHtp.so libQnnSystem.so "$tmp/b" 16 hi >/dev/null 2>"$tmp/e3"
check '[ $? = 1 ] && [ $(wc -l <"$tmp/e3") = 1 ] && grep -q "no QNN backend" "$tmp/e3"' "QNN refusal"
"$BIN/qhx_generate" "$man" cpu - "$tmp/b" >/dev/null 2>&1
check '[ $? = 2 ]' "too few arguments"
"$BIN/qhx_generate" "$man" cpu - "$tmp/b" zero hi >/dev/null 2>&1
check '[ $? = 2 ]' "bad N"
"$BIN/qhx_generate" nope.json cpu - "$tmp/b" 4 hi >/dev/null 2>"$tmp/e4"
check '[ $? = 1 ] && [ $(wc -l <"$tmp/e4") = 1 ]' "missing manifest"
# the VLM manifest with an image, and its text manifest
if [ -d "$VL" ]; then
  "$BIN/qhx" forge "$VL" "$tmp/v" --precision f16 --quiet || { echo "FAIL: forge vl"; exit 1; }
  vlm=$(cd "$tmp/v" && ls *-vlm-*.json) txt=$(cd "$tmp/v" && ls *-text-*.json)
  "$BIN/qhx_generate" "$vlm" cpu - "$tmp/v" 8 'Describe this image.' "$VL/image-64x96.png" >/dev/null 2>&1
  check '[ $? = 0 ]' "qhx_generate vlm with image"
  "$BIN/qhx_generate" "$txt" cpu - "$tmp/v" 8 'What is the capital of France?' >/dev/null 2>&1
  check '[ $? = 0 ]' "qhx_generate vl text"
fi

# the demo model (make demo): the real Qwen3 tokenizer on a random Qwen3.5-shaped model
TOKQ=$2/fixtures/tokenizer/qwen3/tokenizer.json
if [ -f "$TOKQ" ]; then
  "$BIN/qhx" forge --random qwen3_5 "$tmp/demo" --preset demo --seed 7 --tokenizer "$TOKQ" --quiet
  check '[ $? = 0 ]' "forge --preset demo"
  "$BIN/qhx" generate -m "$tmp/demo" -p "The capital of France is" -n 4 --seed 1 --quiet >"$tmp/demo.out" 2>&1
  check '[ $? = 0 ] && [ -s "$tmp/demo.out" ]' "generate on the demo model"
  rm -rf "$tmp/demo"
fi

# chat over a pipe: save, go on, load, go on again: the two continuations are the same
printf 'Hello there\n/save %s\nHow are you\n/load %s\nHow are you\n/exit\n' "$tmp/s" "$tmp/s" |
  "$BIN/qhx" chat -m "$FX" -n 12 --greedy --quiet >"$tmp/chat" 2>"$tmp/chat.err"
check '[ $? = 0 ]' "chat exit"
check '[ $(wc -l <"$tmp/chat") = 3 ]' "chat printed $(wc -l <"$tmp/chat") answers"
check '[ "$(sed -n 2p "$tmp/chat")" = "$(sed -n 3p "$tmp/chat")" ]' "restored chat differs"
check 'grep -q "saved" "$tmp/chat.err" && grep -q "loaded" "$tmp/chat.err"' "chat save/load messages"
exit $fail
