#!/usr/bin/env bash
# qhx serve's web chat page in a real browser: Debian's chromium, headless, driven over the
# DevTools protocol from Python's standard library (tests/serve/test_web.py, tests/serve/cdp.py)
# on the demo model: no console error, a streamed answer, stop, regenerate, edit, a reload,
# hostile Markdown, the API key, an image on the Qwen3-VL fixture. Screenshots at desktop and
# phone widths go to the build folder's web-shots/, or to $QHX_WEB_SHOTS (the ones in docs/ were
# taken with QHX_WEB_SHOTS=$PWD/docs ctest -R cli_web_chat). Without chromium the test is skipped
# (exit 77); scripts/deps.sh installs it, so CI runs it.
# Usage: web_chat.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 DATA=$2 SRC=$3
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  echo "SKIP: no chromium (scripts/deps.sh installs it)"
  exit 77
fi
SHOTS=${QHX_WEB_SHOTS:-$(cd "$BIN/.." && pwd)/web-shots}
cd "$SRC/tests/serve" && timeout 600 python3 test_web.py "$BIN/qhx" "$DATA" "$SRC/models/shakespeare" "$SHOTS"
