#!/usr/bin/env bash
# A bounded load test of qhx serve (tests/serve/load.py): 500 requests over 8 connections, a
# third streamed, one in seven cancelled mid-way; every answer right, none lost, RSS bounded.
# Usage: serve_load.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
# A sanitizer's allocator holds freed memory in quarantine, so RSS says nothing there; its
# leak check at exit does (the RSS bound is kept for the plain build).
BUILD=$(cd "$1/.." && pwd)
if grep -qE '^QHX_(SANITIZE|TSAN):BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then export QHX_TEST_NO_RSS=1; fi
cd "$3/tests/serve" && timeout 600 python3 load.py "$1/qhx" "$2" 500 8
