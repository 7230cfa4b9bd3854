#!/usr/bin/env bash
# qhx serve with video_url content parts (base64 data: URLs) on qwen3vl-tiny-f32: the greedy
# answer equals qhx generate --video on the same turn; a broken video, a remote URL, a video in
# an assistant message and bad base64 are 400s with one message each. Skipped (77) without FFmpeg.
# Usage: serve_video.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 DATA=$2 SRC=$3
F=$DATA/fixtures/parity/qwen3vl-tiny-f32
V=$SRC/tests/data/video
command -v curl >/dev/null || { echo "FAIL: no curl (scripts/deps.sh installs it)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
T=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$T"' EXIT
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }
"$BIN/qhx" generate -m "$F" -p hi --chat --video "$V/h264.mp4" -n 1 --quiet >/dev/null 2>"$T/e"
grep -q "no FFmpeg" "$T/e" && { echo "video: this build has no FFmpeg: skipped"; exit 77; }

"$BIN/qhx" serve -m "$F" --port 0 >"$T/out" 2>"$T/err" &
PID=$!
for _ in $(seq 100); do grep -q listening "$T/out" && break; sleep 0.05; done
URL=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$T/out")
check '[ -n "$URL" ]' "the server starts: $(cat "$T/out" "$T/err")"

body() { # FILE ROLE -> a chat request with the file as a video_url part
  python3 - "$1" "$2" <<'PY'
import base64, json, sys
data = base64.b64encode(open(sys.argv[1], "rb").read()).decode() if sys.argv[1] != "-" else "%%%"
part = {"type": "video_url", "video_url": {"url": "data:video/mp4;base64," + data}}
msgs = [{"role": "user", "content": [part, {"type": "text", "text": "Describe the video."}]}]
if sys.argv[2] == "assistant":
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [part]}, {"role": "user", "content": "and?"}]
print(json.dumps({"messages": msgs, "max_tokens": 8, "temperature": 0}))
PY
}
body "$V/h264.mp4" user >"$T/req"
code=$(curl -s -o "$T/resp" -w '%{http_code}' "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d @"$T/req")
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"], end="")' "$T/resp" 2>/dev/null)
want=$("$BIN/qhx" generate -m "$F" -p "Describe the video." --chat --video "$V/h264.mp4" -n 8 --greedy --quiet 2>/dev/null)
check '[ "$code" = 200 ] && [ -n "$got" ] && [ "$got" = "$want" ]' "served video answer: $code '$got' vs generate '$want' ($(head -c 300 "$T/resp"))"
usage=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$T/resp" 2>/dev/null)
check '[ "$usage" = 60 ]' "prompt tokens with the video: $usage (the processor's 60)"

refused() { # REQUEST-FILE WORDS
  code=$(curl -s -o "$T/resp" -w '%{http_code}' "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d @"$1")
  words=$2
  check '[ "$code" = 400 ] && grep -q "$words" "$T/resp"' "refused ($words): $code $(head -c 300 "$T/resp")"
}
body "$V/garbage.mp4" user >"$T/req"; refused "$T/req" "not a video file"
body "$V/audio.wav" user >"$T/req"; refused "$T/req" "no video stream"
body "$V/h264.mp4" assistant >"$T/req"; refused "$T/req" "videos go in user messages"
body - user >"$T/req"; refused "$T/req" "not valid base64"
printf '{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"https://example.com/a.mp4"}}]}]}' >"$T/req"
refused "$T/req" "remote video URLs are not fetched"
# the server is still up
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/models")
check '[ "$code" = 200 ]' "the server goes on after the refusals: $code"
exit $fail
