#!/usr/bin/env bash
# qhx serve over raw HTTP: curl for the SSE framing of a streamed answer, then hostile and odd
# input, cancelled clients, slow clients, a full queue, SIGTERM draining and the API key
# (tests/serve/test_http.py), and the HTTP/1.1 framing under hostile clients over raw sockets
# (tests/serve/test_framing.py); the Python standard library only.
# Usage: serve_http.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 DATA=$2 SRC=$3
F=$DATA/fixtures/parity/qwen35-tiny-f32
command -v curl >/dev/null || { echo "FAIL: no curl (scripts/deps.sh installs it)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
T=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$T"' EXIT
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }

"$BIN/qhx" serve -m "$F" --port 0 --parallel 2 >"$T/out" 2>"$T/err" &
PID=$!
for _ in $(seq 100); do grep -q listening "$T/out" && break; sleep 0.05; done
URL=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$T/out")
check '[ -n "$URL" ]' "the server prints its URL when ready: $(cat "$T/out" "$T/err")"
check 'case "$URL" in http://127.0.0.1:*) true;; *) false;; esac' "loopback by default: $URL"

curl -sS -N -D "$T/hdr" "$URL/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' >"$T/sse"
check 'grep -qi "^content-type: text/event-stream" "$T/hdr"' "SSE content type: $(cat "$T/hdr")"
check 'grep -qi "^transfer-encoding: chunked" "$T/hdr"' "a chunked response"
python3 - "$T/sse" <<'PY' || fail=1
import json, sys
raw = open(sys.argv[1], "rb").read().decode()
ok = True
def bad(msg):
    global ok
    print("FAIL: SSE framing:", msg, repr(raw[:300])); ok = False
if not raw.endswith("data: [DONE]\n\n"): bad("does not end with data: [DONE] and a blank line")
events = raw.split("\n\n")[:-1]
for e in events:
    if not e.startswith("data: ") or "\n" in e: bad("an event that is not one data: line: %r" % e)
chunks = [json.loads(e[6:]) for e in events[:-1]]
if not chunks or any(c["object"] != "chat.completion.chunk" for c in chunks): bad("chunk objects")
if chunks[0]["choices"][0]["delta"].get("role") != "assistant": bad("the first delta carries the role")
fin = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
if len(fin) != 1 or fin[0]["choices"][0]["finish_reason"] != "length": bad("one finish_reason chunk")
if chunks[-1]["choices"] != [] or chunks[-1]["usage"]["completion_tokens"] != 6: bad("the last chunk holds the usage")
if len({c["id"] for c in chunks}) != 1: bad("one id for every chunk")
sys.exit(0 if ok else 1)
PY
code=$(curl -s -o "$T/e" -w '%{http_code}' "$URL/v1/chat/completions" -d '{"messages": 1}')
check '[ "$code" = 400 ] && grep -q "\"error\"" "$T/e"' "a bad body over curl: $code $(cat "$T/e")"
code=$(curl -s -o "$T/e" -w '%{http_code}' "$URL/metrics")
check '[ "$code" = 200 ] && grep -q "^qhx_requests_total 2" "$T/e" && grep -q "^# TYPE qhx_queue_length gauge" "$T/e"' "metrics: $(head -c 300 "$T/e")"
# No --ctx: each slot gets the context qhx generate chooses for the same folder (the library's
# policy; the fixture's KV caches are small, so the memory does not bind: its trained context).
n_ctx=$(curl -s "$URL/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["meta"]["n_ctx"])')
# (generate says its context when -n goes beyond it; a one-token grammar ends the run at once)
printf 'root ::= "a"\n' >"$T/one.gbnf"
gen=$("$BIN/qhx" generate -m "$F" --ids 1 -n 2147483647 --grammar "$T/one.gbnf" --ignore-eos 2>&1 >/dev/null | sed -n "s/.*goes beyond the context of \([0-9]*\) tokens.*/\1/p")
trained=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["text_config"]["max_position_embeddings"])' "$F/config.json")
check '[ -n "$gen" ] && [ "$n_ctx" = "$gen" ] && [ "$gen" = "$trained" ]' \
  "serve's default context per slot ($n_ctx) is generate's ($gen), the trained one ($trained)"
kill -TERM $PID
wait $PID
rc=$?
PID=
check '[ $rc = 0 ]' "SIGTERM: exit 0 (got $rc)"

cd "$SRC/tests/serve" && timeout 600 python3 test_http.py "$BIN/qhx" "$DATA" || fail=1
timeout 300 python3 test_framing.py "$BIN/qhx" "$DATA" || fail=1
exit $fail
