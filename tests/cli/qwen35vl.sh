#!/usr/bin/env bash
# Qwen3.5 with images through the commands: bundles forged from qwen35vl-tiny-f32 (a -vlm-
# manifest beside the text one; --text-only carries no vision weights), the image prompt on the
# -vlm- manifest, the text manifest and a text-only bundle refusing images, two images in one
# prompt, and the random checkpoint with its tower (forge --random qwen3_5 --vision).
# Run as: bash qwen35vl.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
F=$2/fixtures/parity/qwen35vl-tiny-f32
[ -d "$F" ] || { echo "FAIL: qwen35vl: $F missing (the test data is part of the tree)" >&2; exit 1; }
T=$(mktemp -d /tmp/qhx_qwen35vl.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
field() { python3 -c "import json,sys; g=json.load(open(sys.argv[1]))['prompts'][sys.argv[2]]; print(' '.join(map(str, g[sys.argv[3]][:int(sys.argv[4])])))" "$F/golden.json" "$1" "$2" "$3"; }
ids_of() { python3 -c "import json,sys; print(','.join(str(i) for i in [p for p in json.load(open(sys.argv[1])) if p['name']==sys.argv[2]][0]['ids']))" "$F/prompts.json" "$1"; }
IMG=$(ids_of img64x96)

# ---- bundles ----------------------------------------------------------------------------------
"$QHX" forge "$F" "$T/b" --precision f16 --quiet || bad "forge f16"
[ -f "$T/b/qwen35vl-tiny-f32-262144.json" ] && [ -f "$T/b/qwen35vl-tiny-f32-vlm-262144.json" ] || bad "manifests: $(ls "$T/b")"
grep -q '"host_op": "qwen3_5_vl_generate"' "$T/b/qwen35vl-tiny-f32-vlm-262144.json" || bad "vlm host-op: $(cat "$T/b/qwen35vl-tiny-f32-vlm-262144.json")"
grep -q '"host_op": "qwen3_5_generate"' "$T/b/qwen35vl-tiny-f32-262144.json" || bad "text host-op"
grep -q 'model.visual.' "$T/b/model.safetensors.index.json" || bad "the bundle lacks the tower"
# the image prompt on the -vlm- manifest (f16 weights): the golden's first 8 greedy tokens
got=$("$QHX" generate -m "$T/b/qwen35vl-tiny-f32-vlm-262144.json" --ids "$IMG" --image "$F/image-64x96.png" -n 8 --greedy --ignore-eos --print-ids 2>"$T/err")
[ "$got" = "$(field img64x96 greedy 8)" ] || bad "vlm manifest greedy: '$got' vs '$(field img64x96 greedy 8)': $(cat "$T/err")"
# the text manifest takes no images, and names the one that does
"$QHX" generate -m "$T/b/qwen35vl-tiny-f32-262144.json" --ids "$IMG" --image "$F/image-64x96.png" -n 2 2>"$T/err" >/dev/null
rc=$?
[ $rc = 1 ] && grep -q "takes no images" "$T/err" && grep -q -- "-vlm-" "$T/err" || bad "text manifest with --image: rc $rc: $(cat "$T/err")"
# --text-only: no vision weights, one manifest
"$QHX" forge "$F" "$T/t" --precision f16 --text-only --quiet || bad "forge --text-only"
[ ! -e "$T/t/vision-f16.safetensors" ] || bad "--text-only wrote the tower"
grep -q 'model.visual.' "$T/t/model.safetensors.index.json" && bad "--text-only index names model.visual.*"
[ "$(ls "$T/t"/*.json | grep -c -- '-262144.json')" = 1 ] || bad "--text-only manifests: $(ls "$T/t")"
"$QHX" generate -m "$T/t" --ids "$IMG" --image "$F/image-64x96.png" -n 2 2>"$T/err" >/dev/null
[ $? = 1 ] || bad "--text-only bundle took an image"
"$QHX" generate -m "$T/t" --ids "$(ids_of p033)" -n 4 --greedy --ignore-eos --print-ids >/dev/null 2>"$T/err" || bad "--text-only text: $(cat "$T/err")"

# ---- the checkpoint folder --------------------------------------------------------------------
got=$("$QHX" generate -m "$F" --ids "$IMG" --image "$F/image-64x96.png" -n 32 --greedy --ignore-eos --print-ids 2>"$T/err")
[ "$got" = "$(field img64x96 greedy 32)" ] || bad "folder greedy: $got: $(cat "$T/err")"
# two images, one vision_start .. vision_end run each, in the order of the --image options
TWO=969,$(printf '972,%.0s' 1 2 3 4 5 6)970,5,969,$(printf '972,%.0s' 1 2 3 4)970,961,12,198
a=$("$QHX" generate -m "$F" --ids "$TWO" --image "$F/image-64x96.png" --image "$F/image-64x64.png" -n 8 --greedy --ignore-eos --print-ids 2>"$T/err") ||
  bad "two images: $(cat "$T/err")"
# the same ids with the images swapped: the 64x64 image has 4 tokens, not 6
"$QHX" generate -m "$F" --ids "$TWO" --image "$F/image-64x64.png" --image "$F/image-64x96.png" -n 2 2>"$T/err" >/dev/null
[ $? = 1 ] && grep -q "image 1" "$T/err" && grep -q "needs 4" "$T/err" || bad "swapped images, same ids: $(cat "$T/err")"
SWAP=969,$(printf '972,%.0s' 1 2 3 4)970,5,969,$(printf '972,%.0s' 1 2 3 4 5 6)970,961,12,198
b=$("$QHX" generate -m "$F" --ids "$SWAP" --image "$F/image-64x64.png" --image "$F/image-64x96.png" -n 8 --greedy --ignore-eos --print-ids 2>"$T/err") ||
  bad "two images swapped: $(cat "$T/err")"
[ -n "$a" ] && [ "$a" != "$b" ] || bad "swapping the images changed nothing: '$a' / '$b'"
"$QHX" logits -m "$F" --ids "$TWO" --image "$F/image-64x96.png" --image "$F/image-64x64.png" --out "$T/two.f32" 2>"$T/err" ||
  bad "logits, two images: $(cat "$T/err")"
[ "$(stat -c %s "$T/two.f32" 2>/dev/null)" = $((18 * 1024 * 4)) ] || bad "logits, two images: $(stat -c %s "$T/two.f32" 2>/dev/null) bytes"
# a chat turn with two images
"$QHX" generate -m "$F" -p hi --chat --image "$F/image-64x96.png" --image "$F/image-64x64.png" -n 2 --greedy --json >"$T/c.json" 2>"$T/err" ||
  bad "chat, two images: $(cat "$T/err")"

# a conversation with an image saved and restored goes on as in one process (the next text
# position, behind the row count after an image, is part of the session file)
printf '/image %s\nWhat is this?\nAnd now?\n/bye\n' "$F/image-64x96.png" | "$QHX" chat -m "$F" -n 4 --greedy >"$T/one.out" 2>/dev/null
printf '/image %s\nWhat is this?\n/save %s\n/bye\n' "$F/image-64x96.png" "$T/s.state" | "$QHX" chat -m "$F" -n 4 --greedy >/dev/null 2>"$T/err" ||
  bad "chat /save: $(cat "$T/err")"
printf '/load %s\nAnd now?\n/bye\n' "$T/s.state" | "$QHX" chat -m "$F" -n 4 --greedy >"$T/two.out" 2>"$T/err" || bad "chat /load: $(cat "$T/err")"
[ -s "$T/two.out" ] && [ "$(sed -n 2p "$T/one.out")" = "$(sed -n 1p "$T/two.out")" ] ||
  bad "restored image conversation: '$(sed -n 2p "$T/one.out")' vs '$(sed -n 1p "$T/two.out")'"

# ---- a random checkpoint with the tower --------------------------------------------------------
"$QHX" forge --random qwen3_5 "$T/r" --preset tiny --vision --quiet || bad "forge --random --vision"
"$QHX" embed-image -m "$T/r" --image "$F/image-64x64.png" --out "$T/r.f32" 2>"$T/err" || bad "embed-image, random: $(cat "$T/err")"
[ "$(stat -c %s "$T/r.f32" 2>/dev/null)" = $((4 * 64 * 4)) ] || bad "random tower: $(stat -c %s "$T/r.f32" 2>/dev/null) bytes"
"$QHX" forge --random qwen3_vl "$T/x" --preset tiny --vision --quiet 2>"$T/err"
[ $? = 2 ] || bad "--vision on qwen3_vl: $(cat "$T/err")"

[ $fail = 0 ] && echo "qwen35vl: ok"
exit $fail
