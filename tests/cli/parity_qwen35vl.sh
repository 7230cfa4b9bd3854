#!/usr/bin/env bash
# qhx logits + qhx generate on the text prompts of qwen35vl-tiny-f32 (Qwen3.5 with a vision tower),
# through qhexrt's Qwen3.5 text path, checked by the oracle against the llama.cpp goldens and the
# Hugging Face goldens. Its image prompts are left out: qhexrt has no Qwen3.5 image path yet.
# Run as: bash parity_qwen35vl.sh BIN_DIR DATA_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
DATA=$2
. "$(dirname "$0")/lib/parity_run.sh"
parity_run parity_qwen35vl 'qwen35vl-*' text-only
