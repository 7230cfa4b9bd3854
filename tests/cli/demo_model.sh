#!/usr/bin/env bash
# CLI test of the shipped demo model (models/shakespeare) against the goldens transformers made
# (tests/data/demo; make test-hf passes a fresh set as DEMO_GOLDEN): tokenizer ids, perplexity
# (and a random model's, near the vocabulary size), KL against a base run, greedy continuations,
# the multi-token-prediction block's draft logits. See tests/cli/lib/demo_model_check.py.
# usage: bash demo_model.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1/qhx
DATA=$2
SRC=$3
MODEL=$SRC/models/shakespeare
GOLD=${DEMO_GOLDEN:-$DATA/demo}
command -v python3 >/dev/null || { echo "FAIL: python3 not found (scripts/deps.sh installs it)" >&2; exit 1; }
[ -f "$MODEL/model.safetensors" ] || { echo "FAIL: $MODEL is missing (it is part of the tree)" >&2; exit 1; }
[ -f "$GOLD/golden.json" ] || { echo "FAIL: no goldens at $GOLD (tests/hf/demo_model.py --write makes them)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
python3 "$(dirname "$0")/lib/demo_model_check.py" "$BIN" "$MODEL" "$GOLD" "$DATA/demo" "$TMP"
