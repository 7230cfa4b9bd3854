#!/usr/bin/env bash
# qhx serve's embeddings endpoints (/v1/embeddings, /embedding, /api/embed, /api/embeddings)
# through the official openai and ollama Python clients, each embedding checked against the
# model's own logits (tests/serve/test_embeddings.py). The clients come from PyPI into the
# virtual environment under the build folder (build/serve-venv); without PyPI the test is
# skipped (exit 77), saying so.
# Usage: serve_embeddings.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 DATA=$2 SRC=$3
VENV=$(cd "$BIN/.." && pwd)/serve-venv
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
if ! "$VENV/bin/python" -c "import openai, ollama" 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || { echo "FAIL: python3 -m venv failed (scripts/deps.sh installs python3-venv)" >&2; exit 1; }
  if ! timeout 300 "$VENV/bin/pip" install -q --disable-pip-version-check "openai>=1.0" ollama >"$VENV/pip-embed.log" 2>&1; then
    echo "SKIP: the openai and ollama clients could not be installed from PyPI (unreachable?); see $VENV/pip-embed.log"
    exit 77
  fi
fi
cd "$SRC/tests/serve" && timeout 600 "$VENV/bin/python" test_embeddings.py "$BIN/qhx" "$DATA"
