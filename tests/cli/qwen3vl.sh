#!/usr/bin/env bash
# qhx embed-image / logits / generate on the qwen3vl-tiny-f32 fixture: output shapes, greedy ids
# equal to the golden ones (text and image prompts), and clear errors for a wrong image-pad count,
# pads without an image, --image on a model without vision, and a missing image file.
# Usage: qwen3vl.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1/qhx
F=$2/fixtures/parity/qwen3vl-tiny-f32
[ -d "$F" ] || { echo "FAIL: no fixture at $F (the test data is part of the tree, under tests/data)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: no python3 to read the golden json (scripts/deps.sh installs it)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }

field() { # field PROMPT KEY -> comma-separated ids from prompts.json (KEY ids) or golden.json (KEY greedy)
  python3 - "$F" "$1" "$2" <<'PY'
import json, sys
f, name, key = sys.argv[1:]
if key == "ids":
    p = [x for x in json.load(open(f + "/prompts.json")) if x["name"] == name][0]
    print(",".join(map(str, p["ids"])))
else:
    print(" ".join(map(str, json.load(open(f + "/golden.json"))["prompts"][name]["greedy"])))
PY
}

IMG_IDS=$(field img64x96 ids)
TXT_IDS=$(field p033 ids)

"$BIN" embed-image -m "$F" --image "$F/image-64x96.png" --out "$T/e.f32"
check '[ "$(stat -c %s "$T/e.f32")" = 4608 ]' "embed-image writes 6 x 192 floats"

"$BIN" logits -m "$F" --ids "$IMG_IDS" --image "$F/image-64x96.png" --out "$T/l.f32"
check '[ "$(stat -c %s "$T/l.f32")" = $((21 * 1024 * 4)) ]' "logits with an image: 21 rows of 1024"
"$BIN" logits -m "$F" --ids "$IMG_IDS" --prefill 7 --image "$F/image-64x96.png" --out "$T/l2.f32"
check '[ "$(stat -c %s "$T/l2.f32")" = $((21 * 1024 * 4)) ]' "logits with --prefill inside the image run"
"$BIN" logits -m "$F" --ids "$TXT_IDS" --out "$T/t.f32"
check '[ "$(stat -c %s "$T/t.f32")" = $((33 * 1024 * 4)) ]' "text-only logits"

got=$("$BIN" generate -m "$F" --ids "$IMG_IDS" --image "$F/image-64x96.png" -n 32 --greedy --ignore-eos --print-ids)
check '[ "$got" = "$(field img64x96 greedy)" ]' "image greedy ids equal the golden ($got)"
got=$("$BIN" generate -m "$F" --ids "$TXT_IDS" -n 32 --greedy --ignore-eos --print-ids)
check '[ "$got" = "$(field p033 greedy)" ]' "text greedy ids equal the golden ($got)"

BAD_IDS=$(echo "$IMG_IDS" | sed 's/1002,//')   # one image pad fewer
"$BIN" logits -m "$F" --ids "$BAD_IDS" --image "$F/image-64x96.png" --out "$T/x.f32" 2>"$T/err"
rc=$?
check '[ $rc = 1 ] && grep -q "5 image-pad tokens" "$T/err" && grep -q "needs 6" "$T/err"' "pad count mismatch: $(cat "$T/err")"
"$BIN" generate -m "$F" --ids "$IMG_IDS" -n 2 --greedy --print-ids 2>"$T/err"
rc=$?
check '[ $rc = 1 ] && grep -q "no image" "$T/err"' "pads without --image: $(cat "$T/err")"
Q35=$2/fixtures/parity/qwen35-tiny-f32
if [ -d "$Q35" ]; then
  "$BIN" logits -m "$Q35" --ids 1,2,3 --image "$F/image-64x96.png" --out "$T/x.f32" 2>"$T/err"
  rc=$?
  check '[ $rc = 1 ] && grep -q "takes images" "$T/err"' "--image on Qwen3.5: $(cat "$T/err")"
fi
"$BIN" embed-image -m "$F" --image "$T/missing.png" --out "$T/x.f32" 2>"$T/err"
rc=$?
check '[ $rc = 1 ] && grep -q "missing.png" "$T/err"' "missing image: $(cat "$T/err")"
"$BIN" embed-image -m "$F" --out "$T/x.f32" 2>/dev/null
check '[ $? = 2 ]' "usage error exits 2"
exit $fail
