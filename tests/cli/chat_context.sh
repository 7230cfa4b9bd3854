#!/usr/bin/env bash
# qhx chat never dead-ends on a full context: a chat of 50 turns on the demo model in a
# 512-token context answers every message (no refusal), the oldest turns after the system
# prompt are dropped with a one-line notice and the kept ones read again, the answers stay
# well-formed (UTF-8, no chat-format markers leaking); --no-context-shift refuses instead;
# /clear forgets the turns.
# Usage: chat_context.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
M=$3/models/shakespeare
[ -f "$M/model.safetensors" ] || { echo "FAIL: $M missing" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_chat_context.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
for i in $(seq 1 50); do echo "ROMEO: tell me of the night, turn $i, and speak of love and of the stars above"; done >"$tmp/in"

check_run() { # NAME TURNS: the run's stdout/stderr in $tmp/NAME.out/.err
  local n=$1 want=$2
  [ "$(grep -c "stop: " "$tmp/$n.err")" = "$want" ] || bad "$n: $(grep -c "stop: " "$tmp/$n.err") answers of $want: $(grep -v 'stop: ' "$tmp/$n.err" | head -5)"
  ! grep -q "fills the context\|no room" "$tmp/$n.err" || bad "$n: a message was refused: $(grep -m1 "fills the context\|no room" "$tmp/$n.err")"
  grep -q "^(the conversation outgrew the context of 512 tokens" "$tmp/$n.err" || bad "$n: no shift notice"
  python3 - "$tmp/$n.out" <<'PY' || bad "$n: answers not well-formed"
import sys
b = open(sys.argv[1], "rb").read()
t = b.decode("utf-8")  # raises on invalid UTF-8
assert "<|im_" not in t and "<think>" not in t, "chat markers in the answers"
assert len(t.strip()) > 20 * 10, "answers too short"
PY
}

# short answers: several turns are kept at each shift, the oldest dropped
timeout 600 "$QHX" chat -m "$M" --ctx 512 -n 40 --temp 0.8 --seed 3 --verbose <"$tmp/in" >"$tmp/a.out" 2>"$tmp/a.err" || bad "chat -n 40: exit $?"
check_run a 50
python3 - "$tmp/a.err" <<'PY' || bad "the shifts kept no earlier turn: $(grep outgrew "$tmp/a.err" | head -3)"
import re, sys
kept = [int(m.group(1)) for m in re.finditer(r"outgrew the context of 512 tokens: its oldest (\d+) turns? (?:was|were) dropped; (\d+) tokens read again", open(sys.argv[1]).read())]
assert kept, "no notice"
reads = [int(x) for x in re.findall(r"; (\d+) tokens read again", open(sys.argv[1]).read())]
assert max(reads) > 100 and all(r <= 512 - 40 for r in reads), reads
PY
# answers that fill the context (the default -n 512, more than the context leaves): every
# message still gets its answer, stopped at the context's end (20 turns: each is long)
head -20 "$tmp/in" | timeout 600 "$QHX" chat -m "$M" --ctx 512 --temp 0.8 --seed 4 --verbose --system "You are a poet." >"$tmp/b.out" 2>"$tmp/b.err" || bad "chat, long answers: exit $?"
check_run b 20
grep -q "the system prompt kept" "$tmp/b.err" || bad "--system: the notice does not say it was kept"
grep -q "stop: context" "$tmp/b.err" || bad "long answers: no stop at the context"

# --no-context-shift: refused, as before, and never shifted
head -20 "$tmp/in" | timeout 600 "$QHX" chat -m "$M" --ctx 512 -n 200 --greedy --no-context-shift >/dev/null 2>"$tmp/c.err" || bad "--no-context-shift: exit $?"
grep -q "fills the context\|no room for an answer" "$tmp/c.err" || bad "--no-context-shift never refused: $(tail -3 "$tmp/c.err")"
! grep -q "outgrew" "$tmp/c.err" || bad "--no-context-shift shifted"

# /clear forgets: a conversation cleared before it fills never shifts
{ head -3 "$tmp/in"; echo /clear; head -3 "$tmp/in"; } | timeout 600 "$QHX" chat -m "$M" --ctx 512 -n 40 --greedy >/dev/null 2>"$tmp/d.err" || bad "/clear run: exit $?"
! grep -q "outgrew" "$tmp/d.err" || bad "a shift after /clear with room to spare"

[ $fail = 0 ] && echo "chat_context: ok"
exit $fail
