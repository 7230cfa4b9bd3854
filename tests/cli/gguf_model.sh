#!/usr/bin/env bash
# GGUF files as models (tests/data/gguf, made by llama.cpp's converter and llama-quantize; its
# README says how): greedy parity with llama.cpp on every file and golden prompt
# (lib/gguf_parity.py), the F32 files and their vision towers (--mmproj) against the
# safetensors cases' goldens, the tokenizer read from a file against tokenizer.json, and broken
# files and wrong pairings: one line, exit 1.
# Usage: gguf_model.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 DATA=$2 SRC=$3
QHX=$BIN/qhx
G=$DATA/gguf
P=$DATA/fixtures/parity
tmp=$(mktemp -d /tmp/qhx_gguf_model.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0

# 1. llama.cpp's greedy continuations and logits on every quantized and f16 file
python3 "$SRC/tests/cli/lib/gguf_parity.py" "$QHX" "$DATA" >"$tmp/parity.txt" 2>&1 || {
  echo "FAIL: greedy parity with llama.cpp:"; grep -v "  ok$" "$tmp/parity.txt" | head -20; fail=1; }
tail -1 "$tmp/parity.txt"

# 2. F32 files: the safetensors cases' goldens exactly; with their towers, the image prompts too
for c in qwen35-tiny qwen3vl-tiny qwen35-tiny-untied; do # untied: the head is output.weight
  "$QHX" parity -m "$G/$c-F32.gguf" --golden "$P/$c-f32" --gate exact >"$tmp/p.txt" 2>&1 ||
    { echo "FAIL: $c-F32.gguf against $c-f32's goldens:"; tail -5 "$tmp/p.txt"; fail=1; }
done
for c in qwen3vl-tiny qwen35vl-tiny; do
  "$QHX" parity -m "$G/$c-F32.gguf" --mmproj "$G/mmproj-$c-F16.gguf" --golden "$P/$c-f32" >"$tmp/p.txt" 2>&1 ||
    { echo "FAIL: $c with its F16 tower against $c-f32's goldens:"; tail -5 "$tmp/p.txt"; fail=1; }
  grep -q "^img64x96 .*PASS" "$tmp/p.txt" || { echo "FAIL: $c: the image prompts did not run"; tail -4 "$tmp/p.txt"; fail=1; }
done

# 3. text in, text out: the file's own tokenizer, and generation through the CLI
text='Hello, world! <|im_start|>user
  tabs	and  spaces, 123 456'
ids_gguf=$(printf '%s' "$text" | "$QHX" tokenize -m "$G/qwen35-tiny-Q8_0.gguf" 2>&1)
ids_json=$(printf '%s' "$text" | "$QHX" tokenize --tokenizer "$P/qwen35-tiny-f32/tokenizer.json" 2>&1)
[ "$ids_gguf" = "$ids_json" ] || { echo "FAIL: tokenizer from the GGUF: '$ids_gguf' vs tokenizer.json '$ids_json'"; fail=1; }
out=$("$QHX" generate -m "$G/qwen35-tiny-Q4_K_M.gguf" -p "Hello" -n 8 --greedy 2>"$tmp/err") ||
  { echo "FAIL: generate on a Q4_K_M file: $(tail -2 "$tmp/err")"; fail=1; }
grep -q "generated 8 tokens" "$tmp/err" || { echo "FAIL: generate did not make 8 tokens: $(tail -2 "$tmp/err")"; fail=1; }

# the file's MTP block (blk.N.nextn.*) drafts: --spec mtp gives the plain greedy ids
plain=$("$QHX" generate -m "$G/qwen35-tiny-Q8_0.gguf" -p "Hello world" -n 12 --greedy --print-ids 2>/dev/null)
spec=$("$QHX" generate -m "$G/qwen35-tiny-Q8_0.gguf" -p "Hello world" -n 12 --greedy --print-ids --spec mtp 2>"$tmp/err")
[ -n "$plain" ] && [ "$plain" = "$spec" ] && grep -q "drafts accepted" "$tmp/err" ||
  { echo "FAIL: --spec mtp on a GGUF: '$spec' vs '$plain': $(tail -1 "$tmp/err")"; fail=1; }

# forge FILE.gguf OUT: the files as they are and run plans; the bundle gives the file's ids,
# text and image, and an option that would change the blocks is refused
"$QHX" forge "$G/qwen3vl-tiny-Q8_0.gguf" "$tmp/bundle" --mmproj "$G/mmproj-qwen3vl-tiny-F16.gguf" -q 2>"$tmp/err" ||
  { echo "FAIL: forge from a GGUF: $(cat "$tmp/err")"; fail=1; }
cmp -s "$G/qwen3vl-tiny-Q8_0.gguf" "$tmp/bundle/qwen3vl-tiny-Q8_0.gguf" || { echo "FAIL: forge changed the GGUF file"; fail=1; }
direct=$("$QHX" generate -m "$G/qwen3vl-tiny-Q8_0.gguf" -p "Hello world" -n 8 --greedy --print-ids 2>/dev/null)
bundled=$("$QHX" generate -m "$tmp/bundle/qwen3vl-tiny-q8_0-262144.json" -p "Hello world" -n 8 --greedy --print-ids 2>"$tmp/err")
[ -n "$direct" ] && [ "$direct" = "$bundled" ] || { echo "FAIL: the forged bundle: '$bundled' vs '$direct': $(tail -1 "$tmp/err")"; fail=1; }
img=$DATA/fixtures/parity/qwen3vl-tiny-f32/image-64x64.png
direct=$("$QHX" generate -m "$G/qwen3vl-tiny-Q8_0.gguf" --mmproj "$G/mmproj-qwen3vl-tiny-F16.gguf" --image "$img" -p what --chat -n 6 --greedy --print-ids 2>/dev/null)
bundled=$("$QHX" generate -m "$tmp/bundle/qwen3vl-tiny-q8_0-vlm-262144.json" --image "$img" -p what --chat -n 6 --greedy --print-ids 2>"$tmp/err")
[ -n "$direct" ] && [ "$direct" = "$bundled" ] || { echo "FAIL: the forged bundle with an image: '$bundled' vs '$direct'"; fail=1; }
"$QHX" forge "$G/qwen3vl-tiny-Q8_0.gguf" "$tmp/b2" --precision q4 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "blocks are kept as they are" "$tmp/err" || { echo "FAIL: forge GGUF --precision: exit $rc $(cat "$tmp/err")"; fail=1; }

# 4. broken files and wrong pairings: one line naming the problem, exit 1
one_line() { # NAME NEEDLE CMD...
  local name=$1 needle=$2; shift 2
  "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc != 1 ] || [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -qF -- "$needle" "$tmp/err"; then
    echo "FAIL: $name: exit $rc, want 1 and one line with '$needle': $(head -c 400 "$tmp/err")"; fail=1
  fi
}
F=$G/qwen35-tiny-Q8_0.gguf
head -c $(( $(stat -c %s "$F") - 1000 )) "$F" >"$tmp/short.gguf"
one_line truncated "short.gguf" "$QHX" generate -m "$tmp/short.gguf" -p hi -n 1
python3 - "$F" "$tmp" <<'PY'
import sys
src, out = sys.argv[1], sys.argv[2]
b = open(src, "rb").read()
def patched(old, new):  # same length: offsets stay valid
    assert len(old) == len(new) and b.count(old) >= 1, old
    return b.replace(old, new, 1)
open(out + "/arch.gguf", "wb").write(patched(b"\x06\x00\x00\x00\x00\x00\x00\x00qwen35", b"\x06\x00\x00\x00\x00\x00\x00\x00llama9"))
open(out + "/key.gguf", "wb").write(patched(b"qwen35.embedding_length", b"qwen35.embedding_lengtX"))
open(out + "/notgguf.gguf", "wb").write(b"JUNK" + b[4:])
PY
one_line "unknown architecture" "architecture 'llama9' is not one qhexrt runs" "$QHX" generate -m "$tmp/arch.gguf" -p hi -n 1
one_line "missing key" "qwen35.embedding_length" "$QHX" generate -m "$tmp/key.gguf" -p hi -n 1
one_line "not a GGUF" "not a GGUF file" "$QHX" generate -m "$tmp/notgguf.gguf" -p hi -n 1
one_line "a tower as the model" "--mmproj" "$QHX" generate -m "$G/mmproj-qwen3vl-tiny-F16.gguf" -p hi -n 1
one_line "a model as the tower" "not a vision tower" "$QHX" generate -m "$G/qwen3vl-tiny-F32.gguf" --mmproj "$F" -p hi -n 1
one_line "--mmproj with a folder" "--mmproj goes with a GGUF model file" "$QHX" generate -m "$P/qwen3vl-tiny-f32" --mmproj "$G/mmproj-qwen3vl-tiny-F16.gguf" -p hi -n 1

# 5. the chat template in the file: a released one silently, another in the family's turn marks
# with a note, one that writes other turns refused (a chat prompt would silently differ)
EDIT="python3 $SRC/tests/cli/lib/gguf_edit.py"
printf '{%%- for m in messages %%}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%%- endfor %%}' >"$tmp/other.jinja"
printf '{%%- for m in messages %%}<|start_header_id|>{{ m.role }}<|end_header_id|>{{ m.content }}<|eot_id|>{%%- endfor %%}' >"$tmp/foreign.jinja"
$EDIT "$F" "$tmp/known.gguf" tokenizer.chat_template "$SRC/tests/data/chat_templates/qwen3_5-4b.jinja"
$EDIT "$F" "$tmp/other.gguf" tokenizer.chat_template "$tmp/other.jinja"
$EDIT "$F" "$tmp/foreign.gguf" tokenizer.chat_template "$tmp/foreign.jinja"
"$QHX" generate -m "$tmp/known.gguf" -p hi --chat -n 2 --greedy >/dev/null 2>"$tmp/err" && ! grep -q chat_template "$tmp/err" ||
  { echo "FAIL: the released template: $(head -c 300 "$tmp/err")"; fail=1; }
"$QHX" generate -m "$tmp/other.gguf" -p hi --chat -n 2 --greedy >/dev/null 2>"$tmp/err" && grep -q "is not a released one" "$tmp/err" ||
  { echo "FAIL: another ChatML template: $(head -c 300 "$tmp/err")"; fail=1; }
one_line "a foreign chat template" "does not write Qwen3.5 turns" "$QHX" generate -m "$tmp/foreign.gguf" -p hi --chat -n 2
"$QHX" generate -m "$tmp/foreign.gguf" -p hi -n 2 --greedy >/dev/null 2>&1 || { echo "FAIL: plain text on a foreign template refused"; fail=1; }

[ $fail = 0 ] && echo "gguf_model: ok"
exit $fail
