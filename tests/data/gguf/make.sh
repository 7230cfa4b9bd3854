#!/usr/bin/env bash
# Regenerates tests/data/gguf/: GGUF files made by llama.cpp's own converter and llama-quantize
# from the parity checkpoints (and one 256-wide checkpoint), and llama.cpp's greedy goldens on
# them. README.md in this folder says what each file is and which llama.cpp made it.
#
#   tests/data/gguf/make.sh LLAMA_SRC LLAMA_BUILD
#
# LLAMA_SRC    a llama.cpp source tree (convert_hf_to_gguf.py, gguf-py); these files: f728adab
# LLAMA_BUILD  its CPU build folder, already built, holding bin/llama-quantize and libllama
# Environment (all required unless a default is given):
#   CONVERT_SHIM  convert_shim.py (runs convert_hf_to_gguf.py unchanged without `transformers`;
#                 README.md "Tools")
#   GREEDY        the llama_greedy_ids runner built against LLAMA_BUILD's libllama
#   GGUF_PY       a python with the `gguf` package (MANIFEST.tsv); default python3
#   PYTHON        the converter's python (torch, numpy, sentencepiece, tqdm); default /usr/bin/python3
#   WORK          scratch folder for the F32 conversions and logs, outside this repository;
#                 default a new mktemp -d folder
# This script builds nothing: build llama.cpp and the runner beforehand, outside the repository.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 LLAMA_SRC LLAMA_BUILD (env CONVERT_SHIM, GREEDY; optional GGUF_PY, PYTHON, WORK)" >&2
    exit 2
