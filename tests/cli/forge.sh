#!/usr/bin/env bash
# qhx forge from the command line: usage errors, a refused existing output folder, Ctrl-C during a
# large job (exit 130, nothing left behind), and a bf16 bundle of the bf16 parity fixture that the
# model runs through the parity gate exactly like the fixture itself.
# Run as: bash forge.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1
DATA=$2
SRC_DIR=$3
QHX=$BIN/qhx
FX=$DATA/fixtures/parity
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

expect_rc() { # expected-rc message-substring cmd...
  local want=$1 needle=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  [ "$rc" = "$want" ] || bad "'$*' exited $rc, expected $want: $out"
  case "$out" in *"$needle"*) ;; *) bad "'$*' said '$out', expected '$needle'" ;; esac
}

# ---- usage ----------------------------------------------------------------------------------------
expect_rc 2 "needs HF_DIR and OUT_DIR" "$QHX" forge
expect_rc 2 "--precision" "$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/x"
expect_rc 2 "--preset" "$QHX" forge --random qwen3_5 "$tmp/x"
expect_rc 2 "unknown option" "$QHX" forge --random qwen3_5 "$tmp/x" --preset tiny --bogus
expect_rc 2 "--seed" "$QHX" forge --random qwen3_5 "$tmp/x" --preset tiny --seed -1
expect_rc 0 "usage" "$QHX" forge --help
expect_rc 2 "--preset: '3b'" "$QHX" forge --random qwen3_5 "$tmp/x" --preset 3b
expect_rc 2 "qwen3_5 size" "$QHX" forge --random qwen3_vl "$tmp/x" --preset 27b
expect_rc 2 "--layers" "$QHX" forge --random qwen3_5 "$tmp/x" --preset 9b --layers 0
expect_rc 2 "--layers" "$QHX" forge --random qwen3_5 "$tmp/x" --preset 9b --layers 1025
expect_rc 2 "--layers" "$QHX" forge --random qwen3_5 "$tmp/x" --preset 9b --layers four
expect_rc 2 "--layers" "$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/x" --precision w8 --layers 2
expect_rc 2 "unknown family" "$QHX" forge --random llama "$tmp/x" --preset tiny
expect_rc 2 "int3" "$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/x" --precision int3
[ -e "$tmp/x" ] && bad "a failed run left $tmp/x"

# ---- output folder handling ---------------------------------------------------------------------
mkdir "$tmp/exists"
expect_rc 1 "already exists" "$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/exists" --precision w8
expect_rc 0 "wrote" "$QHX" forge --random qwen3_vl "$tmp/rvl" --preset tiny --seed 3
expect_rc 0 "manifest" "$QHX" forge "$tmp/rvl" "$tmp/bvl" --precision q4 --name demo --max-context 256
for f in demo-vlm-256.json demo-text-256.json decoder-q4.safetensors vision-w8.safetensors \
         lmhead-q6.safetensors model.safetensors.index.json tokenizer.json config.json preprocessor_config.json; do
  [ -f "$tmp/bvl/$f" ] || bad "bundle lacks $f"
done
# tied: the matrix is stored once (the head); --embed adds a separate lookup table
[ ! -e "$tmp/bvl/embed-f16.safetensors" ] || bad "a tied bundle stores a second embedding table"
expect_rc 0 "manifest" "$QHX" forge "$tmp/rvl" "$tmp/bvl2" --precision q4 --embed f16 --text-only
[ -f "$tmp/bvl2/embed-f16.safetensors" ] || bad "--embed f16 wrote no embed-f16.safetensors"
[ ! -e "$tmp/bvl2/vision-w8.safetensors" ] && ls "$tmp/bvl2" | grep -q -- '-text-' && ! ls "$tmp/bvl2" | grep -q -- '-vlm-' \
  || bad "--text-only still wrote the vision tower or a vlm manifest: $(ls "$tmp/bvl2")"
