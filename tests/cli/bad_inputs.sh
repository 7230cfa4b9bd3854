#!/usr/bin/env bash
# The bad-input matrix of the model-running commands (generate, logits, embed-image, tokenize,
# forge): missing, unreadable and non-regular files, damaged checkpoints (truncated, a tensor
# missing or of the wrong dtype or shape), run plans naming missing artifacts or the wrong
# family, a tokenizer larger than the embedding, context overflows, broken and extreme images,
# invalid UTF-8, bad option values and failing writes. Each case must give the documented exit
# code (docs/robustness.md), exactly one stderr line naming the problem, nothing on stdout, and
# leave no output file (nor a temporary one) behind.
# Run as: bash bad_inputs.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FIX=$2/fixtures/parity
SRC=$3
FX=$FIX/qwen35-tiny-f32
VL=$FIX/qwen3vl-tiny-f32
[ -d "$FX" ] && [ -d "$VL" ] || { echo "FAIL: bad_inputs: fixtures missing under $FIX (the test data is part of the tree, under tests/data)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: bad_inputs: python3 missing (scripts/deps.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_bad_inputs.XXXXXX)
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# check CODE NEEDLE ARGS...: qhx ARGS exits CODE with exactly one stderr line containing NEEDLE
# and nothing on stdout. stdin comes from $IN (default /dev/null); runs at most 120 s (a hang fails).
check() {
  local want=$1 needle=$2
  shift 2
  timeout 120 "$QHX" "$@" <"${IN:-/dev/null}" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" != "$want" ]; then bad "qhx $* -> exit $rc, want $want: $(head -c 300 "$tmp/err")"; return; fi
  if [ "$lines" != 1 ]; then bad "qhx $* -> $lines stderr lines, want 1: $(head -c 600 "$tmp/err")"; return; fi
  grep -qF -- "$needle" "$tmp/err" || { bad "qhx $* -> '$(cat "$tmp/err")' lacks '$needle'"; return; }
  [ -s "$tmp/out" ] && { bad "qhx $* -> wrote to stdout: $(head -c 200 "$tmp/out")"; return; }
  echo "ok: $(cat "$tmp/err")"
}

# no_output FILE: neither FILE nor a temporary FILE.tmp-* exists
no_output() {
  [ -e "$1" ] && bad "$1 was left behind"
  ls "$1".tmp* >/dev/null 2>&1 && bad "a temporary $1.tmp* was left behind"
  return 0
}

# hf_copy SRC DST: a checkpoint folder whose files are links to SRC's (replace some, then run)
hf_copy() {
  mkdir -p "$2"
  for f in "$1"/*.json "$1"/model.safetensors; do ln -s "$f" "$2/"; done
}

# edit_st SRC DST PYTHON: rewrite the JSON header of safetensors SRC into DST; PYTHON edits `h`
edit_st() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
src, dst, code = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
exec(code)
j = json.dumps(h).encode()
open(dst, "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
}

# ---- missing, unreadable and non-regular files ----------------------------------------------------
check 1 "No such file" generate -m "$tmp/none" -p hi
check 1 "No such file" generate -m "$tmp/none.json" -p hi
check 1 "No such file" inspect "$tmp/none.safetensors"
check 1 "No such file" tokenize --tokenizer "$tmp/none.json"
check 1 "No such file" logits -m "$tmp/none" --ids 1,2 --out "$tmp/l.f32"
no_output "$tmp/l.f32"
check 1 "No such file" embed-image -m "$VL" --image "$tmp/none.png" --out "$tmp/e.f32"
no_output "$tmp/e.f32"
check 1 "No such file" generate -m "$VL" -p hi --chat --image "$tmp/none.png"
check 1 "regular file" generate -m "$VL" -p hi --chat --image "$tmp"
mkfifo "$tmp/fifo.safetensors" "$tmp/fifo.png" # a FIFO must be refused, not waited on
check 1 "not a regular file" inspect "$tmp/fifo.safetensors"
check 1 "regular file" embed-image -m "$VL" --image "$tmp/fifo.png" --out "$tmp/e.f32"
no_output "$tmp/e.f32"
hf_copy "$FX" "$tmp/noperm"
rm "$tmp/noperm/config.json"
cp "$FX/config.json" "$tmp/noperm/config.json"
chmod 000 "$tmp/noperm/config.json"
if [ "$(id -u)" = 0 ]; then
  echo "bad_inputs: running as root, which reads any file: the unreadable-file case is skipped"
else
  check 1 "Permission denied" generate -m "$tmp/noperm" -p hi
fi

# ---- damaged checkpoints -------------------------------------------------------------------------
hf_copy "$FX" "$tmp/trunc"
rm "$tmp/trunc/model.safetensors"
head -c 1000000 "$FX/model.safetensors" >"$tmp/trunc/model.safetensors"
check 1 "file has 1000000 bytes" generate -m "$tmp/trunc" -p hi
check 1 "file has 1000000 bytes" inspect "$tmp/trunc/model.safetensors"
head -c 5 "$FX/model.safetensors" >"$tmp/trunc/model.safetensors"
check 1 "too short for a safetensors header" generate -m "$tmp/trunc" -p hi

T=model.language_model.layers.0.mlp.up_proj.weight
hf_copy "$FX" "$tmp/missing"
rm "$tmp/missing/model.safetensors"
edit_st "$FX/model.safetensors" "$tmp/missing/model.safetensors" "del h['$T']"
check 1 "'$T' is missing" generate -m "$tmp/missing" -p hi
hf_copy "$FX" "$tmp/dtype"
rm "$tmp/dtype/model.safetensors"
edit_st "$FX/model.safetensors" "$tmp/dtype/model.safetensors" "h['$T']['dtype'] = 'I32'"
check 1 "'$T'" generate -m "$tmp/dtype" -p hi
hf_copy "$FX" "$tmp/shape"
rm "$tmp/shape/model.safetensors"
edit_st "$FX/model.safetensors" "$tmp/shape/model.safetensors" "h['$T']['shape'] = h['$T']['shape'][::-1]"
check 1 "'$T'" generate -m "$tmp/shape" -p hi
check 1 "'$T'" logits -m "$tmp/shape" --ids 1,2 --out "$tmp/l.f32"
no_output "$tmp/l.f32"

# one non-finite value in a weight, in the tensor's own dtype: refused at load, naming the tensor
# poke SRC DST NAME INDEX HEX: copy safetensors SRC to DST with element INDEX of NAME set to bytes HEX
poke() {
  python3 - "$@" <<'PY'
import json, struct, sys
src, dst, name, idx, val = sys.argv[1:]
b = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])[name]
v = bytes.fromhex(val)
at = 8 + n + t["data_offsets"][0] + int(idx) * len(v)
b[at:at + len(v)] = v
open(dst, "wb").write(b)
PY
}
for case in "f32 0000c07f NaN" "f32 0000807f +Inf" "bf16 c0ff NaN" "bf16 80ff -Inf"; do
  set -- $case
  src=$FIX/qwen35-tiny-$1
  [ -d "$src" ] || continue
  hf_copy "$src" "$tmp/nan_$1_$3"
  rm "$tmp/nan_$1_$3/model.safetensors"
  poke "$src/model.safetensors" "$tmp/nan_$1_$3/model.safetensors" "$T" 5 "$2"
  check 1 "tensor '$T': element 5 is NaN or infinite" generate -m "$tmp/nan_$1_$3" -p hi
done
# a temperature so small that logit / T overflows float: still the best token, not id 0 each step
"$QHX" generate -m "$FX" -p hi -n 4 --greedy --print-ids --quiet >"$tmp/greedy.ids" 2>&1
"$QHX" generate -m "$FX" -p hi -n 4 --temp 1e-39 --print-ids --quiet >"$tmp/tiny.ids" 2>&1
cmp -s "$tmp/greedy.ids" "$tmp/tiny.ids" || bad "--temp 1e-39 gave '$(cat "$tmp/tiny.ids")', greedy '$(cat "$tmp/greedy.ids")'"

# a session file is refused by another model of the same shapes (other weights) or with another
# tokenizer, and accepted by its own model
"$QHX" forge --random qwen3_5 "$tmp/fp_a" --preset tiny --seed 1 --quiet
"$QHX" forge --random qwen3_5 "$tmp/fp_b" --preset tiny --seed 2 --quiet
cp -r "$tmp/fp_a" "$tmp/fp_t"
python3 - "$tmp/fp_t/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
v = t["model"]["vocab"]
a, b = (next(k for k, i in v.items() if i == n) for n in (5, 6))
v[a], v[b] = 6, 5 # two tokens swap ids, nothing else changes
json.dump(t, open(sys.argv[1], "w"))
PY
printf 'hi\n/save %s\n' "$tmp/fp.state" | "$QHX" chat -m "$tmp/fp_a" -n 2 --quiet >/dev/null 2>"$tmp/err" ||
  bad "chat /save on the forged model: $(cat "$tmp/err")"
for other in fp_b fp_t; do
  printf '/load %s\n' "$tmp/fp.state" | "$QHX" chat -m "$tmp/$other" -n 2 --quiet >/dev/null 2>"$tmp/err"
  grep -q "different model" "$tmp/err" || bad "a session file of fp_a loaded into $other: $(cat "$tmp/err")"
done
printf '/load %s\n' "$tmp/fp.state" | "$QHX" chat -m "$tmp/fp_a" -n 2 --quiet >/dev/null 2>"$tmp/err"
grep -q "loaded" "$tmp/err" || bad "a session file did not load into its own model: $(cat "$tmp/err")"

# a manifest's tensor_count, dtype and precision are checked against the weights at open
"$QHX" forge "$tmp/fp_a" "$tmp/w8" --precision w8 --quiet
man=$tmp/w8/fp_a-262144.json
# edit_man KEY PYTHON: a copy of the w8 bundle's manifest, edited, as $tmp/w8/KEY.json
edit_man() {
  python3 - "$man" "$tmp/w8/$1.json" "$2" <<'PY'
import json, sys
src, dst, code = sys.argv[1:]
m = json.load(open(src))
exec(code)
json.dump(m, open(dst, "w"))
PY
}
edit_man count "m['artifacts']['weights']['tensor_count'] = 168"
edit_man dtype "m['artifacts']['weights']['dtype'] = 'F16'"
edit_man prec "m['precision'] = 'f16'"
check 1 "artifacts.weights.tensor_count: 168, but 'decoder-w8.safetensors' has 169 tensors" generate -m "$tmp/w8/count.json" -p hi
check 1 "artifacts.weights.dtype: F16, but most bytes of 'decoder-w8.safetensors' are I8" generate -m "$tmp/w8/dtype.json" -p hi
check 1 "precision: 'f16', but most bytes of 'decoder-w8.safetensors' are I8 (w8 weights)" generate -m "$tmp/w8/prec.json" -p hi
check 1 "precision: 'f16'" inspect "$tmp/w8/prec.json"
"$QHX" generate -m "$man" -p hi -n 2 --quiet >/dev/null 2>"$tmp/err" || bad "the unedited w8 bundle: $(cat "$tmp/err")"

# ---- run plans -----------------------------------------------------------------------------------
"$QHX" forge "$FX" "$tmp/bundle" --precision f16 --max-context 16 --quiet || bad "qhx forge (setup) failed"
M=$(cd "$tmp/bundle" && ls ./*.json | grep -v -e config -e index -e tokenizer | head -1)
M=${M#./}
cp -r "$tmp/bundle" "$tmp/noart"
rm "$tmp/noart/lmhead-f16.safetensors" # a tied bundle: the head is also the embedding table
check 1 "artifacts.lm_head.file" generate -m "$tmp/noart/$M" -p hi
cp -r "$tmp/bundle" "$tmp/fam"
cp "$VL/config.json" "$tmp/fam/config.json"
check 1 "does not match the model config" generate -m "$tmp/fam/$M" -p hi
hf_copy "$FX" "$tmp/famhf" # a Qwen3-VL config over Qwen3.5 weights
rm "$tmp/famhf/config.json"
ln -s "$VL/config.json" "$tmp/famhf/config.json"
check 1 "is missing" generate -m "$tmp/famhf" -p hi
hf_copy "$FX" "$tmp/bigtok"
rm "$tmp/bigtok/tokenizer.json"
python3 - "$FX/tokenizer.json" "$tmp/bigtok/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["added_tokens"].append({"id": 1500, "content": "<|beyond|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True})
json.dump(t, open(sys.argv[2], "w"))
PY
check 1 "embedding rows" generate -m "$tmp/bigtok" -p hi

# ---- context limits (a plan with max_context 16) -------------------------------------------------
# a prompt that leaves no room for one token is an error; -n beyond the context stops there
check 1 "leaves no room to generate in the model's context of 16" generate -m "$tmp/bundle/$M" --ids "$(seq -s, 1 16)" -n 2
check 1 "leaves no room to generate: --ctx is 4" generate -m "$FX" --ids 1,2,3,4 -n 2 --ctx 4
for n in 15 16 100 2147483647; do
  "$QHX" generate -m "$tmp/bundle/$M" --ids 1 -n $n --greedy --ignore-eos --json >"$tmp/cap.json" 2>"$tmp/cap.err" ||
    bad "-n $n beyond a context of 16: exit $? $(cat "$tmp/cap.err")"
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); n = int(sys.argv[2])
sys.exit(0 if (j["n_generated"], j["stop"]) == ((15, "context") if n > 15 else (n, "length")) else 1)' "$tmp/cap.json" $n ||
    bad "-n $n in a context of 16: $(cat "$tmp/cap.json")"
  if [ $n -gt 15 ]; then grep -q "^qhx: -n $n goes beyond the context of 16 tokens" "$tmp/cap.err" || bad "-n $n: no line about the context: $(cat "$tmp/cap.err")"
  else ! grep -q "beyond the context" "$tmp/cap.err" || bad "-n $n fits, yet: $(cat "$tmp/cap.err")"; fi
done
"$QHX" generate -m "$FX" --ids 1,2,3 -n 9 --ctx 8 --greedy --ignore-eos --quiet --json >"$tmp/cap.json" 2>"$tmp/cap.err" || bad "-n 9 --ctx 8: $(cat "$tmp/cap.err")"
grep -q '"stop":"context"' "$tmp/cap.json" && grep -q '"n_generated":5,' "$tmp/cap.json" || bad "-n 9 --ctx 8: $(cat "$tmp/cap.json")"
[ ! -s "$tmp/cap.err" ] || bad "--quiet printed: $(cat "$tmp/cap.err")"
check 1 "context" logits -m "$tmp/bundle/$M" --ids "$(seq -s, 1 20)" --out "$tmp/l.f32"
no_output "$tmp/l.f32"

# ---- images --------------------------------------------------------------------------------------
IMG=$SRC/tests/fuzz/corpus/image
head -c 3000 "$VL/image-64x64.png" >"$tmp/trunc.png"
head -c 4096 /dev/urandom >"$tmp/noise.png"
for args in "--image $tmp/trunc.png" "--image $tmp/noise.png" "--image $IMG/png_huge_100000x100000" \
            "--image $IMG/jpg_huge_65000x65000" "--image $IMG/jpg_truncated" "--image $IMG/empty"; do
  # shellcheck disable=SC2086
  check 1 "qhx embed-image: " embed-image -m "$VL" $args --out "$tmp/e.f32"
  no_output "$tmp/e.f32"
  # shellcheck disable=SC2086
  check 1 "qhx generate: " generate -m "$VL" -p hi --chat $args -n 2
done
check 1 "exceeds" generate -m "$VL" -p hi --chat --image "$IMG/png_huge_100000x100000" -n 2
check 1 "takes no images" embed-image -m "$FX" --image "$VL/image-64x64.png" --out "$tmp/e.f32"
no_output "$tmp/e.f32"
check 1 "takes no images" generate -m "$FX" -p hi --chat --image "$VL/image-64x64.png"
# a 1x1 image is scaled up to the smallest size the model takes: it works
"$QHX" embed-image -m "$VL" --image "$IMG/png_1x1" --out "$tmp/e.f32" 2>"$tmp/err" || bad "1x1 image: $(cat "$tmp/err")"
size=$(stat -c %s "$tmp/e.f32" 2>/dev/null || echo 0)
[ "$size" -gt 0 ] && [ $((size % (64 * 3 * 4))) = 0 ] || bad "1x1 image: embedding file of $size bytes"
rm -f "$tmp/e.f32"

# ---- text ----------------------------------------------------------------------------------------
check 1 "not valid UTF-8" generate -m "$FX" -p $'ab\xff\xfecd'
check 1 "offset 2" generate -m "$FX" -p $'ab\xc3(' --chat
printf 'ab\xe2\x82' >"$tmp/bad.txt"
IN=$tmp/bad.txt check 1 "not valid UTF-8" tokenize --tokenizer "$FX"
check 1 "outside the vocabulary" generate -m "$FX" --ids 1,99999 -n 2
check 1 "vocabulary" logits -m "$FX" --ids 1,5000 --out "$tmp/l.f32"
no_output "$tmp/l.f32"
check 1 "vocabulary" logits -m "$FX" --ids 1,2,5000 --prefill 2 --out "$tmp/l.f32" # after rows were written
no_output "$tmp/l.f32"

# ---- bad options and values (usage errors: exit 2) -----------------------------------------------
check 2 "-n: '-2'" generate -m "$FX" -p hi -n -2  # -1 means: until a stop or the context is full
check 2 "--top-p: '2'" generate -m "$FX" -p hi --top-p 2
check 2 "--temp: 'nan'" generate -m "$FX" -p hi --temp nan
# the seed is 64-bit: its whole range is accepted, one past it and negatives are not
check 2 "--seed: '18446744073709551616'" generate -m "$FX" -p hi --seed 18446744073709551616
check 2 "--seed: '-2'" generate -m "$FX" -p hi --seed -2
check 2 "--seed: '-1'" forge --random qwen3_5 "$tmp/never" --preset tiny --seed -1
"$QHX" generate -m "$FX" -p hi -n 2 --temp 1 --seed 18446744073709551615 --quiet >/dev/null 2>"$tmp/err" ||
  bad "--seed 18446744073709551615 refused: $(cat "$tmp/err")"
check 2 "--threads" generate -m "$FX" -p hi --threads 100000
check 2 "--threads: '1000'" logits -m "$FX" --ids 1 --out "$tmp/l.f32" --threads 1000
check 2 "--ctx" generate -m "$FX" -p hi --ctx 0
check 2 "--precision: 'int3'" forge "$FX" "$tmp/f" --precision int3
check 2 "--lmhead: 'q2'" forge "$FX" "$tmp/f" --precision q4 --lmhead q2
check 2 "--preset: 'huge'" forge --random qwen3_5 "$tmp/f" --preset huge
no_output "$tmp/f"
check 2 "unknown option '--bo?gus'" generate -m "$FX" -p hi --bo$'\n'gus # stays one line
check 2 "--ids" logits -m "$FX" --ids 1,x --out "$tmp/l.f32"
no_output "$tmp/l.f32"
check 2 "--prefill-math: 'int4'" generate -m "$FX" -p hi --prefill-math int4
check 2 "--decode-math: 'f64'" generate -m "$FX" -p hi --decode-math f64
check 2 "--decode-math: expected default, f32 or int8, got 'x'" bench -m "$FX" --decode-math x
check 2 "--decode-math: 'int16'" parity -m "$FX" --golden "$FX" --decode-math int16

# ---- failing writes: a file-size limit makes every write past 64 KiB fail ------------------------
# (SIGXFSZ ignored, so the write returns EFBIG): the command reports it and leaves nothing.
limited() { (trap '' XFSZ; ulimit -f 64; "$@"); }
check_limited() {
  local want=$1 needle=$2
  shift 2
  limited "$QHX" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = "$want" ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -qF -- "$needle" "$tmp/err" && [ ! -s "$tmp/out" ] ||
    { bad "limited qhx $* -> exit $rc: $(head -c 300 "$tmp/err")"; return; }
  echo "ok: $(cat "$tmp/err")"
}
check_limited 1 "write failed" logits -m "$FX" --ids "$(seq -s, 1 40)" --out "$tmp/l.f32"
no_output "$tmp/l.f32"
check_limited 1 "qhx forge: " forge "$FX" "$tmp/fl" --precision f16 --quiet
no_output "$tmp/fl"
ls -d "$tmp"/fl.tmp-* >/dev/null 2>&1 && bad "forge left its staging folder after a failed write"

exit $fail