fi
LLAMA_SRC=$(cd "$1" && pwd)
LLAMA_BUILD=$(cd "$2" && pwd)
: "${CONVERT_SHIM:?set CONVERT_SHIM to convert_shim.py}"
: "${GREEDY:?set GREEDY to the llama_greedy_ids binary}"
PYTHON=${PYTHON:-/usr/bin/python3}
GGUF_PY=${GGUF_PY:-python3}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$(cd "$HERE/.." && pwd)
PARITY=$DATA/fixtures/parity
REPO=$(cd "$DATA/../.." && pwd)
QUANTIZE=$LLAMA_BUILD/bin/llama-quantize
for d in "$LLAMA_SRC" "$LLAMA_BUILD" "$WORK"; do
    case "$d/" in "$REPO"/*) echo "make.sh: $d is inside the repository; keep llama.cpp and scratch outside" >&2; exit 2;; esac
done
[ -f "$LLAMA_SRC/convert_hf_to_gguf.py" ] || { echo "make.sh: $LLAMA_SRC has no convert_hf_to_gguf.py" >&2; exit 2; }
[ -x "$QUANTIZE" ] || { echo "make.sh: $QUANTIZE not found (build llama.cpp first)" >&2; exit 2; }
[ -x "$GREEDY" ] || { echo "make.sh: GREEDY=$GREEDY is not executable" >&2; exit 2; }

# convert PRE SRC_DIR OUT_NAME [converter args...]  -> $WORK/OUT_NAME
convert() {
    local pre=$1 src=$2 out=$3; shift 3
    echo "convert $out" >&2
    LLAMA_SRC=$LLAMA_SRC QHX_PIN_PRE=$pre "$PYTHON" "$CONVERT_SHIM" "$src" "$@" \
        --outfile "$WORK/$out" >"$WORK/$out.log" 2>&1
}

# quantize STEM TYPE...  -> $WORK/STEM-TYPE.gguf from $WORK/STEM-F32.gguf, 2 threads
quantize() {
    local stem=$1; shift
    for t in "$@"; do
        echo "quantize $stem $t" >&2
        "$QUANTIZE" "$WORK/$stem-F32.gguf" "$WORK/$stem-$t.gguf" "$t" 2 >"$WORK/$stem-$t.log" 2>&1
        cp "$WORK/$stem-$t.gguf" "$HERE/"
    done
}

# 1. the 256-wide checkpoint (every weight row a multiple of 256, so K- and IQ4 quants apply)
"$PYTHON" "$DATA/oracle/make_tiny.py" --spec "$HERE/qwen35-k256.spec.json" --out "$WORK/qwen35-k256-f32"

# 2. F32 conversions (the MTP block is kept unless --no-mtp) and vision towers
convert qwen35 "$PARITY/qwen35-tiny-f32" qwen35-tiny-F32.gguf --outtype f32
convert qwen35 "$PARITY/qwen35-tiny-vrep-f32" qwen35-tiny-vrep-F32.gguf --outtype f32
convert qwen35 "$PARITY/qwen35-tiny-untied-f32" qwen35-tiny-untied-F32.gguf --outtype f32
cp "$WORK/qwen35-tiny-untied-F32.gguf" "$HERE/"
convert qwen2 "$PARITY/qwen3vl-tiny-f32" qwen3vl-tiny-F32.gguf --outtype f32
convert qwen35 "$PARITY/qwen35vl-tiny-f32" qwen35vl-tiny-F32.gguf --outtype f32
convert qwen35 "$WORK/qwen35-k256-f32" qwen35-k256-F32.gguf --outtype f32 --no-mtp
convert qwen2 "$PARITY/qwen3vl-tiny-f32" mmproj-qwen3vl-tiny-F16.gguf --mmproj --outtype f16
convert qwen2 "$PARITY/qwen3vl-tiny-f32" mmproj-qwen3vl-tiny-Q8_0.gguf --mmproj --outtype q8_0
convert qwen35 "$PARITY/qwen35vl-tiny-f32" mmproj-qwen35vl-tiny-F16.gguf --mmproj --outtype f16
cp "$WORK"/mmproj-*.gguf "$HERE/"

# 3. llama-quantize
# (Q6_K is not made from the 64-wide models: every tensor falls back to Q8_0, so the file equals
# the Q8_0 one but for general.file_type.)
quantize qwen35-tiny F16 Q8_0 Q4_0 Q4_K_M
quantize qwen35-tiny-vrep F16 Q8_0
# (the untied case: F16 only; its DeltaNet value width 144 is no multiple of 32, and llama-quantize
# has no Q8_0 fallback for such rows)
quantize qwen35-tiny-untied F16
quantize qwen3vl-tiny F16 Q8_0 Q4_0 Q4_K_M
quantize qwen35vl-tiny Q8_0
quantize qwen35-k256 Q4_K_M Q5_K_M Q6_K Q2_K Q3_K_M IQ4_NL IQ4_XS Q4_1 Q5_0 Q5_1

# 4. goldens: greedy ids and margins for every text prompt, logits for p007 and p064
prompts_of() {
    case "$1" in
        qwen35-tiny-vrep-*) echo "$PARITY/qwen35-tiny-vrep-f32/prompts.json" ;;
        qwen35-tiny-untied-*) echo "$PARITY/qwen35-tiny-untied-f32/prompts.json" ;;
        qwen35-tiny-* | qwen35-k256-*) echo "$PARITY/qwen35-tiny-f32/prompts.json" ;;
        qwen35vl-tiny-*) echo "$PARITY/qwen35vl-tiny-f32/prompts.json" ;;
        qwen3vl-tiny-*) echo "$PARITY/qwen3vl-tiny-f32/prompts.json" ;;
        *) echo "make.sh: no prompts for $1" >&2; exit 1 ;;
    esac
}
for f in "$HERE"/*.gguf; do
    stem=$(basename "$f" .gguf)
    case "$stem" in mmproj-*) continue ;; esac
    echo "goldens $stem" >&2
    "$PYTHON" "$HERE/goldens.py" "$GREEDY" "$f" "$(prompts_of "$stem")" "$HERE/$stem" \
        --logits p007,p064 -n 31 -t 2
done

# 5. what each file really holds
"$GGUF_PY" "$HERE/manifest.py" "$HERE" >"$HERE/MANIFEST.tsv"
echo "done; conversions and logs in $WORK" >&2
