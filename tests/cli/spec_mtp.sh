#!/usr/bin/env bash
# Speculative decoding with the MTP block through the front ends, on the demo model
# (models/shakespeare, whose block is trained): qhx generate with --spec mtp gives the ids of
# plain greedy decoding (fixed and adaptive drafts, and through a bundle forged with --mtp in w8
# and q4), its speed line and --json report the drafts; the option errors; qhx serve with
# --spec mtp answers greedy requests with the text of a server without it (with the request's
# "spec_draft" at 2 and at -1), in parallel slots (2 and 4 requests at once, whose verifies share
# one pass, and speculating requests beside ones without speculation), and /metrics counts the
# drafts.
# Usage: spec_mtp.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 SRC=$3
M=$SRC/models/shakespeare
command -v curl >/dev/null || { echo "FAIL: no curl (scripts/deps.sh installs it)" >&2; exit 1; }
T=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$T"' EXIT
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }
gen() { "$BIN/qhx" generate -m "$1" -p "KING HENRY:" -n 60 --greedy --ignore-eos --print-ids "${@:2}"; }

gen "$M" >"$T/plain" 2>/dev/null
check '[ -s "$T/plain" ]' "plain greedy ids"
for d in 1 3 8; do
  gen "$M" --spec mtp --draft $d --draft-fixed >"$T/s$d" 2>"$T/e$d"
  check 'cmp -s "$T/plain" "$T/s$d"' "--spec mtp --draft $d --draft-fixed: the ids of plain greedy"
  check 'grep -q "drafts accepted [0-9]*/[0-9]* ([0-9]*%), [0-9.]* tokens per verify step" "$T/e$d"' "speed line: $(cat "$T/e$d")"
done
gen "$M" --spec mtp >"$T/sa" 2>/dev/null
check 'cmp -s "$T/plain" "$T/sa"' "--spec mtp (adaptive): the ids of plain greedy"
"$BIN/qhx" generate -m "$M" -p "KING HENRY:" -n 30 --greedy --spec mtp --draft 4 --draft-fixed --json >"$T/j" 2>/dev/null
check 'grep -q "\"spec\": *{[^}]*\"verify_steps\"" "$T/j" && grep -q "\"tokens_per_step\"" "$T/j"' "--json spec: $(cat "$T/j")"
"$BIN/qhx" generate -m "$M" -p x --spec ngram 2>"$T/e"; rc=$?
check '[ $rc = 2 ] && grep -q "not mtp" "$T/e"' "--spec ngram: usage error ($rc $(cat "$T/e"))"
"$BIN/qhx" generate -m "$M" -p x --spec mtp --draft 9 2>"$T/e"; rc=$?
check '[ $rc = 2 ]' "--draft 9: usage error ($rc)"
for p in w8 q4; do
  "$BIN/qhx" forge "$M" "$T/$p" --precision $p --mtp --quiet
  check '[ -f "$T/$p/mtp-$p.safetensors" ] && grep -q "\"mtp\"" "$T/$p"/*.json' "forge --mtp $p: the mtp artifact"
  gen "$T/$p" >"$T/p$p" 2>/dev/null
  gen "$T/$p" --spec mtp --draft 3 --draft-fixed >"$T/q$p" 2>/dev/null
  check '[ -s "$T/p$p" ] && cmp -s "$T/p$p" "$T/q$p"' "$p bundle: --spec mtp gives the ids of plain greedy"
done
"$BIN/qhx" forge "$M" "$T/nomtp" --precision w8 --quiet
"$BIN/qhx" generate -m "$T/nomtp" -p x -n 2 --spec mtp 2>"$T/e"; rc=$?
check '[ $rc = 1 ] && grep -q "multi-token-prediction" "$T/e"' "a bundle without the block: one error line ($rc $(cat "$T/e"))"

# sessions travel between speculating and plain chats: /save with --spec mtp, /load without it,
# and the reverse (the same model, precision and KV type); each goes on with the text of a chat
# that never stopped. What must match still does: another --kv is refused by name.
chat() { "$BIN/qhx" chat -m "$M" -n 12 --greedy --quiet "$@"; }
printf 'KING HENRY:\nGo on.\n' | chat >"$T/c_ref" 2>/dev/null
for from in spec plain; do
  if [ $from = spec ]; then a=(--spec mtp); b=(); else a=(); b=(--spec mtp --draft 2); fi
  printf 'KING HENRY:\n/save %s\n' "$T/$from.st" | chat "${a[@]}" >"$T/c_first" 2>"$T/e"
  check '[ -s "$T/$from.st" ]' "chat ${a[*]} /save: $(cat "$T/e")"
  printf '/load %s\nGo on.\n' "$T/$from.st" | chat "${b[@]}" >"$T/c_next" 2>"$T/e"
  check '[ $? = 0 ] && [ "$(cat "$T/c_first" "$T/c_next")" = "$(cat "$T/c_ref")" ]' \
    "saved ${a[*]:-plain}, loaded ${b[*]:-plain}: the text of an unbroken chat ($(cat "$T/e"))"
  printf '/load %s\n' "$T/$from.st" | chat "${b[@]}" --kv q8 >/dev/null 2>"$T/e"
  check 'grep -q "KV cache" "$T/e"' "saved ${a[*]:-plain}, loaded with --kv q8: refused by name ($(cat "$T/e"))"
