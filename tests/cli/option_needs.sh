#!/usr/bin/env bash
# The rule for an option that only acts with another one (docs/robustness.md, "Options that would
# do nothing"): given without it, qhx generate, qhx chat and qhx serve refuse it with exit 2 and
# one line naming both options, nothing on stdout and no model work; with it, the same option is
# accepted. Also the model-dependent case (--image-max-tokens on a model without images).
# Usage: option_needs.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1/qhx
M=$3/models/shakespeare
VL=$2/fixtures/parity/qwen3vl-tiny-f32
[ -d "$VL" ] || { echo "FAIL: no fixture at $VL (the test data is part of the tree, under tests/data)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }

# refused CMD 'WHAT NEEDS' ARGS...: exit 2, one stderr line "qhx CMD: WHAT needs NEEDS ... would do
# nothing", no stdout
refused() {
  local cmd=$1 want=$2
  shift 2
  echo hi | "$BIN" "$cmd" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  check '[ $rc = 2 ] && [ ! -s "$T/out" ] && [ "$(wc -l <"$T/err")" = 1 ] &&
         grep -qF "qhx $cmd: $want" "$T/err" && grep -q "would do nothing" "$T/err"' \
    "$cmd $*: want exit 2 and '$want' (rc $rc: $(cat "$T/err"))"
}

# the speculation options: --draft, --draft-fixed need --spec mtp, in every front end
for cmd in generate chat; do
  refused $cmd "--draft needs --spec mtp" -m "$M" --draft 3 --quiet
  refused $cmd "--draft needs --spec mtp" -m "$M" --draft 1 -n 2
  refused $cmd "--draft-fixed needs --spec mtp" -m "$M" --draft-fixed
  refused $cmd "--draft-fixed needs --spec mtp" -m "$M" --draft-fixed -n 2
  # the sampling filters under --greedy (any order, llama.cpp spellings too)
  refused $cmd "--temp needs sampling (--greedy turns it off)" -m "$M" --greedy --temp 0.7
  refused $cmd "--temp needs sampling (--greedy turns it off)" -m "$M" --temperature 0.7 --greedy
  refused $cmd "--top-k needs sampling (--greedy turns it off)" -m "$M" --top-k 5 --greedy
  refused $cmd "--top-p needs sampling (--greedy turns it off)" -m "$M" --greedy --top-p 0.9
  refused $cmd "--min-p needs sampling (--greedy turns it off)" -m "$M" --greedy --min-p 0.1
  refused $cmd "--repeat-penalty needs sampling (--greedy turns it off)" -m "$M" --greedy --repeat-penalty 1.1
  refused $cmd "--repeat-last-n needs sampling (--greedy turns it off)" -m "$M" --greedy --repeat-last-n 8
  refused $cmd "--presence-penalty needs sampling (--greedy turns it off)" -m "$M" --greedy --presence-penalty 1
  refused $cmd "--frequency-penalty needs sampling (--greedy turns it off)" -m "$M" --greedy --frequency-penalty 1
done
# chat's prompt is never a plain one: the model without images is what makes it do nothing
refused chat "--image-max-tokens needs a model that takes images" -m "$M" --image-max-tokens 64
# generate: what only a chat-formatted text prompt with an image uses
refused generate "--system needs --chat" -m "$M" -p x --system "be brief"
refused generate "--system needs --chat" -m "$M" -p x --system-prompt "be brief"
refused generate "--think/--no-think needs --chat" -m "$M" -p x --think
refused generate "--think/--no-think needs --chat" -m "$M" -p x --no-think
refused generate "--image-max-tokens needs --image with a text prompt and --chat" -m "$VL" -p x --image-max-tokens 64
refused generate "--image-max-tokens needs --image with a text prompt and --chat" -m "$VL" -p x --chat --image-max-tokens 64
refused generate "--image-max-tokens needs --image with a text prompt and --chat" -m "$VL" --ids 1,2 --image "$VL/image-64x64.png" --image-max-tokens 64
# serve: the same rule, the same line, before any model is opened
refused serve "--draft needs --spec mtp" -m "$M" --draft 3
refused serve "--draft needs --spec mtp" -m /nonexistent --draft 8 --port 0

# with what they need, the same options are accepted (the model runs)
"$BIN" generate -m "$M" -p "KING HENRY:" -n 4 --greedy --spec mtp --draft 2 --draft-fixed --quiet >"$T/out" 2>"$T/err"
check '[ $? = 0 ] && [ -s "$T/out" ]' "generate --spec mtp --draft 2 --draft-fixed: $(cat "$T/err")"
printf 'KING HENRY:\n' | "$BIN" chat -m "$M" -n 4 --greedy --spec mtp --draft 3 --quiet >"$T/out" 2>"$T/err"
check '[ $? = 0 ] && [ -s "$T/out" ]' "chat --spec mtp --draft 3: $(cat "$T/err")"
"$BIN" generate -m "$M" -p "KING HENRY:" -n 4 --temp 0.7 --top-k 5 --seed 1 --quiet >"$T/out" 2>"$T/err"
check '[ $? = 0 ] && [ -s "$T/out" ]' "generate --temp --top-k without --greedy: $(cat "$T/err")"
"$BIN" generate -m "$M" -p "KING HENRY:" -n 4 --greedy --seed 7 --quiet >"$T/out" 2>"$T/err"
check '[ $? = 0 ] && [ -s "$T/out" ]' "generate --greedy --seed (the seed is reported by --json): $(cat "$T/err")"
"$BIN" generate -m "$VL" -p "What is it?" --chat --image "$VL/image-64x64.png" --image-max-tokens 64 -n 2 --quiet \
  >"$T/out" 2>"$T/err"
check '[ $? = 0 ]' "generate --chat --image --image-max-tokens: $(cat "$T/err")"
printf 'hello\n' | "$BIN" chat -m "$VL" --image-max-tokens 64 -n 2 --quiet >"$T/out" 2>"$T/err"
check '[ $? = 0 ]' "chat --image-max-tokens on a model that takes images: $(cat "$T/err")"

[ $fail = 0 ] && echo "option_needs: ok"
exit $fail
