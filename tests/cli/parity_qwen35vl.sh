#!/usr/bin/env bash
# qhx embed-image, qhx logits and qhx generate on every prompt of qwen35vl-tiny-f32 (Qwen3.5 with
# a vision tower): the 6 text prompts and the 2 image prompts, through qhexrt's Qwen3.5 image
# path (checkpoint folder opened with its tower for --image), checked by the oracle against the
# llama.cpp goldens and the Hugging Face goldens.
# Run as: bash parity_qwen35vl.sh BIN_DIR DATA_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
DATA=$2
. "$(dirname "$0")/lib/parity_run.sh"
parity_run parity_qwen35vl 'qwen35vl-*'
