#!/usr/bin/env bash
# qhx generate --video and qhx chat /video on the tiny vision fixtures: greedy ids equal to
# transformers' on the same video prompt (tests/data/video/model), the chat REPL's answer equal to
# generate's, --video-fps / --video-max-frames changing the prompt as the processor would, and one
# line with exit 1 (runtime) or 2 (usage) for every bad input. Skipped (77) without FFmpeg.
# Usage: video.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1/qhx
FIX=$2/fixtures/parity
V=$3/tests/data/video
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }
golden() { python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["greedy"])))' "$1"; }

"$BIN" generate -m "$FIX/qwen3vl-tiny-f32" -p hi --chat --video "$V/h264.mp4" -n 1 --greedy --quiet >/dev/null 2>"$T/e"
if grep -q "no FFmpeg" "$T/e"; then
  [ "$(wc -l < "$T/e")" = 1 ] || { echo "FAIL: the no-FFmpeg message is not one line"; exit 1; }
  echo "video: this build has no FFmpeg: skipped"; exit 77
fi

# greedy against transformers, both families (Qwen3.5 with its template's default thinking)
out=$("$BIN" generate -m "$FIX/qwen3vl-tiny-f32" -p "Describe the video." --chat --video "$V/h264.mp4" -n 16 --greedy --ignore-eos --print-ids --quiet 2>"$T/e")
check '[ "$out" = "$(golden "$V/model/qwen3vl-tiny-f32.h264.json")" ]' "Qwen3-VL video greedy: $out ($(cat "$T/e"))"
out=$("$BIN" generate -m "$FIX/qwen35vl-tiny-f32" -p "Describe the video." --chat --think --video "$V/vp9.webm" -n 16 --greedy --ignore-eos --print-ids --quiet 2>"$T/e")
check '[ "$out" = "$(golden "$V/model/qwen35vl-tiny-f32.vp9.json")" ]' "Qwen3.5 video greedy: $out ($(cat "$T/e"))"

# embed-image --video: the rows of every temporal group, as many as HF's vision tower gives
"$BIN" embed-image -m "$FIX/qwen3vl-tiny-f32" --video "$V/h264.mp4" --out "$T/ve.f32" 2>"$T/e"
check '[ "$(stat -c %s "$T/ve.f32")" = "$(stat -c %s "$V/model/qwen3vl-tiny-f32.h264.video_embd.f32")" ]' "embed-image --video size: $(cat "$T/e")"
"$BIN" embed-image -m "$FIX/qwen3vl-tiny-f32" --video "$V/h264.mp4" --image "$V/../image/rgb8.png" --out "$T/x" 2>/dev/null
check '[ $? = 2 ]' "embed-image with --video and --image is a usage error"

# every clip runs (codecs, containers, odd size, rotation, variable frame rate)
for f in h264.mp4 vp9.webm mjpeg.avi odd.mkv rotate.mp4 rotate180.mp4 rotate270.mp4 vfr.mkv long.mp4; do
  "$BIN" generate -m "$FIX/qwen3vl-tiny-f32" -p "Describe." --chat --video "$V/$f" -n 2 --greedy --quiet >/dev/null 2>"$T/e"
  check '[ $? = 0 ]' "generate --video $f: $(cat "$T/e")"
done

# the sampling options change the prompt: long.mp4 (100 frames at 25 fps) gives 8 frames at 2 fps
# (4 groups), 4 at --video-fps 1, 4 with --video-max-frames 4; with --json the prompt size shows
n_prompt() { "$BIN" generate -m "$FIX/qwen3vl-tiny-f32" -p x --chat --video "$V/long.mp4" -n 1 --greedy --json "$@" 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["n_prompt"])'; }
a=$(n_prompt); b=$(n_prompt --video-fps 1); c=$(n_prompt --video-max-frames 4)
check '[ -n "$a" ] && [ -n "$b" ] && [ "$a" -gt "$b" ] && [ "$b" = "$c" ]' "prompt sizes: default $a, fps 1 $b, max 4 $c"

# chat /video: the same answer as generate on the same turn
printf '/video %s\nDescribe the video.\n' "$V/h264.mp4" | "$BIN" chat -m "$FIX/qwen3vl-tiny-f32" -n 6 --greedy --ignore-eos >"$T/chat" 2>"$T/e"
"$BIN" generate -m "$FIX/qwen3vl-tiny-f32" -p "Describe the video." --chat --video "$V/h264.mp4" -n 6 --greedy --ignore-eos --quiet >"$T/gen" 2>>"$T/e"
check 'cmp -s "$T/chat" "$T/gen"' "chat /video answers as generate does: '$(cat "$T/chat")' vs '$(cat "$T/gen")' ($(cat "$T/e"))"
printf '/video %s\n/video %s\nhi\n' "$V/missing.mp4" "$V/garbage.mp4" | "$BIN" chat -m "$FIX/qwen3vl-tiny-f32" -n 2 --greedy >/dev/null 2>"$T/e"
check '[ $? = 0 ] && grep -q "missing.mp4: No such file" "$T/e" && grep -q "garbage.mp4: not a video file" "$T/e"' "chat: bad /video files are reported and the chat goes on: $(cat "$T/e")"

# bad input: one line each, exit 1
bad() { # FILE MODEL WORDS
  "$BIN" generate -m "$FIX/$2" -p x --chat --video "$1" -n 1 --greedy >/dev/null 2>"$T/e"
  rc=$? words=$3
  check '[ $rc = 1 ] && [ "$(wc -l < "$T/e")" = 1 ] && grep -q "$words" "$T/e"' "bad video $1 on $2: rc $rc, $(cat "$T/e")"
}
bad "$V/truncated.mp4" qwen3vl-tiny-f32 "not a video file"
bad "$V/garbage.mp4" qwen3vl-tiny-f32 "not a video file"
bad "$V/audio.wav" qwen3vl-tiny-f32 "no video stream"
bad "$V/empty.avi" qwen3vl-tiny-f32 "holds no frames"
bad "$V/one.mp4" qwen3vl-tiny-f32 "fewer than the temporal patch"
bad "$V/missing.mp4" qwen3vl-tiny-f32 "cannot open"
bad "$V/README.md" qwen3vl-tiny-f32 "not a video file"
bad "$V/h264.mp4" qwen35-tiny-f32 "takes no images"
head -c 1000 "$V/vp9.webm" > "$T/cut.webm" # cut inside the frames: the header opens
bad "$T/cut.webm" qwen3vl-tiny-f32 "cut.webm"

# usage errors: exit 2
usage() { "$BIN" generate -m "$FIX/qwen3vl-tiny-f32" "$@" >/dev/null 2>"$T/e"; rc=$?
  check '[ $rc = 2 ] && [ "$(wc -l < "$T/e")" = 1 ]' "usage $*: rc $rc, $(cat "$T/e")"; }
usage -p x --video "$V/h264.mp4"
usage -p x --chat --video-fps 2
usage -p x --chat --video "$V/h264.mp4" --video-fps 0
usage -p x --chat --video "$V/h264.mp4" --video-fps abc
usage -p x --chat --video "$V/h264.mp4" --video-max-frames 1
usage -p x --chat --video "$V/h264.mp4" --video-max-frames 100000
usage -p x --chat --video "$V/h264.mp4" --video "$V/vp9.webm"
usage -p x --chat --video ""
exit $fail
