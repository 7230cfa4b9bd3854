#!/usr/bin/env bash
# A video whose tokens do not fit the context is sampled with fewer frames, then fewer pixels,
# with the processor's own parameters: on the tiny Qwen3-VL fixture and long.mp4 (100 frames at
# 25 fps, 8 sampled at 2 fps) a small --ctx gives one notice on stderr, generation runs, and the
# frames and grid it reports are the ones transformers' Qwen3VLVideoProcessor gives for the
# lowered max_frames / size.longest_edge (computed here from its formulas, the indices from the
# processor's golden output); the prompt is the one --video-max-frames N gives. Below what the
# fewest frames and pixels take: one line, exit 1. A checkpoint sampling a fixed count, an image
# beside the video, Qwen3.5; the same in chat /video and qhx serve (usage "video_fitted"; a 413
# below the minimum). Skipped (77) without FFmpeg.
# Usage: video_fit.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1/qhx
FIX=$2/fixtures/parity
M=$FIX/qwen3vl-tiny-f32
V=$3/tests/data/video
T=$(mktemp -d)
PID= PID2=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; [ -n "$PID2" ] && kill $PID2 2>/dev/null; rm -rf "$T"' EXIT
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }

"$BIN" generate -m "$M" -p hi --chat --video "$V/h264.mp4" -n 1 --greedy --quiet >/dev/null 2>"$T/e"
grep -q "no FFmpeg" "$T/e" && { echo "video: this build has no FFmpeg: skipped"; exit 77; }

N=2 # tokens of answer
gen() { "$BIN" generate -m "$M" -p "Describe the video." --chat --video "$V/long.mp4" -n $N --greedy --json "$@"; }
field() { python3 -c 'import json,sys
d = json.load(open(sys.argv[1])); v = d
for k in sys.argv[2].split("."): v = v[k]
print(" ".join(map(str, v)) if isinstance(v, list) else v)' "$1" "$2" 2>/dev/null; }

# the prompt sizes the processor's parameters give, with room to spare
for f in 2 4 5; do gen --video-max-frames $f >"$T/p$f.json" 2>/dev/null; done
gen >"$T/full.json" 2>/dev/null
P2=$(field "$T/p2.json" n_prompt) P4=$(field "$T/p4.json" n_prompt) P5=$(field "$T/p5.json" n_prompt)
FULL=$(field "$T/full.json" n_prompt)
check '[ -n "$P2" ] && [ -n "$P4" ] && [ -n "$P5" ] && [ "$P2" -lt "$P4" ] && [ "$P4" -lt "$P5" ] && [ "$P5" -le "$FULL" ]' \
  "prompt sizes at 2, 4, 5 frames and as asked: $P2 $P4 $P5 $FULL"
check '[ "$(field "$T/full.json" video.fitted)" = False ]' "a video that fits is not fitted: $(cat "$T/full.json")"

# The processor (transformers 5.24, video_processing_qwen3_vl.py) for long.mp4 on the fixture's
# preprocessor_config.json: frames and grid for max_frames F and longest_edge PX.
hf() { python3 - "$M/preprocessor_config.json" "$1" "$2" <<'PY'
import json, math, sys
cfg = json.load(open(sys.argv[1])); F = int(sys.argv[2]); PX = int(sys.argv[3])
n, fps_meta, H, W = 100, 25.0, 32, 64           # long.mp4
fps, min_frames = 2.0, 4                        # the video processor's defaults
P, Mg, tf = cfg["patch_size"], cfg["merge_size"], cfg["temporal_patch_size"]
lo, hi = cfg["size"]["shortest_edge"], PX if PX > 0 else cfg["size"]["longest_edge"]
k = min(min(max(int(n / fps_meta * fps), min_frames), F), n)
factor = P * Mg
t = round(k / tf) * tf
h, w = round(H / factor) * factor, round(W / factor) * factor
if t * h * w > hi:
    beta = math.sqrt(k * H * W / hi)
    h = max(factor, math.floor(H / beta / factor) * factor); w = max(factor, math.floor(W / beta / factor) * factor)
elif t * h * w < lo:
    beta = math.sqrt(lo / (k * H * W))
    h = math.ceil(H * beta / factor) * factor; w = math.ceil(W * beta / factor) * factor
print(k, -(-k // tf), h // P, w // P)
PY
}

# 5 frames do not fit, 4 do: 4 frames, the grid and prompt of max_frames 4
CTX=$((P5 + N - 1))
gen --ctx $CTX >"$T/o" 2>"$T/e"
rc=$?
read -r k gt gh gw <<<"$(hf 4 0)"
check '[ $rc = 0 ] && [ "$(field "$T/o" n_generated)" = $N ]' "fitted to --ctx $CTX: generation runs: rc $rc, $(cat "$T/o" "$T/e")"
check '[ "$(grep -c "did not fit the context" "$T/e")" = 1 ] && grep -q "4 frames sampled instead of 8" "$T/e" && grep -q "as --video-max-frames 4)" "$T/e"' \
  "the notice says what was lowered: $(cat "$T/e")"
check '[ "$(field "$T/o" video.frames)" = "$k" ] && [ "$(field "$T/o" video.grid)" = "$gt $gh $gw" ] && [ "$(field "$T/o" video.fitted)" = True ]' \
  "frames and grid as the processor with max_frames 4 ($k; $gt $gh $gw): $(cat "$T/o")"
check '[ "$(field "$T/o" n_prompt)" = "$P4" ] && [ "$(field "$T/o" ids)" = "$(field "$T/p4.json" ids)" ]' \
  "the prompt and answer of --video-max-frames 4: $(field "$T/o" n_prompt) vs $P4"
gold=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["indices"])))' "$V/golden/long_mp4.max4.json")
check '[ "$gold" = "0 33 66 99" ] && [ "$k" = 4 ]' "the processor's golden indices for max_frames 4: $gold"

