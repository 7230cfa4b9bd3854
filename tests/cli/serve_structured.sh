#!/usr/bin/env bash
# qhx serve's structured output (response_format, json_schema, grammar): every answer validates
# with python3-jsonschema; bad schemas and conflicting fields are 400 (tests/serve/test_structured.py).
# Usage: serve_structured.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
cd "$3/tests/serve" && timeout 600 python3 test_structured.py "$1/qhx" "$2"