ls -d "$tmp"/*.tmp-* >/dev/null 2>&1 && bad "a staging folder was left behind"
for m in demo-vlm-256.json demo-text-256.json; do
  "$QHX" inspect "$tmp/bvl/$m" --verify >"$tmp/inspect.txt" 2>&1 || bad "qhx inspect $m: $(cat "$tmp/inspect.txt")"
done
grep -q "vision-w8.safetensors" "$tmp/inspect.txt" && bad "the text manifest names the vision file"

PY=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done

# ---- every precision: qhx inspect sees the documented dtype of every tensor ------------------------
if [ -n "$PY" ]; then
  for prec in f16 bf16 w8 q4; do
    expect_rc 0 "wrote" "$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/p-$prec" --precision $prec
    "$QHX" inspect "$tmp/p-$prec" --json >"$tmp/p-$prec.json" || { bad "qhx inspect $prec"; continue; }
    "$PY" - "$tmp/p-$prec.json" "$prec" <<'PY' || bad "tensor dtypes of the $prec bundle"
import json, sys
d = json.load(open(sys.argv[1])); prec = sys.argv[2]
t = {x["name"]: x for x in d["tensors"]}
lin = {"f16": "F16", "bf16": "BF16", "w8": "I8", "q4": "U8"}[prec]
lm = {"f16": "F16", "bf16": "BF16", "w8": "I8", "q4": "U8"}[prec]  # q4: a Q6 head (U8 + .qhigh)
emb = "BF16" if prec == "bf16" else "F16"
errors = []
def want(name, dt):
    if name not in t: errors.append(name + " missing")
    elif t[name]["dtype"] != dt: errors.append("%s is %s, expected %s" % (name, t[name]["dtype"], dt))
for name, x in t.items():
    if name.endswith(".qhigh"):  # Q6's high bits: the q4 bundle's lm-head only
        want(name, "U8")
        if name != "lm_head.weight.qhigh": errors.append(name + ": only the q4 lm-head is Q6")
    elif name.endswith(".qscale"):  # Q8 row scales F32, Q4 / Q6 group scales F16
        want(name, "F16" if t.get(name[:-len(".qscale")], {}).get("dtype") == "U8" else "F32")
    elif name == "lm_head.weight":
        want(name, lm)
        if prec == "q4": want(name + ".qhigh", "U8")
    elif "embed_tokens" in name:
        want(name, emb)
    elif len(x["shape"]) == 2:
        want(name, lin)
        if lin in ("I8", "U8"): want(name + ".qscale", "F16" if lin == "U8" else "F32")
        sc = t.get(name + ".qscale", {}).get("shape")
        if lin == "U8" and sc != [x["shape"][0], x["shape"][1] * 2 // 32]:
            errors.append("%s: U8 %s with scales %s (expected one per 32 columns)" % (name, x["shape"], sc))
        if lin == "I8" and sc != [x["shape"][0]]:
            errors.append("%s: I8 %s with scales %s (expected one per row)" % (name, x["shape"], sc))
    else:
        want(name, "F32")
    if name.startswith("mtp."): errors.append(name + " should be dropped")
for e in errors: print(e)
sys.exit(1 if errors else 0)
PY
  done
fi

# ---- --tensor-precision mixes: every bundle forge writes loads, its manifest says what the weights hold ----
# (the manifest's precision is the dtype holding most of the decoder's bytes, the rule the open
# checks it by; a failure names OUT_DIR, never its OUT_DIR.tmp-XXXXXX staging folder)
mix() { # PRECISION RULES WANT-MANIFEST-PRECISION
  local out=$tmp/mix-$1-$3
  rm -rf "$out"
  "$QHX" forge "$FX/qwen35-tiny-f32" "$out" --precision "$1" --tensor-precision "$2" --quiet 2>"$tmp/mix.err" ||
    { bad "forge --precision $1 --tensor-precision '$2': $(cat "$tmp/mix.err")"; return; }
  grep -q "\"precision\": *\"$3\"" "$out"/*.json || bad "forge $1 '$2': manifest precision $(grep -h '"precision"' "$out"/*.json), expected $3"
  "$QHX" generate -m "$out" -p hi -n 2 --greedy --quiet >/dev/null 2>"$tmp/mix.err" ||
    bad "the bundle of forge $1 '$2' does not load: $(cat "$tmp/mix.err")"
  "$QHX" inspect "$out" >/dev/null 2>"$tmp/mix.err" || bad "inspect of forge $1 '$2': $(cat "$tmp/mix.err")"
  ls -d "$tmp"/mix-*.tmp-* >/dev/null 2>&1 && bad "forge $1 '$2' left a staging folder"
  rm -rf "$out"
}
mix q4 '*=w8' w8
mix q4 '*=f16' f16
mix q4 '*.self_attn.*=f16,*=bf16' bf16
mix w8 '*.mlp.*=f16' f16
mix w8 '*.mlp.down_proj.weight=f16' w8
mix w8 '*=q4' q4
mix w8 '*=q6' q4
mix q4a '*=q4' q4
mix q4a '*=w8,*.layers.0.*=q4a' w8
mix f16 '*=q4a' q4
mix bf16 '*.mlp.*=w8,*=q4' q4
mix f16 '*.layers.1.mlp.gate_proj.weight=w8' f16
# a rule that matches no decoder matrix would do nothing: refused (exit 1, the checkpoint's names
# decide), naming the rule, nothing left behind
for rule in '*.dwon_proj.weight=q6' '*norm*=w8' 'model.layers.0.mlp.up_proj.weight=f16' '*=w8,nothing*=q4' \
            'lm_head.weight=q4' '*embed_tokens*=w8' 'model.visual.*=q4'; do
  expect_rc 1 "--tensor-precision rule '${rule##*,}' matches no decoder matrix" \
    "$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/nomatch" --precision w8 --tensor-precision "$rule"
  [ -e "$tmp/nomatch" ] && bad "a rule matching nothing ('$rule') left a bundle"
  ls -d "$tmp"/nomatch.tmp-* >/dev/null 2>&1 && bad "a rule matching nothing ('$rule') left a staging folder"
  rm -rf "$tmp/nomatch"
done
# a write failing in the staging folder is reported under the output folder's name
(trap '' XFSZ; ulimit -f 64; "$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/small" --precision w8 --quiet) 2>"$tmp/xfsz.err"
grep -q "$tmp/small/.*write failed" "$tmp/xfsz.err" && ! grep -q "\.tmp-" "$tmp/xfsz.err" ||
  bad "a failed write should name $tmp/small, not the staging folder: $(cat "$tmp/xfsz.err")"
ls -d "$tmp"/small* >/dev/null 2>&1 && bad "a failed write left $(ls -d "$tmp"/small*)"

# ---- q4a: Q4A or (by the policy) Q6 matrices, the side tensors of each, a W8 head on narrow rows ----
if [ -n "$PY" ]; then
  expect_rc 0 "by precision (policy)" "$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/p-q4a" --precision q4a \
    --tensor-precision '*.layers.1.mlp.gate_proj.weight=w8'
  "$QHX" inspect "$tmp/p-q4a" --json >"$tmp/p-q4a.json" || bad "qhx inspect q4a"
  "$PY" - "$tmp/p-q4a.json" <<'PY' || bad "tensor dtypes of the q4a bundle"
import json, sys
t = {x["name"]: x for x in json.load(open(sys.argv[1]))["tensors"]}
errors, n = [], {"q4a": 0, "q6": 0, "w8": 0}
for name, x in t.items():
    if name.endswith((".qscale", ".qhigh", ".qsuper", ".qsub")) or len(x["shape"]) != 2 or "norm" in name:
        continue
    if name == "lm_head.weight":  # 64 columns: narrower than a super-block, so W8
        if x["dtype"] != "I8": errors.append("lm_head.weight is %s, expected I8" % x["dtype"])
        continue
    if x["dtype"] == "I8":
        n["w8"] += 1
        if name != "model.language_model.layers.1.mlp.gate_proj.weight": errors.append(name + ": W8 without a rule")
    elif name + ".qsub" in t:
        n["q4a"] += 1
        rows, half = x["shape"]
        if t[name + ".qsub"]["shape"] != [rows, half * 2 // 16] or t[name + ".qsub"]["dtype"] != "U8":
            errors.append(name + ": bad .qsub")
        if t[name + ".qsuper"]["shape"] != [rows, (half * 2 + 255) // 256] or t[name + ".qsuper"]["dtype"] != "F16":
            errors.append(name + ": bad .qsuper")
        if name + ".qscale" in t: errors.append(name + ": Q4A with a .qscale")
    elif name + ".qhigh" in t:
        n["q6"] += 1
    elif x["dtype"] != "F32":
        errors.append("%s: %s, neither Q4A nor Q6" % (name, x["dtype"]))
if n["w8"] != 1 or n["q4a"] < 10 or n["q6"] < 10: errors.append("counts %s" % n)
for e in errors: print(e)
sys.exit(1 if errors else 0)
PY
  "$QHX" generate -m "$tmp/p-q4a" -p "hello" -n 4 >/dev/null 2>&1 || bad "the q4a bundle does not generate"
fi

# ---- Ctrl-C: exit 130, no output folder, no staging folder --------------------------------------
# The 2b preset writes ~3.9 GB, long enough to interrupt; skipped when the disk is short.
avail_kb=$(df -Pk "$tmp" | awk 'NR==2 {print $4}')
if [ "${avail_kb:-0}" -gt 6000000 ]; then
  "$QHX" forge --random qwen3_5 "$tmp/big" --preset 2b 2>"$tmp/big.err" &
  pid=$!
  # wait (at most 30 s) until the side files are written (the weights file is opened before them,
  # so its name alone does not say they are): the 2b preset carries the released Qwen3.5 tokenizer
  want_tok=$SRC_DIR/tests/data/fixtures/tokenizer/qwen3_5/tokenizer.json
  for _ in $(seq 1 300); do
    cmp -s "$tmp"/big.tmp-*/tokenizer.json "$want_tok" 2>/dev/null && break
    sleep 0.1
  done
  cmp -s "$tmp"/big.tmp-*/tokenizer.json "$want_tok" ||
    bad "forge --random qwen3_5 --preset 2b did not copy the released Qwen3.5 tokenizer.json"
  sleep 0.5
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 130 ] || bad "interrupted forge exited $rc, expected 130: $(cat "$tmp/big.err")"
  grep -q "interrupted" "$tmp/big.err" || bad "interrupted forge said: $(cat "$tmp/big.err")"
  grep -q "tokenizer: the released Qwen3.5 vocabulary" "$tmp/big.err" || bad "2b forge did not say which tokenizer: $(cat "$tmp/big.err")"
  [ -e "$tmp/big" ] && bad "an interrupted run left $tmp/big"
  ls -d "$tmp"/big.tmp-* >/dev/null 2>&1 && bad "an interrupted run left its staging folder"
