#!/usr/bin/env bash
# qhx embed-image + logits + generate on every qwen3vl-* parity fixture (text and image prompts),
# checked by the oracle (parity_gate.py: greedy-exact, teacher-forced logits and image
# embeddings within tolerance).
# Run as: bash parity_vl.sh BIN_DIR DATA_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
DATA=$2
. "$(dirname "$0")/lib/parity_run.sh"
parity_run parity_vl 'qwen3vl-*'