# the same in the chat REPL: the notice, then the answer
printf '/video %s\nDescribe the video.\n' "$V/long.mp4" | "$BIN" chat -m "$M" --ctx $CTX -n $N --greedy >"$T/chat" 2>"$T/e"
check '[ $? = 0 ] && grep -q "4 frames sampled instead of 8" "$T/e"' "chat /video fitted: $(cat "$T/e")"

# even 2 frames do not fit: 2 frames of fewer pixels, the grid of that longest_edge
CTX=$((P2 + N - 1))
gen --ctx $CTX >"$T/o" 2>"$T/e"
rc=$?
px=$(field "$T/o" video.max_pixels)
read -r k gt gh gw <<<"$(hf 2 "${px:-0}")"
check '[ $rc = 0 ] && [ "$(field "$T/o" n_generated)" = $N ] && [ "$px" -gt 0 ] 2>/dev/null' "pixels lowered for --ctx $CTX: rc $rc, $(cat "$T/o" "$T/e")"
check 'grep -q "2 frames sampled instead of 8, their pixels lowered to at most $px (from 1048576)" "$T/e"' "the pixel notice: $(cat "$T/e")"
check '[ "$(field "$T/o" video.frames)" = "$k" ] && [ "$(field "$T/o" video.grid)" = "$gt $gh $gw" ] && [ $(( $(field "$T/o" n_prompt) + N )) -le $CTX ]' \
  "2 frames at longest_edge $px as the processor ($k; $gt $gh $gw): $(cat "$T/o")"
read -r _ gt2 gh2 gw2 <<<"$(hf 2 $((px + 1)))"
check '[ $((gt2 * gh2 * gw2)) -gt $((gt * gh * gw)) ]' "longest_edge $px is the largest that fits: $((px + 1)) gives $gt2 $gh2 $gw2"

# below the fewest frames at the fewest pixels: one line, exit 1, with the way out
gen --ctx 20 >"$T/o" 2>"$T/e"
rc=$?
check '[ $rc = 1 ] && [ "$(wc -l < "$T/e")" = 1 ] && grep -q "even at 2 frames of at most 1024 pixels" "$T/e" && grep -q -- "--ctx" "$T/e"' \
  "refused below the minimum: rc $rc, $(cat "$T/e")"
