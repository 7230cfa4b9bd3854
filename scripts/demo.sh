#!/usr/bin/env bash
# make demo: streaming text generation with the small model shipped in the tree
# (models/shakespeare: a 4.3M-parameter Qwen3.5-architecture model, Gated DeltaNet + gated
# attention, trained here on Shakespeare's plays by scripts/train_demo.py). It writes
# Shakespeare-like verse: real words, names and speech headings, seldom sense. It shows the
# pipeline (tokenizer -> chunked prefill -> decode -> sampling -> streaming) and its speed.
set -euo pipefail
cd "$(dirname "$0")/.."
QHX=build/bin/qhx
MODEL=${DEMO_MODEL:-models/shakespeare}
[ -x "$QHX" ] || { echo "demo: build/bin/qhx is missing (run make)" >&2; exit 1; }
[ -f "$MODEL/model.safetensors" ] || { echo "demo: $MODEL is missing (it is part of the tree: is this a complete checkout?)" >&2; exit 1; }
echo "demo: a 4.3M-parameter model trained on Shakespeare's plays (models/shakespeare/README.md):"
echo "demo: it has learnt the words and the shape of a play, not meaning."
echo "demo: qhx generate -m $MODEL -p \$'ROMEO:\\n' -n 120 --seed 1 --temp 0.8 --top-k 40"
echo "----"
"$QHX" generate -m "$MODEL" -p $'ROMEO:\n' -n 120 --seed 1 --temp 0.8 --top-k 40
echo "----"
echo "demo: qhx generate -m $MODEL -p \$'KING RICHARD III:\\nNow is the winter of our discontent' -n 80 --seed 2 --temp 0.7"
echo "----"
"$QHX" generate -m "$MODEL" -p $'KING RICHARD III:\nNow is the winter of our discontent' -n 80 --seed 2 --temp 0.7 --top-k 40