else
  echo "forge: less than 6 GB free: the Ctrl-C check is skipped"
fi

# ---- a bf16 bundle runs exactly like its bf16 checkpoint ----------------------------------------
GATE=$DATA/oracle/parity_gate.py
if [ -n "$PY" ] && [ -f "$GATE" ] && grep -q '^  logits' <<<"$("$QHX" --help)"; then
  fx=$FX/qwen35-tiny-bf16
  expect_rc 0 "wrote" "$QHX" forge "$fx" "$tmp/b16" --precision bf16
  out=$tmp/run
  mkdir -p "$out"
  "$PY" - "$fx" >"$tmp/plan" <<'PY'
import json, os, sys
fx = sys.argv[1]
golden = json.load(open(os.path.join(fx, "golden.json")))["prompts"]
for p in json.load(open(os.path.join(fx, "prompts.json"))):
    ids, g = p["ids"], golden[p["name"]]["greedy"]
    print("%s\t%d\t%d\t%s\t%s" % (p["name"], len(ids), len(g), ",".join(map(str, ids)),
                                  ",".join(map(str, ids + g[:-1]))))
PY
  while IFS=$'\t' read -r name n_prompt n_gen prompt forced; do
    "$QHX" logits -m "$tmp/b16" --ids "$forced" --prefill "$n_prompt" --kv f32 --out "$out/$name.logits.f32" || bad "logits $name"
    gen=$("$QHX" generate -m "$tmp/b16" --ids "$prompt" -n "$n_gen" --greedy --ignore-eos --print-ids) || bad "generate $name"
    "$PY" -c 'import json, sys; print(json.dumps({"greedy": [int(x) for x in sys.argv[1].split()]}))' \
      "$gen" >"$out/$name.greedy.json"
  done <"$tmp/plan"
  "$PY" "$GATE" --fixture "$fx" --run "$out" || bad "the bf16 bundle fails the parity gate"