# a frame cap asked for is where the lowering starts
gen --ctx $((P5 + N - 1)) --video-max-frames 6 >"$T/o" 2>"$T/e"
check '[ $? = 0 ] && grep -q "4 frames sampled instead of 6" "$T/e"' "--video-max-frames 6 lowered to 4: $(cat "$T/e")"
# a checkpoint that samples a fixed count (num_frames 8): the count itself is lowered, to an even
# count as the processor rounds it to the temporal patch
mkdir "$T/nf" && cp "$M"/*.json "$M/model.safetensors" "$T/nf/"
printf '{"num_frames": 8, "do_sample_frames": true, "size": {"shortest_edge": 1024, "longest_edge": 1048576}}' \
  >"$T/nf/video_preprocessor_config.json"
"$BIN" generate -m "$T/nf" -p "Describe the video." --chat --video "$V/long.mp4" -n $N --greedy --json --ctx $((P5 + N - 1)) >"$T/o" 2>"$T/e"
check '[ $? = 0 ] && grep -q "4 frames sampled instead of 8" "$T/e" && [ "$(field "$T/o" video.frames)" = 4 ] && [ "$(field "$T/o" n_prompt)" = "$P4" ]' \
  "num_frames 8 lowered to 4: $(cat "$T/o" "$T/e")"
# an image beside the video: the video is fitted with the image at one pad, the image takes what is left
"$BIN" generate -m "$M" -p "Describe the video." --chat --image "$3/tests/data/image/rgb8.png" --video "$V/long.mp4" -n $N --greedy --json \
  --ctx $((P5 + N + 2)) >"$T/o" 2>"$T/e"
check '[ $? = 0 ] && [ "$(field "$T/o" video.fitted)" = True ] && [ $(( $(field "$T/o" n_prompt) + N )) -le $((P5 + N + 2)) ]' \
  "image and video fitted together: $(cat "$T/o" "$T/e")"
# Qwen3.5 with its vision tower, another clip
"$BIN" generate -m "$FIX/qwen35vl-tiny-f32" -p "Describe." --chat --video "$V/long.mp4" -n $N --greedy --json >"$T/big" 2>/dev/null
Q=$(field "$T/big" n_prompt)
"$BIN" generate -m "$FIX/qwen35vl-tiny-f32" -p "Describe." --chat --video "$V/long.mp4" -n $N --greedy --json --ctx $((Q + N - 1)) >"$T/o" 2>"$T/e"
check '[ $? = 0 ] && [ "$(field "$T/o" video.fitted)" = True ] && [ $(( $(field "$T/o" n_prompt) + N )) -le $((Q + N - 1)) ]' \
  "Qwen3.5 video fitted: $(cat "$T/o" "$T/e")"

# qhx serve: the same lowering, said in the usage
"$BIN" serve -m "$M" --port 0 --ctx 60 >"$T/out" 2>"$T/err" &
PID=$!
for _ in $(seq 600); do grep -q listening "$T/out" && break; sleep 0.05; done
URL=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$T/out")
check '[ -n "$URL" ]' "the server starts: $(cat "$T/out" "$T/err")"
python3 - "$V/long.mp4" >"$T/req" <<'PY'
import base64, json, sys
url = "data:video/mp4;base64," + base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": url}},
                  {"type": "text", "text": "Describe the video."}]}], "max_tokens": 2, "temperature": 0}))
PY
code=$(curl -s -o "$T/resp" -w '%{http_code}' "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d @"$T/req")
check '[ "$code" = 200 ] && [ "$(field "$T/resp" usage.video_fitted)" = True ] && [ "$(field "$T/resp" usage.video_frames_asked)" = 8 ] && [ "$(field "$T/resp" usage.video_frames)" -lt 8 ] && [ $(( $(field "$T/resp" usage.prompt_tokens) + 2 )) -le 60 ]' \
  "served video fitted to --ctx 60: $code $(head -c 400 "$T/resp")"
# a single turn that does not fit even at the minimum: a 413 naming the counts, the server goes on
"$BIN" serve -m "$M" --port 0 --ctx 24 >"$T/out2" 2>"$T/err2" &
PID2=$!
for _ in $(seq 600); do grep -q listening "$T/out2" && break; sleep 0.05; done
URL2=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$T/out2")
code=$(curl -s -o "$T/resp" -w '%{http_code}' "$URL2/v1/chat/completions" -H 'Content-Type: application/json' -d @"$T/req")
check '[ "$code" = 413 ] && grep -q "even at 2 frames" "$T/resp"' "served video below the minimum: $code $(head -c 400 "$T/resp")"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL2/v1/models")
check '[ "$code" = 200 ]' "the server goes on after the refusal: $code"
kill $PID2 2>/dev/null
PID2=
exit $fail
