#!/usr/bin/env bash
# qhx serve against hostile client input (tests/serve/test_hostile.py): every failure a client can
# cause is a 4xx in the OpenAI error shape, a stream failing after it began ends with an error
# event, a finish_reason and [DONE], a streamed request refused before its first token gets its
# status; tool names per chat format, images outside user messages, structural bombs answered in
# bounded time, wrong JSON types for every field. The standard library, and the openai client
# when serve_openai.sh has installed it (build/serve-venv).
# Usage: serve_hostile.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 DATA=$2 SRC=$3
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
PY=python3
VENV=$(cd "$BIN/.." && pwd)/serve-venv
"$VENV/bin/python" -c "import openai" 2>/dev/null && PY=$VENV/bin/python
cd "$SRC/tests/serve" && timeout 800 "$PY" test_hostile.py "$BIN/qhx" "$DATA"
