#!/usr/bin/env bash
# libqhx.so exports exactly the functions qhx.h declares with QHX_API.
# Run as: bash exports.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
LIB=$1/../lib/libqhx.so
HDR=$3/include/qhx.h
[ -f "$LIB" ] || { echo "exports: $LIB missing"; exit 1; }
command -v nm >/dev/null || { echo "FAIL: exports: nm missing (scripts/deps.sh installs it)" >&2; exit 1; }
declared=$(grep -v '^#' "$HDR" | tr '\n' ' ' | grep -o 'QHX_API[^;]*(' | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort -u)
exported=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TW]$/ {print $3}' | grep -v '^_' | sort -u)
if [ "$declared" != "$exported" ]; then
  echo "FAIL: exports differ from qhx.h (< declared only, > exported only):"
  diff <(echo "$declared") <(echo "$exported")
  exit 1
fi
echo "exports: $(echo "$declared" | wc -l) functions match qhx.h"
