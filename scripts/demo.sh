#!/usr/bin/env bash
# make demo: streaming text generation on a small random-weight Qwen3.5-shaped model with the
# real Qwen3 tokenizer. The weights are random, so the text is NOT meaningful: the demo shows
# the pipeline (tokenizer -> chunked prefill -> decode -> sampling -> streaming) and its speed.
set -euo pipefail
cd "$(dirname "$0")/.."
QHX=build/bin/qhx
TOK=tests/data/fixtures/tokenizer/qwen3/tokenizer.json
MODEL=build/demo-model
[ -x "$QHX" ] || { echo "demo: build/bin/qhx is missing (run make)" >&2; exit 1; }
[ -f "$TOK" ] || { echo "demo: $TOK is missing (it is part of the tree: is this a complete checkout?)" >&2; exit 1; }
if [ ! -f "$MODEL/config.json" ]; then
  echo "demo: making a random-weight demo model (hidden 256, 8 layers, Qwen3 tokenizer) in $MODEL"
  rm -rf "$MODEL"
  "$QHX" forge --random qwen3_5 "$MODEL" --preset demo --seed 7 --tokenizer "$TOK" --quiet
fi
echo "demo: the weights are random: the text below is not meaningful, only the pipeline and speed are."
echo "demo: qhx generate -m $MODEL -p 'The capital of France is' -n 64 --seed 1"
echo "----"
"$QHX" generate -m "$MODEL" -p "The capital of France is" -n 64 --seed 1 --temp 0.8 --top-k 40
echo "----"
echo "demo: chat format + greedy: qhx generate -m $MODEL -p 'Hello!' --chat -n 32 --greedy"
"$QHX" generate -m "$MODEL" -p "Hello!" --chat -n 32 --greedy
