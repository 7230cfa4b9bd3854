#!/usr/bin/env bash
# qhx logits + qhx generate on every qwen35-* parity fixture, checked by the oracle
# (parity_gate.py: greedy-exact and teacher-forced logits within tolerance).
# Run as: bash parity.sh BIN_DIR DATA_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
DATA=$2
. "$(dirname "$0")/lib/parity_run.sh"
parity_run parity 'qwen35-*'