else
  bad "no numpy (scripts/deps.sh), no parity gate at $GATE or no 'qhx logits': the bf16 bundle run cannot be checked"
fi

# the context a bundle keeps: the checkpoint's trained one by default (the name says it), run as
# a folder's run is (the trained context, lowered only to fit memory); --max-context N: that one,
# which --ctx may raise up to the trained context
trained=$(python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c.get("text_config", c)["max_position_embeddings"])' \
  "$FX/qwen35-tiny-f32/config.json")
"$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/ctx-full" --precision w8 --quiet || bad "forge with the trained context"
[ -f "$tmp/ctx-full/qwen35-tiny-f32-$trained.json" ] || bad "default bundle name: $(ls "$tmp/ctx-full")"
banner=$(echo | "$QHX" chat -m "$tmp/ctx-full/qwen35-tiny-f32-$trained.json" 2>&1 | head -1)
case $banner in *"context $trained tokens"* | *"context "*" tokens"*) ;; *) bad "the trained-context bundle's chat: $banner" ;; esac
free_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
[ "$free_kb" -gt $((4 << 20)) ] && case $banner in *"context $trained tokens"*) ;; *) bad "with ${free_kb} kB free the tiny model's trained context should fit: $banner" ;; esac
"$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/ctx-300" --precision w8 --max-context 300 --quiet || bad "forge --max-context 300"
banner=$(echo | "$QHX" chat -m "$tmp/ctx-300/qwen35-tiny-f32-300.json" 2>&1 | head -1)
case $banner in *"context 300 tokens"*) ;; *) bad "the 300-token bundle's chat: $banner" ;; esac
banner=$(echo | "$QHX" chat -m "$tmp/ctx-300/qwen35-tiny-f32-300.json" --ctx 2000 2>&1 | head -1)
case $banner in *"context 2000 tokens"*) ;; *) bad "--ctx 2000 on the 300-token bundle: $banner" ;; esac
expect_rc 1 "exceeds" "$QHX" chat -m "$tmp/ctx-300/qwen35-tiny-f32-300.json" --ctx $((trained + 1))
expect_rc 2 "1048576" "$QHX" forge "$FX/qwen35-tiny-f32" "$tmp/ctx-big" --precision w8 --max-context 2000000

[ "$fail" = 0 ] && echo "forge: all checks passed"
exit $fail
