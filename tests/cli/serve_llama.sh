#!/usr/bin/env bash
# qhx serve as llama-server's users drive it: its flag spellings (-c/--ctx-size, -t, -np, -a,
# --host with names and IPv6), a busy port, the access log (text and JSON) and llama-server's
# endpoints in its shapes (tests/serve/test_llama.py); the Python standard library only.
# Usage: serve_llama.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
cd "$3/tests/serve" && timeout 600 python3 test_llama.py "$1/qhx" "$2"
