#!/usr/bin/env bash
# qhx inspect, end to end: every parity fixture folder (and its .safetensors file) is listed with
# the same tensor names, dtypes, shapes and byte ranges that python reads from the file header
# on its own; the plan fields match the fixture configs; every bad input gives exactly one line
# on stderr naming the problem, nothing on stdout and exit 1 (usage errors: exit 2).
# usage: inspect.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN="$1/qhx"
DATA="$2"
FIX="$DATA/fixtures/parity"
command -v python3 >/dev/null || { echo "FAIL: python3 missing (scripts/deps.sh installs it)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "no $BIN"; exit 1; }
[ -d "$FIX" ] || { echo "FAIL: no fixtures at $FIX (the test data is part of the tree, under tests/data)" >&2; exit 1; }

T=$(mktemp -d /tmp/qhx_cli_inspect.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# run EXPECTED_EXIT NEEDLE ARGS...: exit code, exactly one stderr line containing NEEDLE, no stdout.
run_err() {
  local want="$1" needle="$2"; shift 2
  "$BIN" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  local lines; lines=$(wc -l <"$T/err")
  if [ "$rc" != "$want" ]; then fail "qhx $* -> exit $rc, want $want: $(head -c 400 "$T/err")"; return; fi
  if [ "$lines" != 1 ]; then fail "qhx $* -> $lines stderr lines, want 1:"; head -5 "$T/err"; return; fi
  if ! grep -qF -- "$needle" "$T/err"; then fail "qhx $* -> '$(cat "$T/err")' lacks '$needle'"; return; fi
  if [ -s "$T/out" ]; then fail "qhx $* -> wrote to stdout on error"; return; fi
  echo "ok: qhx $* -> $(cat "$T/err")"
}

# ---- help and usage ----
"$BIN" --help >"$T/out" 2>&1 && grep -q inspect "$T/out" || fail "qhx --help"
"$BIN" inspect --help >"$T/out" 2>&1 && grep -q "usage: qhx inspect PATH" "$T/out" || fail "qhx inspect --help"
run_err 2 "missing PATH" inspect
run_err 2 "unknown option '--bogus'" inspect --bogus "$FIX/qwen35-tiny-f32"
run_err 2 "more than one PATH" inspect "$FIX/qwen35-tiny-f32" "$FIX/qwen3vl-tiny-f32"
run_err 2 "missing command" 
run_err 2 "unknown command 'inspekt'" inspekt x

# ---- every fixture: listing equals the header read by python ----
for d in "$FIX"/*/; do
  d="${d%/}"
  [ -f "$d/model.safetensors" ] || continue
  name=$(basename "$d")
  for target in "$d" "$d/model.safetensors"; do
    if ! "$BIN" inspect "$target" --json >"$T/j.json" 2>"$T/err"; then
      fail "inspect --json $target: $(cat "$T/err")"; continue
    fi
    if ! python3 - "$T/j.json" "$d" <<'PY'
import json, struct, sys
doc = json.load(open(sys.argv[1]))
d = sys.argv[2]
raw = open(d + "/model.safetensors", "rb").read()
hlen = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + hlen])
meta = hdr.pop("__metadata__", {})
want = [(k, v["dtype"], v["shape"], v["data_offsets"][1] - v["data_offsets"][0], 8 + hlen + v["data_offsets"][0])
        for k, v in hdr.items()]
got = [(t["name"], t["dtype"], t["shape"], t["bytes"], t["offset"]) for t in doc["tensors"]]
errs = []
if got != want:
    errs.append("tensor listing differs from the header (%d vs %d tensors)" % (len(got), len(want)))
    for a, b in zip(got, want):
        if a != b:
            errs.append("first difference: %r vs %r" % (a, b)); break
tot = doc["totals"]
if tot["tensors"] != len(want) or tot["bytes"] != sum(w[3] for w in want):
    errs.append("totals %r" % tot)
if doc["kind"] == "safetensors":
    if doc["metadata"] != meta: errs.append("metadata %r vs %r" % (doc["metadata"], meta))
else:
    cfg = json.load(open(d + "/config.json"))
    gen = json.load(open(d + "/generation_config.json"))
    p = doc["plan"]
    fam = {"qwen3_5": "qwen3_5", "qwen3_vl": "qwen3_vl"}[cfg["model_type"]]
    if p["family"] != fam: errs.append("family %s" % p["family"])
    dts = {t[1] for t in want}
    most = max(dts, key=lambda x: sum(w[3] for w in want if w[1] == x))
    if p["precision"] != most.lower(): errs.append("precision %s vs %s" % (p["precision"], most))
    if p["special_tokens"]["stop_ids"][:len(gen["eos_token_id"])] != gen["eos_token_id"]:
        errs.append("stop ids %r" % p["special_tokens"]["stop_ids"])
    tc = cfg.get("text_config", cfg)
    for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
        if doc["dims"][k] != tc[k]: errs.append("dims.%s %r vs %r" % (k, doc["dims"][k], tc[k]))
    if p["artifacts"]["weights"]["tensor_count"] != len(want): errs.append("tensor_count")
for e in errs: print("  " + e)
sys.exit(1 if errs else 0)
PY
    then fail "inspect --json $target does not match python's reading"; else echo "ok: $name $(basename "$target") --json matches the header"; fi
    "$BIN" inspect "$target" >"$T/text" 2>"$T/err" && grep -q "^total " "$T/text" || fail "inspect $target (text): $(cat "$T/err")"
  done
done

# ---- bad inputs ----
SRC="$FIX/qwen35-tiny-f32/model.safetensors"
python3 - "$T" "$SRC" <<'PY'
import json, struct, sys
t, src = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
def st(name, hdr, data, hlen=None):
    h = json.dumps(hdr).encode() if isinstance(hdr, dict) else hdr
    with open(t + "/" + name, "wb") as f:
        f.write(struct.pack("<Q", len(h) if hlen is None else hlen) + h + data)
open(t + "/truncated.safetensors", "wb").write(raw[:len(raw) // 2])
open(t + "/tiny.safetensors", "wb").write(raw[:5])
st("hlen_past_end.safetensors", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, hlen=10**6)
st("hlen_huge.safetensors", {}, b"", hlen=2**62)
st("overlap.safetensors", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12)
st("bad_dtype.safetensors", {"a": {"dtype": "Q9", "shape": [2], "data_offsets": [0, 2]}}, b"\0" * 2)
st("shape_mismatch.safetensors", {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8)
st("bad_json.safetensors", b'{"a": {"dtype": ', b"")
st("rank9.safetensors", {"a": {"dtype": "U8", "shape": [1] * 9, "data_offsets": [0, 1]}}, b"\0")
open(t + "/invalid.json", "w").write('{"format": "qhexrt/1", "name": ')
m = {"format": "qhexrt/2", "name": "x"}
open(t + "/v2.json", "w").write(json.dumps(m))
PY
run_err 1 "cannot open" inspect "$T/nope.safetensors"
run_err 1 "cannot open" inspect "$T/nope.json"
mkdir "$T/empty"
run_err 1 "no qhexrt manifest and no config.json" inspect "$T/empty"
run_err 1 "data ends at byte" inspect "$T/truncated.safetensors"
run_err 1 "too short for a safetensors header" inspect "$T/tiny.safetensors"
run_err 1 "goes past the end of the file" inspect "$T/hlen_past_end.safetensors"
run_err 1 "exceeds the 104857600-byte limit" inspect "$T/hlen_huge.safetensors"
run_err 1 "tensors 'a' and 'b' overlap" inspect "$T/overlap.safetensors"
run_err 1 "unsupported dtype 'Q9'" inspect "$T/bad_dtype.safetensors"
run_err 1 "F32 shape needs 12 bytes, data_offsets give 8" inspect "$T/shape_mismatch.safetensors"
run_err 1 "invalid JSON" inspect "$T/bad_json.safetensors"
run_err 1 "rank 9 exceeds 8" inspect "$T/rank9.safetensors"
run_err 1 "invalid.json: invalid JSON at line 1" inspect "$T/invalid.json"
run_err 1 "v2.json: format: unsupported version 'qhexrt/2' (this build reads qhexrt/1)" inspect "$T/v2.json"
run_err 1 "config.json: format: missing (this looks like a Hugging Face config.json" inspect "$FIX/qwen35-tiny-f32/config.json"

# a bundle whose manifest points at a broken or missing weights file, or outside the folder
B="$T/bundle"
mkdir -p "$B"
cp "$FIX/qwen35-tiny-f32/config.json" "$FIX/qwen35-tiny-f32/tokenizer.json" "$B/" # copies: a bundle's links may not lead out
cp "$T/overlap.safetensors" "$B/model.safetensors"
manifest() { # $1 = weights file name, $2 = output file
  cat >"$2" <<JSON
{"format": "qhexrt/1", "name": "t", "family": "qwen3_5", "host_op": "qwen3_5_generate",
 "precision": "f32", "max_context": 256,
 "artifacts": {"weights": {"file": "$1", "format": "safetensors"}},
 "tokenizer": {"file": "tokenizer.json"}, "special_tokens": {"stop_ids": [960]},
 "model": {"config": "config.json"}}
JSON
}
manifest model.safetensors "$B/plan.json"
run_err 1 "tensors 'a' and 'b' overlap" inspect "$B"
run_err 1 "tensors 'a' and 'b' overlap" inspect "$B/plan.json" --json
manifest missing.safetensors "$B/plan.json"
run_err 1 "plan.json: artifacts.weights.file: cannot open '" inspect "$B"
manifest ../escape.safetensors "$B/plan.json"
run_err 1 "artifacts.weights.file: '../escape.safetensors' leaves the bundle folder" inspect "$B/plan.json"
manifest model.safetensors "$B/plan2.json"
run_err 1 "2 manifests in this folder (plan.json, plan2.json): name one" inspect "$B"

# a good bundle: manifest + --verify with a correct and a wrong hash
G="$T/good"
mkdir -p "$G"
for f in config.json tokenizer.json model.safetensors; do cp "$FIX/qwen35-tiny-f32/$f" "$G/$f"; done
sha=$(python3 -c "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())" "$FIX/qwen35-tiny-f32/model.safetensors")
cat >"$G/m.json" <<JSON
{"format": "qhexrt/1", "name": "good", "family": "qwen3_5", "host_op": "qwen3_5_generate",
 "precision": "f32", "max_context": 256,
 "artifacts": {"weights": {"file": "model.safetensors", "format": "safetensors", "sha256": "$sha", "tensor_count": 123}},
 "tokenizer": {"file": "tokenizer.json"}, "special_tokens": {"stop_ids": [962, 960]},
 "model": {"config": "config.json"}}
JSON
"$BIN" inspect "$G" --verify >"$T/out" 2>"$T/err" && grep -q "sha256 $sha" "$T/out" || fail "inspect --verify good bundle: $(cat "$T/err")"
sed -i "s/$sha/$(echo "$sha" | tr '0-9a-f' '1-9a-f0')/" "$G/m.json"
run_err 1 "artifacts.weights.sha256: 'model.safetensors' hashes to $sha" inspect "$G" --verify

# ---- a bundle's files may not be links leading out of its folder ---------------------------------
L="$T/linked"
mkdir -p "$L/sub"
cp "$G/m.json" "$G/tokenizer.json" "$G/model.safetensors" "$L/"
printf '{"model_type": "qwen3_5", "x": [root:x:0:0:secret\n' >"$T/outside.json" # not JSON: must never be quoted
ln -s "$T/outside.json" "$L/config.json"
run_err 1 "model.config.file: 'config.json' is a symbolic link leading outside the bundle folder" inspect "$L/m.json"
grep -q "root" "$T/err" && fail "a refused link's content was quoted: $(cat "$T/err")"
rm "$L/config.json"
cp "$G/config.json" "$L/sub/config.json"
ln -s sub/config.json "$L/config.json" # a link inside the bundle is fine
"$BIN" inspect "$L/m.json" >/dev/null 2>"$T/err" || fail "a link inside the bundle was refused: $(cat "$T/err")"
rm "$L/model.safetensors"
ln -s "$G/model.safetensors" "$L/model.safetensors"
run_err 1 "artifacts.weights.file: 'model.safetensors' is a symbolic link leading outside the bundle folder" inspect "$L/m.json"
run_err 1 "is a symbolic link leading outside" generate -m "$L/m.json" -p hi
# the shard of an index, linked outside the bundle
rm "$L/model.safetensors"
ln -s "$G/model.safetensors" "$L/model-00001-of-00001.safetensors"
python3 - "$G/model.safetensors" "$L/model.safetensors.index.json" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
names = [k for k in h if k != "__metadata__"]
json.dump({"metadata": {}, "weight_map": {k: "model-00001-of-00001.safetensors" for k in names}}, open(sys.argv[2], "w"))
PY
sed 's/"model.safetensors"/"model.safetensors.index.json"/' "$L/m.json" >"$L/idx.json"
run_err 1 "shard '$L/model-00001-of-00001.safetensors' is a symbolic link leading outside the bundle folder" inspect "$L/idx.json"
# and a JSON error quotes no bytes of the file, only where they are
printf '{"a": rootsecret}' >"$T/bad.json"
"$BIN" inspect "$T/bad.json" >/dev/null 2>"$T/err"
grep -q "rootsecret\|near" "$T/err" && fail "a JSON error quoted the file: $(cat "$T/err")"
grep -q "byte" "$T/err" || fail "a JSON error does not say where: $(cat "$T/err")"

# ---- names from the file never reach the terminal raw --------------------------------------------
# a tensor name and metadata holding a title change (OSC), a screen clear (CSI), a C1 control
# and a byte that is not UTF-8: printed as \xHH, never as the bytes
python3 - "$T/esc.safetensors" <<'PY'
import json, struct, sys
name = "a\x1b]0;pwned\x07b\x1b[2J\u009b\u00e9"
h = {name: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "__metadata__": {"k\x1b[H": "v\r"}}
j = json.dumps(h).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(j)) + j + b"\0\0\0\0")
PY
"$BIN" inspect "$T/esc.safetensors" >"$T/out" 2>"$T/err" || fail "inspect of escaped names: $(cat "$T/err")"
if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$T/out" || LC_ALL=C grep -q $'\xc2[\x80-\x9f]' "$T/out"; then
  fail "inspect printed raw control characters: $(od -c "$T/out" | head -5)"
fi
grep -qF 'a\x1B]0;pwned\x07b\x1B[2J\xC2\x9B\xC3' "$T/out" && fail "inspect escaped a printable letter (é)"
grep -qF 'a\x1B]0;pwned\x07b\x1B[2J\xC2\x9Bé' "$T/out" || fail "inspect: the escaped name is not shown: $(grep -a pwned "$T/out")"
grep -qF 'k\x1B[H = v\x0D' "$T/out" || fail "inspect: the escaped metadata is not shown: $(grep -a metadata "$T/out")"

# a metadata value holding a NUL: kept whole, \u0000 in --json and \x00 in the text
python3 - "$T/nul.safetensors" <<'PY'
import json, struct, sys
h = {"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "__metadata__": {"note": "before\u0000after"}}
j = json.dumps(h).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(j)) + j + b"\0\0\0\0")
PY
"$BIN" inspect --json "$T/nul.safetensors" >"$T/out" 2>"$T/err" || fail "inspect --json of a NUL in metadata: $(cat "$T/err")"
grep -qF '"note": "before\u0000after"' "$T/out" || fail "inspect --json: the NUL is not \\u0000: $(grep -a note "$T/out")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["metadata"]["note"] != "before\0after")' "$T/out" ||
  fail "inspect --json: the value read back is not the whole string"
"$BIN" inspect "$T/nul.safetensors" >"$T/out" 2>"$T/err" || fail "inspect of a NUL in metadata: $(cat "$T/err")"
grep -qF 'note = before\x00after' "$T/out" || fail "inspect: the NUL is not shown as \\x00: $(grep -a note "$T/out")"

echo "inspect.sh: $fails failure(s)"
[ "$fails" = 0 ]