done

# the server: the same answers with and without speculation
serve() {
  "$BIN/qhx" serve -m "$M" --port 0 --parallel 4 "$@" >"$T/out" 2>"$T/err" &
  PID=$!
  for _ in $(seq 200); do grep -q listening "$T/out" && break; sleep 0.05; done
  URL=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$T/out")
}
# ask PROMPT [EXTRA_FIELDS [MAX_TOKENS]]: the answer's text
ask() { curl -sS "$URL/v1/completions" -H 'Content-Type: application/json' \
  -d "{\"prompt\":\"$1\",\"max_tokens\":${3:-40},\"temperature\":0,\"ignore_eos\":true${2:-}}" |
  sed 's/.*"text": *"\([^"]*\)".*/\1/'; }
serve
check '[ -n "$URL" ]' "plain server ready: $(cat "$T/err")"
ask "KING HENRY:" "" >"$T/a1"; ask "HAMLET:" "" >"$T/a2"
ask "KING HENRY:" ',"repeat_penalty":1.3' 80 >"$T/a3"
ask "ROMEO:" "" >"$T/a4"; ask "GLOUCESTER:" "" 60 >"$T/a5"
kill -TERM $PID; wait $PID; PID=
for i in 1 2 3 4 5; do check '[ -s "$T/a$i" ] && ! grep -q "\"error\"" "$T/a$i"' "plain answer $i: $(cat "$T/a$i")"; done
serve --spec mtp --draft 4
check '[ -n "$URL" ]' "speculative server ready: $(cat "$T/err")"
ask "KING HENRY:" "" >"$T/b1" & P1=$!
ask "HAMLET:" "" >"$T/b2" & P2=$!
wait $P1 $P2
check '[ -s "$T/a1" ] && cmp -s "$T/a1" "$T/b1" && cmp -s "$T/a2" "$T/b2"' "server --spec mtp: the plain answers ($(cat "$T/a1") / $(cat "$T/b1"))"
# four at once, of different lengths: every step verifies the drafts of all in one pass
ask "KING HENRY:" "" >"$T/d1" & P1=$!
ask "HAMLET:" "" >"$T/d2" & P2=$!
ask "ROMEO:" "" >"$T/d4" & P3=$!
ask "GLOUCESTER:" "" 60 >"$T/d5" & P4=$!
wait $P1 $P2 $P3 $P4
for i in 1 2 4 5; do
  check '[ -s "$T/a$i" ] && cmp -s "$T/a$i" "$T/d$i"' "server --spec mtp, 4 parallel requests: answer $i is the plain one ($(cat "$T/a$i") / $(cat "$T/d$i"))"
done
# both kinds at once: two speculating slots and two without speculation (each engine step a
# speculative step and a decode step)
ask "KING HENRY:" "" >"$T/e1" & P1=$!
ask "HAMLET:" ',"spec_draft":-1' >"$T/e2" & P2=$!
ask "ROMEO:" "" >"$T/e4" & P3=$!
ask "GLOUCESTER:" ',"spec_draft":-1' 60 >"$T/e5" & P4=$!
wait $P1 $P2 $P3 $P4
for i in 1 2 4 5; do
  check '[ -s "$T/a$i" ] && cmp -s "$T/a$i" "$T/e$i"' "server --spec mtp, speculating and plain requests at once: answer $i is the plain one ($(cat "$T/a$i") / $(cat "$T/e$i"))"
done
# long enough for the adaptive rule to retire and the slots to join the batch: the penalty
# window must hold the same tokens on both paths
ask "KING HENRY:" ',"repeat_penalty":1.3' 80 >"$T/b3" & P1=$!
ask "HAMLET:" "" 80 >/dev/null & P2=$!
wait $P1 $P2
check '[ -s "$T/a3" ] && cmp -s "$T/a3" "$T/b3"' "server --spec mtp, repeat penalty, 80 tokens: the plain answer ($(cat "$T/a3") / $(cat "$T/b3"))"
ask "KING HENRY:" ',"spec_draft":2' >"$T/c1"; ask "KING HENRY:" ',"spec_draft":-1' >"$T/c2"
check 'cmp -s "$T/a1" "$T/c1" && cmp -s "$T/a1" "$T/c2"' "spec_draft 2 and -1: the plain answer"
code=$(curl -s -o "$T/e" -w '%{http_code}' "$URL/v1/completions" -d '{"prompt":"x","spec_draft":9}')
check '[ "$code" = 400 ]' "spec_draft 9: 400 ($code)"
curl -s "$URL/metrics" >"$T/m"
check 'awk "/^qhx_spec_accepted_total/ {exit !(\$2 > 0)}" "$T/m" && awk "/^qhx_spec_verify_steps_total/ {exit !(\$2 > 0)}" "$T/m"' "metrics: $(grep spec "$T/m")"
kill -TERM $PID; wait $PID; PID=
exit $fail
