#!/usr/bin/env bash
# KL and top-1 agreement of qhexrt's quantized bundles and llama.cpp's quantizations of the same
# checkpoint, against the unquantized model, over the same teacher-forced token sequences.
#
#   QHX=build/bin/qhx LLAMA_DUMP=... LLAMA_QUANTIZE=... CONVERT="..." \
#     bash bench/kl_vs_llama.sh CHECKPOINT_DIR WORK_DIR [SEQS_FILE]
#
# LLAMA_DUMP: the libllama logits dumper (ids in, float32 [rows, vocab] out: --ids P --force C
#   --logits-out F), LLAMA_QUANTIZE: llama-quantize, CONVERT: a command that takes
#   "HF_DIR --outtype f32 --outfile OUT.gguf" and writes llama.cpp's own conversion; all three
#   come from a llama.cpp build outside this tree (nothing here builds it).
# SEQS_FILE: lines "PROMPT_IDS<TAB>CONTINUATION_IDS" (comma-separated); without it, a parity
#   fixture's prompts.json + golden.json greedy tokens are used (CHECKPOINT_DIR is the fixture).
# QHX_FORMATS: the qhx precisions forged and compared (default "w8 q4 q4a"); QHX_FORGE_ARGS: more
#   qhx forge options for each of them (those bundles are kept in WORK under their own names).
# LLAMA_FORMATS: the llama-quantize types compared (default "Q8_0 Q4_0 Q4_K_M Q5_K_M Q6_K").
# KL_REUSE=1 keeps logits dumps already in WORK (non-empty files) instead of computing them again.
# LLAMA_F32_CHECK=0 leaves out llama.cpp's own f32 run against the reference (a check of the
#   conversion, KL ~1e-8; on the 2B shapes the slowest of the dumps).
# Sizes: whole files, and "data" (the tensor payload without headers: bench/data_bytes.py), the
#   fair column on tiny models, where GGUF metadata is a tenth of the file.
# Reference: qhx logits on the checkpoint itself (f32 or bf16 math on the stored weights).
set -euo pipefail
CK=$1 WORK=$2 SEQS=${3:-}
: "${QHX:?}" "${LLAMA_DUMP:?}" "${LLAMA_QUANTIZE:?}" "${CONVERT:?}"
HERE=$(cd "$(dirname "$0")" && pwd)
FORMATS=${QHX_FORMATS:-w8 q4 q4a} FARGS=${QHX_FORGE_ARGS:-}
LFORMATS=${LLAMA_FORMATS:-Q8_0 Q4_0 Q4_K_M Q5_K_M Q6_K}
sfx=$(printf '%s' "$FARGS" | tr -cs 'A-Za-z0-9.' _)  # bundle folder suffix: "" without options
PY=
for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && { PY=$p; break; }; done
[ -n "$PY" ] || { echo "kl_vs_llama: no python3 with numpy" >&2; exit 1; }
mkdir -p "$WORK"
if [ -z "$SEQS" ]; then
  SEQS=$WORK/seqs.tsv
  python3 - "$CK" >"$SEQS" <<'PY'
import json, os, sys
fx = sys.argv[1]
g = json.load(open(os.path.join(fx, "golden.json")))["prompts"]
for p in json.load(open(os.path.join(fx, "prompts.json"))):
    if "image" in p:
        continue
    print("%s\t%s" % (",".join(map(str, p["ids"])), ",".join(map(str, g[p["name"]]["greedy"]))))
PY
fi
vocab=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c.get("text_config", c)["vocab_size"])' "$CK/config.json")

[ -f "$WORK/F32.gguf" ] || $CONVERT "$CK" --outtype f32 --outfile "$WORK/F32.gguf" >"$WORK/convert.log" 2>&1
for q in $LFORMATS; do
  [ -f "$WORK/$q.gguf" ] || "$LLAMA_QUANTIZE" "$WORK/F32.gguf" "$WORK/$q.gguf" "$q" 2 >"$WORK/quantize-$q.log" 2>&1
done
for p in $FORMATS; do
  # shellcheck disable=SC2086  # FARGS is a list of options
  [ -d "$WORK/qhx-$p$sfx" ] || "$QHX" forge "$CK" "$WORK/qhx-$p$sfx" --precision "$p" --quiet $FARGS
done

dump_qhx() { # model out
  [ -n "${KL_REUSE:-}" ] && [ -s "$2" ] && return
  : >"$2"
  while IFS=$'\t' read -r prompt cont; do
    "$QHX" logits -m "$1" --ids "$prompt,$cont" --out "$WORK/one.f32" >/dev/null
    cat "$WORK/one.f32" >>"$2"
  done <"$SEQS"
}
dump_llama() { # gguf out
  [ -n "${KL_REUSE:-}" ] && [ -s "$2" ] && return
  : >"$2"
  while IFS=$'\t' read -r prompt cont; do
    "$LLAMA_DUMP" -m "$1" --ids "$prompt" --force "$cont" --logits-out "$WORK/one.f32" >/dev/null 2>&1
    cat "$WORK/one.f32" >>"$2"
  done <"$SEQS"
}
dump_qhx "$CK" "$WORK/ref.f32"
args=()
for p in $FORMATS; do
  dump_qhx "$WORK/qhx-$p$sfx" "$WORK/qhx-$p$sfx.f32"; args+=("qhx-$p=$WORK/qhx-$p$sfx.f32")
done
if [ "${LLAMA_F32_CHECK:-1}" != 0 ]; then
  dump_llama "$WORK/F32.gguf" "$WORK/llama-F32.f32"
  args+=("llama-F32=$WORK/llama-F32.f32")
fi
for q in $LFORMATS; do dump_llama "$WORK/$q.gguf" "$WORK/llama-$q.f32"; args+=("llama-$q=$WORK/llama-$q.f32"); done
[ -z "$FARGS" ] || echo "qhx forge options: $FARGS"
"$PY" "$HERE/kl_compare.py" "$vocab" "$WORK/ref.f32" "${args[@]}"
echo "sizes (bytes of weights: whole files, data):"
for p in $FORMATS; do
  printf '  qhx-%s %s %s\n' "$p" "$(cat "$WORK/qhx-$p$sfx"/*.safetensors | wc -c)" \
    "$("$PY" "$HERE/data_bytes.py" "$WORK/qhx-$p$sfx"/*.safetensors)"
done
for q in F32 $LFORMATS; do
  printf '  llama-%s %s %s\n' "$q" "$(stat -c %s "$WORK/$q.gguf")" "$("$PY" "$HERE/data_bytes.py" "$WORK/$q.gguf")"
done
