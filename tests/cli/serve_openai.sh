#!/usr/bin/env bash
# qhx serve driven by the official openai Python client: chat (plain and streamed, 4 parallel
# streams), stop strings, seeds, logprobs, tools, prompt reuse, thinking, completions, errors,
# an image on the Qwen3-VL fixture; answers compared with qhx generate (tests/serve/test_openai.py).
# The client comes from PyPI into a virtual environment under the build folder (build/serve-venv);
# without PyPI the test is skipped (exit 77), saying so.
# Usage: serve_openai.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 DATA=$2 SRC=$3
VENV=$(cd "$BIN/.." && pwd)/serve-venv
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
if ! "$VENV/bin/python" -c "import openai" 2>/dev/null; then
  python3 -m venv "$VENV" || { echo "FAIL: python3 -m venv failed (scripts/deps.sh installs python3-venv)" >&2; exit 1; }
  if ! timeout 300 "$VENV/bin/pip" install -q --disable-pip-version-check "openai>=1.0" >"$VENV/pip.log" 2>&1; then
    echo "SKIP: the openai client could not be installed from PyPI (unreachable?); see $VENV/pip.log"
    exit 77
  fi
fi
cd "$SRC/tests/serve" && timeout 600 "$VENV/bin/python" test_openai.py "$BIN/qhx" "$DATA"
