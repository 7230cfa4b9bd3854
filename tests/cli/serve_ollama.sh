#!/usr/bin/env bash
# qhx serve driven by ollama's official Python client: /api/chat and /api/generate (streamed
# and not), options, format (JSON and a schema), think, images, tools, keep_alive, /api/tags,
# /api/show, /api/ps, /api/version; greedy answers compared with qhx generate
# (tests/serve/test_ollama.py). The client comes from PyPI into the virtual environment
# serve_openai.sh uses (build/serve-venv); without PyPI the test is skipped (exit 77), saying so.
# Usage: serve_ollama.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 DATA=$2 SRC=$3
VENV=$(cd "$BIN/.." && pwd)/serve-venv
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
if ! "$VENV/bin/python" -c "import ollama" 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || { echo "FAIL: python3 -m venv failed (scripts/deps.sh installs python3-venv)" >&2; exit 1; }
  if ! timeout 300 "$VENV/bin/pip" install -q --disable-pip-version-check ollama >"$VENV/pip-ollama.log" 2>&1; then
    echo "SKIP: the ollama client could not be installed from PyPI (unreachable?); see $VENV/pip-ollama.log"
    exit 77
  fi
fi
cd "$SRC/tests/serve" && timeout 600 "$VENV/bin/python" test_ollama.py "$BIN/qhx" "$DATA"
