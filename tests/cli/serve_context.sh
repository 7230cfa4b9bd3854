#!/usr/bin/env bash
# qhx serve's context shift: a 50-turn chat in a 512-token context never refused, the oldest
# turns after the system prompt dropped (usage "truncated", the kept prompt's tokens equal to the
# chat format's rendering of the kept turns), --no-context-shift refusing instead, structured
# output cut by max_tokens said to be cut (tests/serve/test_context.py; the standard library only).
# Usage: serve_context.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
cd "$3/tests/serve" && timeout 600 python3 test_context.py "$1/qhx" "$2"
